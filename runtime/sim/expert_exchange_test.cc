// The simulator's expert exchange on its own (four rank threads calling Forward as
// their engines would): every rank adopts the same placement at the same step and the
// windows after it are balanced; a failed load on one rank aborts on all; a rank that
// skips a forward fails its collectives instead of going on; and PlacementDisagreements
// names a rank that adopted at another step or another placement.
#include "runtime/sim/expert_exchange.h"

#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/sim/rank_stack.h"

namespace lockstep::sim {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int kRanks = 4;

// Runs `forwards` forwards of `rows` rows on every rank (rank `skipper` skips forward
// `skip`); returns each rank's first error.
std::vector<absl::Status> RunForwards(ExpertExchange& exchange, int forwards, int rows,
                                      int skipper = -1, int skip = -1) {
  std::vector<absl::Status> first(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      for (int f = 0; f < forwards; ++f) {
        if (r == skipper && f == skip) continue;
        absl::Status s = exchange.Forward(r, /*step=*/100 + f, rows + (r == 2 ? 0 : r));
        if (!s.ok()) {
          first[r] = s;
          return;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return first;
}

SimEplbConfig Config() {
  SimEplbConfig config;
  config.enabled = true;
  config.window = 4;
  config.rebalance_windows = 2;
  config.redundant_slots = 1;
  config.hot_share = 0.8;
  return config;
}

TEST(ExpertExchangeTest, EveryRankAdoptsTheSamePlacementAtTheSameStep) {
  RankStackOptions options;
  auto exchange = ExpertExchange::Attach(Config(), /*seed=*/7, kRanks, &options);
  ASSERT_NE(exchange, nullptr);
  EXPECT_TRUE(static_cast<bool>(options.wrap_engine));
  for (const absl::Status& s : RunForwards(*exchange, 40, 6)) EXPECT_TRUE(s.ok()) << s;
  EXPECT_THAT(exchange->Violations(), IsEmpty());
  const SimEplbSummary summary = exchange->Summary();
  EXPECT_EQ(summary.forwards, 40);
  EXPECT_EQ(summary.windows, 10);
  EXPECT_GE(summary.adopted, 1);  // planned at window 2, adopted at window 3's end
  EXPECT_EQ(summary.aborted, 0);
  EXPECT_GE(summary.first_window_imbalance, 1.5);
  EXPECT_LE(summary.imbalance_after_rebalance, 1.3);
}

TEST(ExpertExchangeTest, AFailedLoadOnOneRankAbortsOnAll) {
  SimEplbConfig config = Config();
  config.failing_rank = 2;
  RankStackOptions options;
  auto exchange = ExpertExchange::Attach(config, 7, kRanks, &options);
  for (const absl::Status& s : RunForwards(*exchange, 40, 6)) EXPECT_TRUE(s.ok()) << s;
  EXPECT_THAT(exchange->Violations(), IsEmpty());
  const SimEplbSummary summary = exchange->Summary();
  EXPECT_EQ(summary.adopted, 0);
  EXPECT_GE(summary.aborted, 1);
  EXPECT_GE(summary.imbalance_after_rebalance, 1.5);  // still the contiguous sharding
}

TEST(ExpertExchangeTest, ARankThatSkipsAForwardFailsItsCollectives) {
  SimEplbConfig config = Config();
  config.collective_timeout = absl::Seconds(2);  // the others wait for rank 1 in vain
  RankStackOptions options;
  auto exchange = ExpertExchange::Attach(config, 7, kRanks, &options);
  const std::vector<absl::Status> first = RunForwards(*exchange, 8, 3, /*skipper=*/1, /*skip=*/2);
  int failed = 0;
  for (const absl::Status& s : first) failed += s.ok() ? 0 : 1;
  EXPECT_GE(failed, 1);
  EXPECT_THAT(exchange->Violations(), ::testing::Contains(HasSubstr("rank 1 ran")));
}

TEST(ExpertExchangeTest, OffAttachesNothing) {
  RankStackOptions options;
  EXPECT_EQ(ExpertExchange::Attach(SimEplbConfig(), 7, kRanks, &options), nullptr);
  EXPECT_FALSE(static_cast<bool>(options.wrap_engine));
}

TEST(PlacementDisagreementsTest, NamesTheRankThatDiffers) {
  const PlacementEvent adopted{.step = 12, .forward = 24, .adopted = true, .placement = "a"};
  EXPECT_THAT(PlacementDisagreements({{adopted}, {adopted}}), IsEmpty());
  PlacementEvent late = adopted;
  late.step = 13;
  EXPECT_THAT(PlacementDisagreements({{adopted}, {adopted}, {late}}),
              ::testing::ElementsAre(HasSubstr("rank 2 adopted at step 13")));
  PlacementEvent other = adopted;
  other.placement = "b";
  EXPECT_THAT(PlacementDisagreements({{adopted}, {other}}),
              ::testing::ElementsAre(HasSubstr("rank 1 uses another placement")));
  EXPECT_THAT(PlacementDisagreements({{adopted}, {}}),
              ::testing::ElementsAre(HasSubstr("rank 1 decided 0 rebalances")));
}

}  // namespace
}  // namespace lockstep::sim
