// Test prompts: `n` consecutive token ids from `first` (first, first + 1, ...), so two
// prompts share a prefix exactly where their runs overlap. For tests of prefix reuse.
#ifndef LOCKSTEP_KVCACHE_TESTING_TOKEN_RUN_H_
#define LOCKSTEP_KVCACHE_TESTING_TOKEN_RUN_H_

#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

namespace lockstep::kv {

inline std::vector<int32_t> Tokens(int n, int32_t first) {
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

}  // namespace lockstep::kv

#endif  // LOCKSTEP_KVCACHE_TESTING_TOKEN_RUN_H_
