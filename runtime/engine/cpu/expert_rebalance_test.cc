// Live rebalancing on 4 in-process ranks (tiny-moe): a placement planned at one window's
// end is loaded in the background (from the checkpoint, or copied from the peers that
// hold the experts) and adopted at the next window's end by every rank, and the logits
// stay bitwise equal to the single-rank model's before, during and after; a load that
// fails on one rank, or a peer whose copy fails or arrives cut, aborts the rebalance on
// all of them and serving goes on with the old placement.
#include "runtime/engine/cpu/expert_rebalance.h"

#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/check.h"
#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/comm/in_process_communicator.h"
#include "runtime/engine/cpu/testing/prefill_logits.h"
#include "runtime/engine/cpu/testing/test_models.h"
#include "runtime/engine/cpu/transformer.h"

namespace lockstep::engine {
namespace {

using ::lockstep::engine::testing::HostPool;
using ::lockstep::engine::testing::PrefillLogits;
using ::lockstep::engine::testing::PresetModelDir;
using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;

constexpr int kRanks = 4;

// How the ranks get the experts they gain.
struct Source {
  bool peers = false;     // copied from peers; the checkpoint loader then always fails
  int failing_rank = -1;  // that rank's loader, or with peers its sender, is `sender`
  ExpertSender sender;
};

// Runs `rounds` forwards on the 4 ranks, checking each against the single-rank model.
// Returns the rebalancers (owned by `ranks`, which use `group`).
std::vector<const ExpertRebalancer*> RunRounds(
    int rounds, const Source& source, uint64_t seed,
    std::vector<std::unique_ptr<comm::Communicator>>& group,
    std::vector<std::unique_ptr<Transformer>>& ranks) {
  std::mt19937_64 rng(seed);
  const std::string dir = PresetModelDir("tiny-moe");
  auto single = std::move(Transformer::Load(dir, "target", ExpertGroup{})).value();
  group = comm::MakeInProcessGroup(kRanks);
  std::vector<const ExpertRebalancer*> rebalancers;
  ranks.clear();
  for (int r = 0; r < kRanks; ++r) {
    ranks.push_back(
        std::move(Transformer::Load(dir, "target",
                                    ExpertGroup{group[r].get(), r, kRanks, absl::Seconds(30)}))
            .value());
    Transformer& model = *ranks.back();
    const ModelConfig& config = model.config();
    model.OwnExpertLoad(std::make_unique<ExpertLoad>(config.num_layers, config.num_experts,
                                                     /*window=*/1, group[r].get(),
                                                     absl::Seconds(30), "target"));
    ExpertLoader loader = CheckpointExpertLoader(dir, config, r);
    if ((r == source.failing_rank && !source.peers) || source.peers) {
      loader = [](const eplb::Placement&,
                  const LayerMoeWeights&) -> absl::StatusOr<LayerMoeWeights> {
        return absl::DataLossError("disk gone");
      };
    }
    RebalanceOptions options{.every_windows = 2,
                             .plan = {.num_ranks = kRanks, .redundant_per_rank = 1},
                             .copy_from_peers = source.peers};
    if (source.peers && r == source.failing_rank) options.sender = source.sender;
    auto rebalancer = std::make_unique<ExpertRebalancer>(
        config, eplb::ContiguousPlacement(config.num_experts, kRanks, config.num_layers),
        model.LoadedMoeWeights(), std::move(options), group[r].get(), r, absl::Seconds(30),
        "target", std::move(loader));
    rebalancers.push_back(rebalancer.get());
    model.OwnRebalancer(std::move(rebalancer));
  }
  HostPool single_pool(single->Layout(8), 128, seed);
  std::vector<std::unique_ptr<HostPool>> pools;
  for (int r = 0; r < kRanks; ++r) {
    pools.push_back(std::make_unique<HostPool>(single->Layout(8), 128, seed + r));
  }
  for (int round = 0; round < rounds; ++round) {
    std::vector<std::vector<std::vector<int32_t>>> prompts(kRanks);
    for (int r = 0; r < kRanks; ++r) {
      for (int s = 0; s < (round + r) % 3; ++s) {
        std::vector<int32_t> tokens(1 + rng() % 20);
        for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % 256);
        prompts[r].push_back(tokens);
      }
    }
    std::vector<std::vector<float>> logits(kRanks);
    std::vector<absl::Status> status(kRanks);
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r) {
      threads.emplace_back(
          [&, r] { status[r] = PrefillLogits(*ranks[r], *pools[r], prompts[r], logits[r]); });
    }
    for (std::thread& t : threads) t.join();
    for (int r = 0; r < kRanks; ++r) {
      EXPECT_THAT(status[r], IsOk()) << "round " << round << " rank " << r;
      std::vector<float> expected;
      EXPECT_THAT(PrefillLogits(*single, single_pool, prompts[r], expected), IsOk());
      EXPECT_EQ(logits[r], expected) << "round " << round << " rank " << r;
    }
  }
  return rebalancers;
}

// Every rank aborted the one rebalance and kept the contiguous placement (RunRounds
// checked that the logits stayed the single-rank model's throughout).
void ExpectAbortedEverywhere(const std::vector<const ExpertRebalancer*>& rebalancers) {
  const eplb::Placement contiguous = eplb::ContiguousPlacement(8, kRanks, 4);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(rebalancers[r]->adopted(), 0) << "rank " << r;
    EXPECT_EQ(rebalancers[r]->aborted(), 1) << "rank " << r;
    EXPECT_EQ(rebalancers[r]->placement(), contiguous) << "rank " << r;
  }
}

TEST(ExpertRebalanceTest, AdoptsAtTheNextWindowWithEqualLogits) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::vector<std::unique_ptr<comm::Communicator>> group;
  std::vector<std::unique_ptr<Transformer>> ranks;
  // Windows of one forward, planned every second window: planned at the end of forward
  // 2, adopted at the end of forward 3; forward 4 runs on the new placement (and plans
  // again: that load is still in flight at the end).
  const auto rebalancers = RunRounds(4, Source{}, seed, group, ranks);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(rebalancers[r]->adopted(), 1) << "rank " << r;
    EXPECT_EQ(rebalancers[r]->aborted(), 0) << "rank " << r;
    EXPECT_EQ(rebalancers[r]->placement(), rebalancers[0]->placement()) << "rank " << r;
    for (const auto& slots : rebalancers[r]->placement().layers[0].slots) {
      EXPECT_EQ(slots.size(), 3u);  // 2 experts + 1 redundant slot per rank
    }
  }
}

TEST(ExpertRebalanceTest, AFailedLoadAbortsOnEveryRank) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::vector<std::unique_ptr<comm::Communicator>> group;
  std::vector<std::unique_ptr<Transformer>> ranks;
  const auto rebalancers = RunRounds(4, Source{.failing_rank = 2}, seed, group, ranks);
  ExpectAbortedEverywhere(rebalancers);
}

TEST(ExpertRebalanceTest, AdoptsWithExpertsCopiedFromPeers) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::vector<std::unique_ptr<comm::Communicator>> group;
  std::vector<std::unique_ptr<Transformer>> ranks;
  // Every rank's checkpoint loader fails: an adoption can only come from the copies.
  const auto rebalancers = RunRounds(4, Source{.peers = true}, seed, group, ranks);
  const eplb::Placement contiguous = eplb::ContiguousPlacement(8, kRanks, 4);
  const eplb::Placement& adopted = rebalancers[0]->placement();
  ASSERT_NE(adopted, contiguous);
  // The bytes the placement change needs: each slot a rank gained, one expert's packed
  // matrices and its header (every tiny-moe expert has the same shape).
  auto single =
      std::move(Transformer::Load(PresetModelDir("tiny-moe"), "target", ExpertGroup{})).value();
  const ModelConfig& config = single->config();
  int64_t expert_bytes = 0;
  int slots = 0;
  for (int l = 0; l < config.num_layers; ++l) {
    if (!config.moe_layer[l]) continue;
    const SwiGluWeights& expert = single->LoadedMoeWeights()[l]->experts[0];
    expert_bytes =
        kExpertCopyHeaderBytes + static_cast<int64_t>(expert.gate_up.bytes() + expert.down.bytes());
    slots += eplb::SlotsToLoad(contiguous.layers[l], adopted.layers[l]);
  }
  ASSERT_GT(slots, 0);
  int64_t received = 0;
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(rebalancers[r]->adopted(), 1) << "rank " << r;
    EXPECT_EQ(rebalancers[r]->aborted(), 0) << "rank " << r;
    EXPECT_EQ(rebalancers[r]->placement(), adopted) << "rank " << r;
    received += rebalancers[r]->bytes_received();
  }
  EXPECT_EQ(received, slots * expert_bytes);
}

TEST(ExpertRebalanceTest, APeerWhoseCopyFailsAbortsOnEveryRank) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::vector<std::unique_ptr<comm::Communicator>> group;
  std::vector<std::unique_ptr<Transformer>> ranks;
  const ExpertSender fails =
      [](const std::vector<ExpertCopy>&, int, int,
         const LayerMoeWeights&) -> absl::StatusOr<std::vector<std::string>> {
    return absl::InternalError("out of memory encoding the experts");
  };
  const auto rebalancers =
      RunRounds(4, Source{.peers = true, .failing_rank = 1, .sender = fails}, seed, group, ranks);
  ExpectAbortedEverywhere(rebalancers);
}

TEST(ExpertRebalanceTest, APeerWhoseBytesArriveCutAbortsOnEveryRank) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::vector<std::unique_ptr<comm::Communicator>> group;
  std::vector<std::unique_ptr<Transformer>> ranks;
  // Rank 3 encodes fine and believes its copy went out; its receivers get a byte less.
  const ExpertSender cuts =
      [](const std::vector<ExpertCopy>& copies, int rank, int world,
         const LayerMoeWeights& weights) -> absl::StatusOr<std::vector<std::string>> {
    absl::StatusOr<std::vector<std::string>> sent =
        EncodeExpertCopies(copies, rank, world, weights);
    if (sent.ok()) {
      for (std::string& bytes : *sent) {
        if (!bytes.empty()) bytes.pop_back();
      }
    }
    return sent;
  };
  const auto rebalancers =
      RunRounds(4, Source{.peers = true, .failing_rank = 3, .sender = cuts}, seed, group, ranks);
  ExpectAbortedEverywhere(rebalancers);
}

}  // namespace
}  // namespace lockstep::engine
