#include "runtime/transfer/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
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

// x^n mod P(x), by squaring.
uint32_t XPow(uint64_t n) {
  uint32_t result = 1u << 31;  // x^0
  uint32_t power = 1u << 30;   // x^1
  while (n != 0) {
    if (n & 1) result = MultModP(power, result);
    power = MultModP(power, power);
    n >>= 1;
  }
  return result;
}

uint32_t XPow8N(size_t n) { return XPow(8 * static_cast<uint64_t>(n)); }

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

// The crc32 instruction: one step of 8 bytes and one of a byte, on either architecture.
#if defined(__x86_64__)
#define LOCKSTEP_CRC32_TARGET __attribute__((target("sse4.2")))
LOCKSTEP_CRC32_TARGET inline uint64_t Crc32Step(uint64_t crc, uint64_t v) {
  return _mm_crc32_u64(crc, v);
}
LOCKSTEP_CRC32_TARGET inline uint32_t Crc32StepByte(uint32_t crc, uint8_t v) {
  return _mm_crc32_u8(crc, v);
}
bool HasInstruction() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#elif defined(__aarch64__)
// (arm_acle.h declares __crc32cd only where the whole build targets the extension; the
// instruction itself, enabled for these lines, serves both compilers.)
#define LOCKSTEP_CRC32_TARGET
inline uint64_t Crc32Step(uint64_t crc, uint64_t v) {
  uint32_t c = static_cast<uint32_t>(crc);
  asm(".arch_extension crc\n\tcrc32cx %w0, %w0, %x1" : "+r"(c) : "r"(v));
  return c;
}
inline uint32_t Crc32StepByte(uint32_t crc, uint8_t v) {
  asm(".arch_extension crc\n\tcrc32cb %w0, %w0, %w1" : "+r"(crc) : "r"(static_cast<uint32_t>(v)));
  return crc;
}
bool HasInstruction() {
  static const bool has = (getauxval(AT_HWCAP) & HWCAP_CRC32) != 0;
  return has;
}
#else
bool HasInstruction() { return false; }
#endif

#if defined(LOCKSTEP_CRC32_TARGET)

// Bytes per stream in the long and short interleaved rounds.
constexpr size_t kLong = 8192;
constexpr size_t kShort = 256;

inline uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Three independent crc32 chains over consecutive `len`-byte spans starting at `p`
// (the instruction's latency is about three times its issue interval on both
// architectures), joined with two shifts.
LOCKSTEP_CRC32_TARGET inline uint32_t ThreeWay(uint32_t crc, const uint8_t* p, size_t len,
                                               const ShiftTable& shift) {
  uint64_t c0 = crc;
  uint64_t c1 = 0;
  uint64_t c2 = 0;
  const uint8_t* end = p + len;
  for (; p < end; p += 8) {
    c0 = Crc32Step(c0, Load64(p));
    c1 = Crc32Step(c1, Load64(p + len));
    c2 = Crc32Step(c2, Load64(p + 2 * len));
  }
  uint32_t joined = shift.Shift(static_cast<uint32_t>(c0)) ^ static_cast<uint32_t>(c1);
  return shift.Shift(joined) ^ static_cast<uint32_t>(c2);
}

LOCKSTEP_CRC32_TARGET uint32_t ExtendInstruction(uint32_t crc, const uint8_t* p, size_t n) {
  static const ShiftTable* const long_shift = new ShiftTable(kLong);
  static const ShiftTable* const short_shift = new ShiftTable(kShort);
  uint32_t c = ~crc;
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    c = Crc32StepByte(c, *p++);
    --n;
  }
  for (; n >= 3 * kLong; p += 3 * kLong, n -= 3 * kLong) c = ThreeWay(c, p, kLong, *long_shift);
  for (; n >= 3 * kShort; p += 3 * kShort, n -= 3 * kShort) {
    c = ThreeWay(c, p, kShort, *short_shift);
  }
  uint64_t c64 = c;
  for (; n >= 8; p += 8, n -= 8) c64 = Crc32Step(c64, Load64(p));
  c = static_cast<uint32_t>(c64);
  for (; n > 0; --n) c = Crc32StepByte(c, *p++);
  return ~c;
}

#endif  // LOCKSTEP_CRC32_TARGET

#if defined(__x86_64__)

constexpr size_t kFoldMin = 256;  // bytes per round of the folding loop

// Carry-less multiplication folding (the method of Intel's "Fast CRC Computation for
// Generic Polynomials Using PCLMULQDQ"). A 128-bit lane S (reflected: bit k is the
// coefficient of x^(127 - k)) splits into A = its low qword (x^64..x^127) and B = its
// high qword; moving it `d` bytes forward is A * x^(8d + 64) + B * x^(8d) mod P. A
// reflected 64-bit carry-less product carries an extra factor x, so the constants are
// x^(8d + 63) and x^(8d - 1) mod P, each placed so that the coefficient of x^i is bit
// 63 - i. Every 128-bit lane of a constant register holds (low, high).
struct FoldConstants {
  explicit FoldConstants(uint64_t bytes)
      : low(static_cast<uint64_t>(XPow(8 * bytes + 63)) << 32),
        high(static_cast<uint64_t>(XPow(8 * bytes - 1)) << 32) {}
  uint64_t low;   // multiplies the low qword
  uint64_t high;  // multiplies the high qword
};

__attribute__((target("sse4.2,pclmul"))) inline __m128i Fold128(__m128i x, __m128i k) {
  return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

__attribute__((target("avx512f,vpclmulqdq"))) inline __m512i Fold512(__m512i x, __m512i k) {
  return _mm512_xor_si512(_mm512_clmulepi64_epi128(x, k, 0x00),
                          _mm512_clmulepi64_epi128(x, k, 0x11));
}

// Four 512-bit accumulators over 256-byte rounds, folded down to 128 bits, then reduced
// with the crc32 instruction (the CRC of 16 bytes of data from a zero register). The
// register enters by XOR into the first four bytes. Requires n >= kFoldMin.
__attribute__((target("sse4.2,pclmul,avx512f,avx512vl,vpclmulqdq"))) uint32_t ExtendFold512(
    uint32_t crc, const uint8_t* p, size_t n) {
  static const FoldConstants by256(256), by64(64), by16(16);
  // (Element 0 is the last argument.)
  const __m512i k256 = _mm512_set_epi64(by256.high, by256.low, by256.high, by256.low, by256.high,
                                        by256.low, by256.high, by256.low);
  const __m512i k64 = _mm512_set_epi64(by64.high, by64.low, by64.high, by64.low, by64.high,
                                       by64.low, by64.high, by64.low);
  const __m128i k16 = _mm_set_epi64x(by16.high, by16.low);
  __m512i x0 = _mm512_loadu_si512(p);
  __m512i x1 = _mm512_loadu_si512(p + 64);
  __m512i x2 = _mm512_loadu_si512(p + 128);
  __m512i x3 = _mm512_loadu_si512(p + 192);
  x0 = _mm512_xor_si512(x0, _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(~crc))));
  for (p += 256, n -= 256; n >= 256; p += 256, n -= 256) {
    x0 = _mm512_xor_si512(Fold512(x0, k256), _mm512_loadu_si512(p));
    x1 = _mm512_xor_si512(Fold512(x1, k256), _mm512_loadu_si512(p + 64));
    x2 = _mm512_xor_si512(Fold512(x2, k256), _mm512_loadu_si512(p + 128));
    x3 = _mm512_xor_si512(Fold512(x3, k256), _mm512_loadu_si512(p + 192));
  }
  __m512i x = _mm512_xor_si512(Fold512(x0, k64), x1);
  x = _mm512_xor_si512(Fold512(x, k64), x2);
  x = _mm512_xor_si512(Fold512(x, k64), x3);
  alignas(64) __m128i lanes[4];
  _mm512_store_si512(lanes, x);
  __m128i y = lanes[0];
  for (int i = 1; i < 4; ++i) y = _mm_xor_si128(Fold128(y, k16), lanes[i]);
  for (; n >= 16; p += 16, n -= 16) {
    y = _mm_xor_si128(Fold128(y, k16), _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  uint64_t c = _mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(y)));
  c = _mm_crc32_u64(c, static_cast<uint64_t>(_mm_extract_epi64(y, 1)));
  // The rest continues from the register: ExtendInstruction takes and returns final values.
  return ExtendInstruction(~static_cast<uint32_t>(c), p, n);
}

bool HasFold512() {
  static const bool has = __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("pclmul") &&
                          __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("vpclmulqdq");
  return has;
}

#else

bool HasFold512() { return false; }

#endif  // __x86_64__

uint32_t ExtendPortable(uint32_t crc, const uint8_t* p, size_t size) {
  const std::array<uint32_t, 256>& table = ByteTable();
  uint32_t c = ~crc;
  for (size_t i = 0; i < size; ++i) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return ~c;
}

// `path`, which this CPU has (no check here: Crc32cExtend's path is the fastest).
uint32_t ExtendOn(Crc32cPath path, uint32_t crc, const uint8_t* p, size_t size) {
#if defined(__x86_64__)
  // The folding loop needs a whole round; shorter spans take the instruction.
  if (path == Crc32cPath::kFold512 && size >= kFoldMin) return ExtendFold512(crc, p, size);
#endif
#if defined(LOCKSTEP_CRC32_TARGET)
  if (path != Crc32cPath::kPortable) return ExtendInstruction(crc, p, size);
#endif
  return ExtendPortable(crc, p, size);
}

}  // namespace

bool Crc32cSupports(Crc32cPath path) {
  switch (path) {
    case Crc32cPath::kPortable:
      return true;
    case Crc32cPath::kInstruction:
      return HasInstruction();
    case Crc32cPath::kFold512:
      return HasFold512();
  }
  return false;
}

Crc32cPath Crc32cFastestPath() {
  static const Crc32cPath fastest = HasFold512()       ? Crc32cPath::kFold512
                                    : HasInstruction() ? Crc32cPath::kInstruction
                                                       : Crc32cPath::kPortable;
  return fastest;
}

const char* Crc32cPathName(Crc32cPath path) {
  switch (path) {
    case Crc32cPath::kPortable:
      return "portable";
    case Crc32cPath::kInstruction:
      return "crc32 instruction";
    case Crc32cPath::kFold512:
      return "512-bit clmul";
  }
  return "unknown";
}

uint32_t Crc32cExtendWith(Crc32cPath path, uint32_t crc, const void* data, size_t size) {
  return ExtendOn(Crc32cSupports(path) ? path : Crc32cPath::kPortable, crc,
                  static_cast<const uint8_t*>(data), size);
}

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size) {
  return ExtendOn(Crc32cFastestPath(), crc, static_cast<const uint8_t*>(data), size);
}

}  // namespace lockstep::transfer
