#include "runtime/comm/collective_wire.h"

#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::comm {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

// Every rank's header side by side, as an all-gather would leave them.
std::vector<int64_t> Rows(const std::vector<std::vector<int64_t>>& headers) {
  std::vector<int64_t> rows;
  for (const auto& h : headers) rows.insert(rows.end(), h.begin(), h.end());
  return rows;
}

TEST(CollectiveWireTest, AgreeingHeadersCarryFieldsAndInlineBytes) {
  const CallSpec spec = SpecRooted(CollectiveOp::kGather, "responses", 0, 2, 0);
  const std::string big(kWireInlineBytes + 1, 'x');
  const int64_t small_size = 5, big_size = big.size();
  auto rows = Rows({EncodeWireHeader(spec, 2, {&small_size, 1}, "hello"),
                    EncodeWireHeader(spec, 2, {&big_size, 1}, big)});
  EXPECT_EQ(rows.size(), 2 * WireHeaderWords(2));
  auto headers = CheckWireHeaders(spec, 2, rows);
  ASSERT_THAT(headers, IsOk());
  EXPECT_EQ(headers->field(1, 0), big_size);
  EXPECT_EQ(headers->column(0), (std::vector<size_t>{5, big.size()}));
  EXPECT_TRUE(headers->has_inline(0));
  EXPECT_EQ(headers->inline_bytes(0), "hello");
  EXPECT_FALSE(headers->has_inline(1));
  EXPECT_FALSE(headers->all_inline());
}

TEST(CollectiveWireTest, DesyncNamesBothCallsWithTheirArguments) {
  const CallSpec vote = SpecAllReduce("vote", 4, ReduceOp::kMax);
  const CallSpec gather = SpecRooted(CollectiveOp::kGather, "responses", 2, 3, 0);
  const CallSpec shorter = SpecAllReduce("vote", 3, ReduceOp::kMax);
  auto rows = Rows({EncodeWireHeader(vote, 3, {}), EncodeWireHeader(vote, 3, {}),
                    EncodeWireHeader(gather, 3, {})});
  EXPECT_THAT(CheckWireHeaders(gather, 3, rows),
              StatusIs(absl::StatusCode::kInternal,
                       "collective desync: rank 0 called AllReduce('vote') with 4 elements (max), "
                       "rank 2 called Gather('responses') with root 0"));
  rows = Rows({EncodeWireHeader(vote, 2, {}), EncodeWireHeader(shorter, 2, {})});
  EXPECT_THAT(CheckWireHeaders(vote, 2, rows),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("rank 1 called AllReduce('vote') with 3 elements (max)")));
}

TEST(CollectiveWireTest, InvalidArgumentsOfOneRankFailEveryRank) {
  const CallSpec good = SpecAllGather("load", 0, 2, 1, 2);
  const CallSpec bad = SpecAllGather("load", 1, 2, 1, 3);
  ASSERT_EQ(good.fp, bad.fp);
  auto rows = Rows({EncodeWireHeader(good, 2, {}), EncodeWireHeader(bad, 2, {})});
  EXPECT_THAT(CheckWireHeaders(good, 2, rows),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("AllGather('load') on rank 1: invalid arguments")));
  EXPECT_THAT(CheckWireHeaders(bad, 2, rows),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("out has 3 elements")));
}

TEST(CollectiveWireTest, CompactBlocksNameThePeersOp) {
  const CallSpec vote = SpecAllGather("vote", 0, 2, 1, 2);
  const CallSpec other = SpecBarrier("x");
  const std::vector<int64_t> blocks = {7, vote.fp, WireInfo(vote), 7, other.fp, WireInfo(other)};
  EXPECT_THAT(CheckWireBlocks(vote, 2, blocks, 3, 1),
              StatusIs(absl::StatusCode::kInternal,
                       "collective desync: rank 0 called AllGather('vote'), rank 1 called "
                       "Barrier(another tag or size)"));
}

TEST(CollectiveWireTest, AllToAllVPairsMustAgree) {
  const CallSpec spec =
      SpecAllToAllV("moe.l3", 0, 2, std::vector<int64_t>{2, 2}, 4, std::vector<int64_t>{2, 2}, 4);
  // counts[s][r]: what s sends to r; expects[r][s]: what r expects from s.
  const int64_t counts[2][2] = {{2, 2}, {2, 2}};
  const int64_t expects[2][2] = {{2, 2}, {1, 2}};
  EXPECT_THAT(CheckAllToAllVPairs(
                  spec, 2, "floats", [&](int s, int r) { return counts[s][r]; },
                  [&](int r, int s) { return expects[r][s]; }),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("rank 0 sends 2 floats to rank 1, which expects 1")));
  EXPECT_THAT(CheckAllToAllVPairs(
                  spec, 2, "floats", [&](int s, int r) { return counts[s][r]; },
                  [&](int r, int s) { return counts[s][r]; }),
              IsOk());
}

}  // namespace
}  // namespace lockstep::comm
