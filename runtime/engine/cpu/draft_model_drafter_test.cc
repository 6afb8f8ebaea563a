// The draft model as a spec::Drafter, through the CPU engine: with the target as its
// own draft, the draft's KV catch-up (across prompt chunks, out of the spec buffer
// into the pool, after seeds and fully accepted steps) must reproduce the target's
// K/V exactly, so every greedy draft is accepted; and the output equals the output
// without speculation.
#include <cstdio>
#include <string>
#include <vector>

#include "common/testing/seed.h"
#include "gtest/gtest.h"
#include "runtime/engine/cpu/testing/mini_host.h"
#include "runtime/engine/cpu/testing/spec_runs.h"
#include "runtime/engine/cpu/testing/test_models.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::engine {
namespace {

using ::lockstep::engine::testing::HostRequest;
using ::lockstep::engine::testing::PresetModelDir;
using ::lockstep::engine::testing::RunSpec;
using ::lockstep::engine::testing::SpecPrompts;
using ::lockstep::engine::testing::SpecRun;
using ::lockstep::engine::testing::SpecRunOutput;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;

TEST(DraftModelDrafterTest, TheTargetAsItsOwnDraftHasEveryGreedyDraftAccepted) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  const std::string dir = PresetModelDir("tiny");
  const std::vector<HostRequest> requests = SpecPrompts(20, seed, 20, /*stochastic=*/false);
  const SpecRunOutput plain = RunSpec(dir, {}, requests, seed);
  for (int k : {1, 3}) {
    for (bool overlap : {false, true}) {
      SpecRun run{spec::Method::kDraftModel, k, /*dynamic=*/false, overlap};
      run.draft_dir = dir;
      const SpecRunOutput spec = RunSpec(dir, run, requests, seed + k);
      EXPECT_EQ(spec.tokens, plain.tokens) << run.ToString();
      EXPECT_GT(spec.proposed, 0) << run.ToString();
      EXPECT_EQ(spec.accepted, spec.proposed) << run.ToString();
      EXPECT_LT(spec.steps, plain.steps) << run.ToString();
      std::printf("%s, target as draft: %lld of %lld accepted, %lld steps (%lld without)\n",
                  run.ToString().c_str(), static_cast<long long>(spec.accepted),
                  static_cast<long long>(spec.proposed), static_cast<long long>(spec.steps),
                  static_cast<long long>(plain.steps));
    }
  }
}

}  // namespace
}  // namespace lockstep::engine
