// Deterministic 64-bit hashing: the same bits on every machine and in every process.
// Seeded models, sampling and test inputs are derived from these values, so their
// exact output is part of the contract (tests compare tokens).
//
//   uint64_t h = SplitMix64(seed ^ position);
//   Fnv1a64 name_hash;
//   name_hash.Add("layers.0.wq");
#ifndef LOCKSTEP_COMMON_HASH_H_
#define LOCKSTEP_COMMON_HASH_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace lockstep {

// The golden-ratio increment of splitmix64 (2^64 / phi, odd).
inline constexpr uint64_t kSplitMix64Gamma = 0x9e3779b97f4a7c15ull;

// The splitmix64 step: adds the increment to `x`, then applies the finalizer.
// Vigna's generator is SplitMix64(state), state += kSplitMix64Gamma; counter-based
// streams here use SplitMix64(state++) or state = SplitMix64(state).
constexpr uint64_t SplitMix64(uint64_t x) {
  x += kSplitMix64Gamma;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// FNV-1a over bytes, fed incrementally.
class Fnv1a64 {
 public:
  constexpr void AddByte(uint8_t byte) { h_ = (h_ ^ byte) * 0x100000001b3ull; }
  constexpr void Add(absl::string_view bytes) {
    for (char c : bytes) AddByte(static_cast<uint8_t>(c));
  }
  constexpr uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 0xcbf29ce484222325ull;
};

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_HASH_H_
