#include "runtime/sim/rank_stack.h"

#include <thread>

#include "gtest/gtest.h"

namespace lockstep::sim {
namespace {

RankStackOptions TwoRanks() {
  RankStackOptions options;
  options.ranks = 2;
  options.executor.instance = "unit";
  options.executor.kv = FakeKvConfig(options.executor.scheduler, kv::DraftMode::kNone,
                                     /*tokens_per_block=*/4, /*num_blocks=*/16,
                                     /*draft_num_blocks=*/16);
  options.engine.threaded = false;
  options.engine.tokens_per_block = 4;
  options.engine.target_num_blocks = 16;
  return options;
}

TEST(RankStackTest, BuildsEveryRankWithItsOwnIdentity) {
  RankStackOptions options = TwoRanks();
  options.track_block_writes = true;
  auto stacks = RankStacks::Build(options);
  ASSERT_TRUE(stacks.ok()) << stacks.status();
  ASSERT_EQ((*stacks)->size(), 2);
  for (int r = 0; r < 2; ++r) {
    const RankStack& s = (*stacks)->rank(r);
    EXPECT_EQ(s.executor->config().rank, r);
    EXPECT_EQ(s.executor->config().world_size, 2);
    EXPECT_EQ(s.executor->config().transfer_address, "unit-rank-" + std::to_string(r));
    EXPECT_NE(s.tracker, nullptr);
    EXPECT_EQ(s.wrapped_engine, nullptr);
  }
  EXPECT_NE((*stacks)->rank(0).clock.get(), (*stacks)->rank(1).clock.get());
}

TEST(RankStackTest, RanksStepTogetherOverTheInProcessGroup) {
  auto stacks = RankStacks::Build(TwoRanks());
  ASSERT_TRUE(stacks.ok()) << stacks.status();
  absl::Status results[2];
  std::thread other([&] { results[1] = (*stacks)->rank(1).executor->Step(); });
  results[0] = (*stacks)->rank(0).executor->Step();
  other.join();
  EXPECT_TRUE(results[0].ok()) << results[0];
  EXPECT_TRUE(results[1].ok()) << results[1];
}

TEST(RankStackTest, WrapsTheEngineOnRequest) {
  RankStackOptions options = TwoRanks();
  int wrapped = 0;
  options.wrap_engine = [&](int, engine::ModelEngine*) {
    ++wrapped;
    return std::unique_ptr<engine::ModelEngine>(
        new engine::FakeEngine(engine::FakeEngineOptions{.threaded = false}));
  };
  auto stacks = RankStacks::Build(options);
  ASSERT_TRUE(stacks.ok()) << stacks.status();
  EXPECT_EQ(wrapped, 2);
  EXPECT_NE((*stacks)->rank(1).wrapped_engine, nullptr);
}

TEST(RankStackTest, ABadPoolNamesTheRank) {
  RankStackOptions options = TwoRanks();
  options.executor.kv.target.num_blocks = 0;
  auto stacks = RankStacks::Build(options);
  ASSERT_FALSE(stacks.ok());
  EXPECT_EQ(std::string(stacks.status().message()).rfind("rank 0: KV manager: ", 0), 0u)
      << stacks.status();
}

}  // namespace
}  // namespace lockstep::sim
