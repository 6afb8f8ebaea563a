#include "kvcache/block_hash.h"

#include <bit>
#include <cstring>

namespace lockstep::kv {
namespace {

// Keys are defined on little-endian bytes; every supported host (x86-64, aarch64) is.
static_assert(std::endian::native == std::endian::little, "block keys assume a little-endian host");

constexpr uint64_t kSecret0 = 0xa0761d6478bd642fULL;
constexpr uint64_t kSecret1 = 0xe7037ed1a0b428dbULL;
constexpr uint64_t kSecret2 = 0x8ebc6af09c88c6e3ULL;
constexpr uint64_t kSecret3 = 0x589965cc75374cc3ULL;

// 64x64 -> 128-bit multiply, folded: the mixing step of the wyhash family.
inline uint64_t Mix(uint64_t a, uint64_t b) {
  const unsigned __int128 r = static_cast<unsigned __int128>(a) * b;
  return static_cast<uint64_t>(r) ^ static_cast<uint64_t>(r >> 64);
}

inline uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline uint64_t Load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

}  // namespace

uint64_t Hash64(const uint8_t* data, size_t size, uint64_t seed) {
  const uint8_t* p = data;
  seed ^= Mix(seed ^ kSecret0, kSecret1);
  uint64_t a;
  uint64_t b;
  if (size <= 16) {
    if (size >= 4) {
      a = (Load32(p) << 32) | Load32(p + ((size >> 3) << 2));
      b = (Load32(p + size - 4) << 32) | Load32(p + size - 4 - ((size >> 3) << 2));
    } else if (size > 0) {
      a = (static_cast<uint64_t>(p[0]) << 16) | (static_cast<uint64_t>(p[size >> 1]) << 8) |
          p[size - 1];
      b = 0;
    } else {
      a = b = 0;
    }
  } else {
    size_t i = size;
    if (i > 48) {
      // Three independent lanes per 48 bytes.
      uint64_t see1 = seed;
      uint64_t see2 = seed;
      do {
        seed = Mix(Load64(p) ^ kSecret1, Load64(p + 8) ^ seed);
        see1 = Mix(Load64(p + 16) ^ kSecret2, Load64(p + 24) ^ see1);
        see2 = Mix(Load64(p + 32) ^ kSecret3, Load64(p + 40) ^ see2);
        p += 48;
        i -= 48;
      } while (i > 48);
      seed ^= see1 ^ see2;
    }
    while (i > 16) {
      seed = Mix(Load64(p) ^ kSecret1, Load64(p + 8) ^ seed);
      i -= 16;
      p += 16;
    }
    a = Load64(p + i - 16);
    b = Load64(p + i - 8);
  }
  a ^= kSecret1;
  b ^= seed;
  const unsigned __int128 r = static_cast<unsigned __int128>(a) * b;
  a = static_cast<uint64_t>(r);
  b = static_cast<uint64_t>(r >> 64);
  return Mix(a ^ kSecret0 ^ size, b ^ kSecret1);
}

uint64_t RootHash(uint64_t salt) {
  uint8_t bytes[8];
  std::memcpy(bytes, &salt, sizeof(bytes));
  return Hash64(bytes, sizeof(bytes), /*seed=*/0x6c6f636b73746570ULL);  // "lockstep"
}

uint64_t BlockHash(uint64_t parent, absl::Span<const int32_t> tokens) {
  return Hash64(reinterpret_cast<const uint8_t*>(tokens.data()), tokens.size() * sizeof(int32_t),
                parent);
}

}  // namespace lockstep::kv
