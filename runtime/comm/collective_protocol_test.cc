#include "runtime/comm/collective_protocol.h"

#include <cstdint>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::comm {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(CollectiveProtocolTest, AllToAllVFieldsAreSendThenRecvCounts) {
  const std::vector<int64_t> send = {1, 2}, recv = {3, 4};
  const CallSpec spec = SpecAllToAllV("moe", 0, 2, send, 3, recv, 7);
  ASSERT_THAT(spec.local, IsOk());
  EXPECT_THAT(AllToAllVFields(spec, send, recv), ElementsAre(1, 2, 3, 4));
}

TEST(CollectiveProtocolTest, InvalidCallPublishesNoFields) {
  const std::vector<int64_t> send = {1, 2}, recv = {3, 4};
  // Capacity 2 < 3 floats to send.
  const CallSpec spec = SpecAllToAllV("moe", 0, 2, send, 2, recv, 7);
  ASSERT_THAT(spec.local, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(AllToAllVFields(spec, send, recv), IsEmpty());
  const CallSpec bytes = SpecAllToAllBytes("kv", 0, 2, /*send_entries=*/1);
  ASSERT_FALSE(bytes.local.ok());
  const FlatBlocks blocks = FlattenAllToAllBytes(bytes, 0, {"abc"});
  EXPECT_THAT(blocks.sizes, IsEmpty());
  EXPECT_EQ(blocks.flat, "");
}

TEST(CollectiveProtocolTest, AllToAllVFieldsArePairwiseChecked) {
  // Two ranks' headers: rank 0 sends 2 floats to rank 1, which expects 1.
  const std::vector<std::vector<int64_t>> headers = {{0, 2, 0, 5}, {5, 0, 1, 0}};
  const auto field = [&](int r, int i) { return headers[r][i]; };
  const std::vector<int64_t> send = {0, 2}, recv = {0, 5};
  const CallSpec spec = SpecAllToAllV("moe.l3", 0, 2, send, 2, recv, 5);
  EXPECT_THAT(CheckAllToAllVFields(spec, 2, field),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("rank 0 sends 2 floats to rank 1, which expects 1")));
  const std::vector<std::vector<int64_t>> agreed = {{0, 2, 0, 5}, {5, 0, 2, 0}};
  EXPECT_THAT(CheckAllToAllVFields(spec, 2, [&](int r, int i) { return agreed[r][i]; }), IsOk());
}

TEST(CollectiveProtocolTest, FlattenAndLocateBlocks) {
  const CallSpec spec = SpecAllToAllBytes("kv", 1, 3, 3);
  const FlatBlocks blocks = FlattenAllToAllBytes(spec, 1, {"ab", "cde", ""});
  EXPECT_THAT(blocks.sizes, ElementsAre(2, 3, 0));
  EXPECT_EQ(blocks.flat, "abcde");
  EXPECT_EQ(blocks.own_offset, 2);
  const auto field = [&](int, int i) { return blocks.sizes[i]; };
  EXPECT_EQ(BlockOffset(field, 0, 0), 0);
  EXPECT_EQ(BlockOffset(field, 0, 1), 2);
  EXPECT_EQ(BlockOffset(field, 0, 2), 5);
  EXPECT_THAT(SplitBytes(blocks.flat, {2, 3, 0}), ElementsAre("ab", "cde", ""));
}

TEST(CollectiveProtocolTest, FirstErrorBreaksForGood) {
  FirstError first;
  EXPECT_THAT(first.CheckUsable("shm communicator of group 'g' rank 0"), IsOk());
  EXPECT_FALSE(first.Record(absl::OkStatus()));
  EXPECT_TRUE(first.Record(absl::UnavailableError("peer 2 exited")));
  EXPECT_FALSE(first.Record(absl::DeadlineExceededError("later")));
  EXPECT_THAT(first.CheckUsable("shm communicator of group 'g' rank 0"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("shm communicator of group 'g' rank 0 is broken by an earlier "
                                 "error: UNAVAILABLE: peer 2 exited")));
}

}  // namespace
}  // namespace lockstep::comm
