// The DeepSeek-V3 family through the whole CPU engine (make-model's tiny-dsv3 preset:
// MLA over the latent cache, grouped sigmoid routing, shared experts): DEP4, four
// expert-parallel engines in lockstep with different block sizes, prefill chunks and
// batch sizes, drafting with the model itself (draft KV in a second latent pool), one
// of them with no requests at all, against one engine serving everything with plain
// decoding: the same tokens and bitwise the same log-probabilities, and every pool
// block returned.
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/testing/seed.h"
#include "gtest/gtest.h"
#include "runtime/comm/in_process_communicator.h"
#include "runtime/engine/cpu/testing/rank_group_run.h"
#include "runtime/engine/cpu/testing/test_models.h"

namespace lockstep::engine {
namespace {

using ::lockstep::engine::testing::HostOutput;
using ::lockstep::engine::testing::HostRequest;
using ::lockstep::engine::testing::Members;
using ::lockstep::engine::testing::PresetModelDir;
using ::lockstep::engine::testing::RequestsPerRank;
using ::lockstep::engine::testing::RunRankGroupAgainstOneEngine;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;

constexpr int kRanks = 4;

TEST(DeepseekEngineTest, FourRankEnginesEqualOneRankEngine) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  const std::string dir = PresetModelDir("tiny-dsv3");
  const std::vector<std::vector<HostRequest>> requests =
      RequestsPerRank({3, 2, 0, 2}, /*prompt_spread=*/40, /*min_tokens=*/8, rng);
  std::vector<std::unique_ptr<comm::Communicator>> group = comm::MakeInProcessGroup(kRanks);
  std::vector<std::vector<HostOutput>> outputs;
  RunRankGroupAgainstOneEngine({.model_dir = dir,
                                .draft_dir = dir,  // drafts for itself
                                .num_draft_tokens = 2,
                                .seed = seed,
                                .drafts_for_itself = true},
                               Members(group), requests, outputs);
}

}  // namespace
}  // namespace lockstep::engine
