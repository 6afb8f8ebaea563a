// Expert parallelism: the MoE model over 4 in-process ranks equals the single-rank
// model bitwise, also when some ranks hold only the pad dummy or nothing; and every
// rank makes the same collectives, in the same order, whatever its batch.
#include "runtime/engine/cpu/moe.h"

#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/check.h"
#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/comm/in_process_communicator.h"
#include "runtime/engine/cpu/testing/prefill_logits.h"
#include "runtime/engine/cpu/testing/rank_group_run.h"
#include "runtime/engine/cpu/testing/test_engine.h"
#include "runtime/engine/cpu/testing/test_models.h"
#include "runtime/engine/cpu/transformer.h"
#include "runtime/engine/cpu/weights.h"
#include "runtime/engine/model/file_io.h"
#include "runtime/engine/model/make_model.h"

namespace lockstep::engine {
namespace {

using ::lockstep::engine::testing::HostOutput;
using ::lockstep::engine::testing::HostPool;
using ::lockstep::engine::testing::HostRequest;
using ::lockstep::engine::testing::MakeTestEngine;
using ::lockstep::engine::testing::Members;
using ::lockstep::engine::testing::PrefillLogits;
using ::lockstep::engine::testing::PresetModelDir;
using ::lockstep::engine::testing::RequestsPerRank;
using ::lockstep::engine::testing::RunRankGroupAgainstOneEngine;
using ::lockstep::engine::testing::TestEngine;
using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;

constexpr int kRanks = 4;

TEST(ExpertShardingTest, RangesPartitionTheExperts) {
  for (int experts : {1, 4, 7, 8, 60}) {
    for (int world = 1; world <= 6; ++world) {
      int next = 0;
      for (int rank = 0; rank < world; ++rank) {
        const ExpertRange range = ExpertsOfRank(experts, rank, world);
        EXPECT_EQ(range.first, next);
        EXPECT_LE(range.end - range.first, (experts + world - 1) / world);
        for (int e = range.first; e < range.end; ++e)
          EXPECT_EQ(ExpertOwner(experts, world, e), rank);
        next = range.end;
      }
      EXPECT_EQ(next, experts);
    }
  }
}

// Wraps a communicator and records the tag of every collective call.
class RecordingCommunicator final : public comm::Communicator {
 public:
  explicit RecordingCommunicator(std::unique_ptr<comm::Communicator> inner)
      : inner_(std::move(inner)) {}
  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  absl::Status AllReduce(absl::Span<int64_t> data, comm::ReduceOp op,
                         const comm::CallOptions& o) override {
    Record(o);
    return inner_->AllReduce(data, op, o);
  }
  absl::Status AllGather(absl::Span<const int64_t> in, absl::Span<int64_t> out,
                         const comm::CallOptions& o) override {
    Record(o);
    return inner_->AllGather(in, out, o);
  }
  absl::StatusOr<std::vector<std::string>> AllGatherBytes(absl::string_view data,
                                                          const comm::CallOptions& o) override {
    Record(o);
    return inner_->AllGatherBytes(data, o);
  }
  absl::Status Broadcast(std::string* data, int root, const comm::CallOptions& o) override {
    Record(o);
    return inner_->Broadcast(data, root, o);
  }
  absl::StatusOr<std::vector<std::string>> Gather(absl::string_view data, int root,
                                                  const comm::CallOptions& o) override {
    Record(o);
    return inner_->Gather(data, root, o);
  }
  absl::Status AllToAll(absl::Span<const int64_t> send, absl::Span<int64_t> recv,
                        const comm::CallOptions& o) override {
    Record(o);
    return inner_->AllToAll(send, recv, o);
  }
  absl::Status AllToAllV(absl::Span<const float> send, absl::Span<const int64_t> send_counts,
                         absl::Span<float> recv, absl::Span<const int64_t> recv_counts,
                         const comm::CallOptions& o) override {
    Record(o);
    return inner_->AllToAllV(send, send_counts, recv, recv_counts, o);
  }
  absl::StatusOr<std::vector<std::string>> AllToAllBytes(const std::vector<std::string>& send,
                                                         const comm::CallOptions& o) override {
    Record(o);
    return inner_->AllToAllBytes(send, o);
  }
  absl::Status Barrier(const comm::CallOptions& o) override {
    Record(o);
    return inner_->Barrier(o);
  }

  // Tags recorded since the last call (the engine thread records, the test reads
  // between steps).
  std::vector<std::string> TakeTags() {
    absl::MutexLock lock(&mu_);
    return std::exchange(tags_, {});
  }

 private:
  void Record(const comm::CallOptions& o) {
    absl::MutexLock lock(&mu_);
    tags_.emplace_back(o.tag.data(), o.tag.size());
  }

  std::unique_ptr<comm::Communicator> inner_;
  absl::Mutex mu_;
  std::vector<std::string> tags_ ABSL_GUARDED_BY(mu_);
};

std::vector<std::unique_ptr<RecordingCommunicator>> MakeGroup() {
  std::vector<std::unique_ptr<RecordingCommunicator>> group;
  for (auto& comm : comm::MakeInProcessGroup(kRanks)) {
    group.push_back(std::make_unique<RecordingCommunicator>(std::move(comm)));
  }
  return group;
}

// Forward of the sharded model on 4 threads, each rank with its own rows (some none),
// against the single-rank model on the same rows: bitwise equal logits.
TEST(MoeTest, ShardedForwardEqualsSingleRankBitwise) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  const std::string dir = PresetModelDir("tiny-moe");
  auto single = std::move(Transformer::Load(dir, "target", ExpertGroup{})).value();
  auto group = MakeGroup();
  std::vector<std::unique_ptr<Transformer>> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.push_back(
        std::move(Transformer::Load(dir, "target",
                                    ExpertGroup{group[r].get(), r, kRanks, absl::Seconds(30)}))
            .value());
  }
  HostPool single_pool(single->Layout(8), 128, seed);
  std::vector<std::unique_ptr<HostPool>> pools;
  for (int r = 0; r < kRanks; ++r)
    pools.push_back(std::make_unique<HostPool>(single->Layout(8), 128, seed + r));
  for (int round = 0; round < 6; ++round) {
    // Rank r gets (round + r) % 4 sequences of random length (0 for some ranks).
    std::vector<std::vector<std::vector<int32_t>>> prompts(kRanks);
    for (int r = 0; r < kRanks; ++r) {
      for (int s = 0; s < (round + r) % kRanks; ++s) {
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
      ASSERT_THAT(status[r], IsOk()) << "rank " << r;
      std::vector<float> expected;
      ASSERT_THAT(PrefillLogits(*single, single_pool, prompts[r], expected), IsOk());
      ASSERT_EQ(logits[r], expected) << "round " << round << " rank " << r;
      EXPECT_EQ(static_cast<int>(group[r]->TakeTags().size()), ranks[r]->collectives_per_forward());
    }
  }
  EXPECT_EQ(ranks[0]->collectives_per_forward(), 3 * 4);  // counts, dispatch, combine per layer
}

// Four engines in lockstep (one with no requests at all: it pads with the dummy), with
// a MoE draft so the draft passes exchange too, against one engine serving everything.
TEST(MoeTest, FourRankEnginesEqualOneRankEngine) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  const std::string dir = PresetModelDir("tiny-moe");
  const int k = 2;
  const std::vector<std::vector<HostRequest>> requests =
      RequestsPerRank({5, 2, 0, 3}, /*prompt_spread=*/50, /*min_tokens=*/10, rng);
  auto group = MakeGroup();
  std::vector<std::string> expected_tags;
  // Every rank made the same calls in the same order, every step.
  auto same_collectives = [&](int step) {
    for (int r = 0; r < kRanks; ++r) {
      const std::vector<std::string> tags = group[r]->TakeTags();
      if (expected_tags.empty()) expected_tags = tags;
      ASSERT_EQ(tags, expected_tags) << "rank " << r << " step " << step;
    }
  };
  std::vector<std::vector<HostOutput>> outputs;
  ASSERT_NO_FATAL_FAILURE(RunRankGroupAgainstOneEngine({.model_dir = dir,
                                                        .draft_dir = dir,  // drafts for itself
                                                        .num_draft_tokens = k,
                                                        .seed = seed,
                                                        .drafts_for_itself = true,
                                                        .after_step = same_collectives},
                                                       Members(group), requests, outputs));
  EXPECT_EQ(expected_tags.size(), static_cast<size_t>(3 * 4 * (1 + k)));
}

Batch OneChunk(int64_t step, int64_t id, std::vector<BlockId> blocks) {
  Batch batch;
  batch.step = StepId(step);
  ContextChunk& chunk = batch.context.emplace_back();
  chunk.kv = kv::BlockRefs{RequestId(id), 1, std::move(blocks)};
  chunk.tokens = {kByteBosToken, 72, 105};
  chunk.last_chunk = true;
  return batch;
}

// A rank whose batch is invalid, or whose only sequence is refused, still makes every
// collective of the step (with no rows), so its peers' batches succeed and the group
// stays usable.
TEST(MoeTest, InvalidBatchOnOneRankKeepsTheRanksInLockstep) {
  const std::string dir = PresetModelDir("tiny-moe");
  auto group = MakeGroup();
  std::vector<TestEngine> engines;
  for (int r = 0; r < kRanks; ++r) {
    engines.push_back(MakeTestEngine({.model_dir = dir,
                                      .num_blocks = 16,
                                      .communicator = group[r].get(),
                                      .rank = r,
                                      .world_size = kRanks}));
  }
  for (int step = 0; step < 3; ++step) {
    for (int r = 0; r < kRanks; ++r) {
      // Step 0: rank 1 names a block outside its pool of 16 (that sequence is refused).
      const BlockId block(step == 0 && r == 1 ? 99 : 3);
      Batch batch = OneChunk(step, 10 + r, {block});
      // Step 1: rank 1's batch names its request twice (the batch fails whole).
      if (step == 1 && r == 1) batch.context.push_back(batch.context.front());
      engines[r].engine->Launch(std::move(batch));
    }
    std::vector<std::string> first_tags;
    for (int r = 0; r < kRanks; ++r) {
      absl::StatusOr<BatchResult> result =
          engines[r].engine->Collect(StepId(step), absl::Seconds(30));
      if (step == 1 && r == 1) {
        EXPECT_THAT(result, ::lockstep::testing::StatusIs(absl::StatusCode::kInvalidArgument));
      } else {
        ASSERT_THAT(result, IsOk()) << "step " << step << " rank " << r;
        ASSERT_EQ(result->sequences.size(), 1u);
        if (step == 0 && r == 1) {
          EXPECT_THAT(result->sequences[0].status,
                      ::lockstep::testing::StatusIs(absl::StatusCode::kInvalidArgument));
        } else {
          EXPECT_THAT(result->sequences[0].status, IsOk()) << "step " << step << " rank " << r;
        }
      }
      const std::vector<std::string> tags = group[r]->TakeTags();
      if (r == 0) first_tags = tags;
      EXPECT_EQ(tags, first_tags) << "step " << step << " rank " << r;
      EXPECT_EQ(tags.size(), 12u);
    }
  }
}

// A dead peer fails the batch with the communicator's error; the process goes on and
// later batches fail at once.
TEST(MoeTest, DeadPeerFailsTheBatchNotTheProcess) {
  const std::string dir = PresetModelDir("tiny-moe");
  std::vector<std::unique_ptr<comm::Communicator>> group = comm::MakeInProcessGroup(2);
  TestEngine engine = MakeTestEngine({.model_dir = dir,
                                      .num_blocks = 16,
                                      .communicator = group[0].get(),
                                      .rank = 0,
                                      .world_size = 2,
                                      .collective_timeout = absl::Seconds(20)});
  dynamic_cast<comm::InProcessCommunicator&>(*group[1]).MarkDead();
  engine.engine->Launch(OneChunk(0, 1, {BlockId(0)}));
  absl::StatusOr<BatchResult> failed = engine.engine->Collect(StepId(0), absl::Seconds(30));
  EXPECT_FALSE(failed.ok());
  EXPECT_THAT(failed.status().message(), ::testing::HasSubstr("moe"));
  engine.engine->Launch(OneChunk(1, 1, {BlockId(0)}));
  EXPECT_FALSE(engine.engine->Collect(StepId(1), absl::Seconds(30)).ok());
}

}  // namespace
}  // namespace lockstep::engine
