// Deterministic 64-bit hashing: the same bits on every machine and in every process.
// Seeded models, sampling and test inputs are derived from these values, so their
// exact output is part of the contract (tests compare tokens).
//
//   uint64_t h = SplitMix64(seed ^ position);  // common/splitmix64.h
//   Fnv1a64 name_hash;
//   name_hash.Add("layers.0.wq");
#ifndef LOCKSTEP_COMMON_HASH_H_
#define LOCKSTEP_COMMON_HASH_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "common/splitmix64.h"  // IWYU pragma: export

namespace lockstep {

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
