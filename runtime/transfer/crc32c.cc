#include "runtime/transfer/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace lockstep::transfer {
namespace {

// Polynomials are kept reflected: bit 31 is the coefficient of x^0.
constexpr uint32_t kPoly = 0x82F63B78u;

// a(x) * b(x) mod P(x).
uint32_t MultModP(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (int i = 31; i >= 0; --i) {
    if (a & (1u << i)) product ^= b;
    b = (b & 1) ? (b >> 1) ^ kPoly : b >> 1;
  }
  return product;
}

// x^(8 * n) mod P(x), by squaring.
uint32_t XPow8N(size_t n) {
  uint32_t result = 1u << 31;  // x^0
  uint32_t power = 1u << 23;   // x^8
  while (n != 0) {
    if (n & 1) result = MultModP(power, result);
    power = MultModP(power, power);
    n >>= 1;
  }
  return result;
}

// Multiplying a CRC register by x^(8 * len) appends `len` zero bytes; the operation
// is linear, so it is a lookup per byte of the register.
struct ShiftTable {
  explicit ShiftTable(size_t len) {
    const uint32_t op = XPow8N(len);
    for (int k = 0; k < 4; ++k) {
      for (uint32_t b = 0; b < 256; ++b) table[k][b] = MultModP(op, b << (8 * k));
    }
  }
  uint32_t Shift(uint32_t crc) const {
    return table[0][crc & 0xff] ^ table[1][(crc >> 8) & 0xff] ^ table[2][(crc >> 16) & 0xff] ^
           table[3][crc >> 24];
  }
  std::array<std::array<uint32_t, 256>, 4> table;
};

const std::array<uint32_t, 256>& ByteTable() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t c = b;
      for (int i = 0; i < 8; ++i) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
      t[b] = c;
    }
    return t;
  }();
  return table;
}

#if defined(__x86_64__)

// Bytes per stream in the long and short interleaved rounds.
constexpr size_t kLong = 8192;
constexpr size_t kShort = 256;

inline uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Three independent crc32 chains over consecutive `len`-byte spans starting at `p`
// (the instruction has a latency of three cycles and a throughput of one), joined with
// two shifts.
__attribute__((target("sse4.2"))) inline uint32_t ThreeWay(uint32_t crc, const uint8_t* p,
                                                           size_t len, const ShiftTable& shift) {
  uint64_t c0 = crc;
  uint64_t c1 = 0;
  uint64_t c2 = 0;
  const uint8_t* end = p + len;
  for (; p < end; p += 8) {
    c0 = _mm_crc32_u64(c0, Load64(p));
    c1 = _mm_crc32_u64(c1, Load64(p + len));
    c2 = _mm_crc32_u64(c2, Load64(p + 2 * len));
  }
  uint32_t joined = shift.Shift(static_cast<uint32_t>(c0)) ^ static_cast<uint32_t>(c1);
  return shift.Shift(joined) ^ static_cast<uint32_t>(c2);
}

__attribute__((target("sse4.2"))) uint32_t ExtendHardware(uint32_t crc, const uint8_t* p,
                                                          size_t n) {
  static const ShiftTable* const long_shift = new ShiftTable(kLong);
  static const ShiftTable* const short_shift = new ShiftTable(kShort);
  uint32_t c = ~crc;
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    c = _mm_crc32_u8(c, *p++);
    --n;
  }
  for (; n >= 3 * kLong; p += 3 * kLong, n -= 3 * kLong) c = ThreeWay(c, p, kLong, *long_shift);
  for (; n >= 3 * kShort; p += 3 * kShort, n -= 3 * kShort) {
    c = ThreeWay(c, p, kShort, *short_shift);
  }
  uint64_t c64 = c;
  for (; n >= 8; p += 8, n -= 8) c64 = _mm_crc32_u64(c64, Load64(p));
  c = static_cast<uint32_t>(c64);
  for (; n > 0; --n) c = _mm_crc32_u8(c, *p++);
  return ~c;
}

bool HasHardware() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}

#else

bool HasHardware() { return false; }

#endif

}  // namespace

uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t size) {
  const std::array<uint32_t, 256>& table = ByteTable();
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  for (size_t i = 0; i < size; ++i) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return ~c;
}

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size) {
#if defined(__x86_64__)
  if (HasHardware()) return ExtendHardware(crc, static_cast<const uint8_t*>(data), size);
#endif
  return Crc32cExtendPortable(crc, data, size);
}

bool Crc32cIsAccelerated() { return HasHardware(); }

}  // namespace lockstep::transfer
