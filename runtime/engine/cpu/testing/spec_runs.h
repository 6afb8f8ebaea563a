// The fixture of the speculative decoding tests: prompts, and one run of them through
// a CPU engine and a MiniHost with a given drafter, K, dynamic K and overlap, so that
// outputs with and without speculation can be compared token for token.
#ifndef LOCKSTEP_RUNTIME_ENGINE_CPU_TESTING_SPEC_RUNS_H_
#define LOCKSTEP_RUNTIME_ENGINE_CPU_TESTING_SPEC_RUNS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/engine/cpu/testing/mini_host.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::engine::testing {

// `n` prompts of 8..47 tokens (BOS, then random bytes), each asking for `max_tokens`
// tokens past EOS; `stochastic`: T = 1, top_k = 40 and a seed each. With `repeating`,
// every other prompt repeats a short random span instead (what an n-gram drafter can
// copy).
std::vector<HostRequest> SpecPrompts(int n, uint64_t seed, int max_tokens, bool stochastic,
                                     bool repeating = false);

struct SpecRun {
  spec::Method method = spec::Method::kNone;  // kDraftModel loads draft_dir
  int k = 0;
  bool dynamic = false;
  bool overlap = false;
  std::string draft_dir;  // kDraftModel: the draft model (empty: `dir`/draft)

  std::string ToString() const;  // e.g. "ngram K=3 dynamic"
};

struct SpecRunOutput {
  std::vector<std::vector<int32_t>> tokens;  // per request, in order
  int64_t proposed = 0;
  int64_t accepted = 0;
  int64_t steps = 0;
};

// Runs `requests` on the model in `dir` (chunks of 24, batches of 16, 2048 blocks of
// 8 tokens, allocated in the order `seed` draws). Fails the test when the engine wrote
// outside its grant or into a free block; CHECK-fails when the host fails.
SpecRunOutput RunSpec(const std::string& dir, const SpecRun& run,
                      const std::vector<HostRequest>& requests, uint64_t seed);

}  // namespace lockstep::engine::testing

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_TESTING_SPEC_RUNS_H_
