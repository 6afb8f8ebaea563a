#include "runtime/comm/collective_op.h"

#include "gtest/gtest.h"

namespace lockstep::comm {
namespace {

TEST(CollectiveOpTest, DescribesACallByMethodAndTag) {
  EXPECT_EQ(DescribeCall(CollectiveOp::kAllReduce, "vote"), "AllReduce('vote')");
  EXPECT_EQ(DescribeCall(CollectiveOp::kAllToAllV, "moe.l3"), "AllToAllV('moe.l3')");
  EXPECT_EQ(CollectiveOpName(CollectiveOp::kBarrier), "Barrier");
  EXPECT_EQ(ReduceOpName(ReduceOp::kMax), "max");
}

TEST(CollectiveOpTest, FingerprintSeparatesOpTagAndArgs) {
  const int64_t base = CallFingerprint(CollectiveOp::kAllReduce, "vote", {4, 0});
  EXPECT_EQ(base, CallFingerprint(CollectiveOp::kAllReduce, "vote", {4, 0}));
  EXPECT_NE(base, CallFingerprint(CollectiveOp::kAllGather, "vote", {4, 0}));
  EXPECT_NE(base, CallFingerprint(CollectiveOp::kAllReduce, "vote2", {4, 0}));
  EXPECT_NE(base, CallFingerprint(CollectiveOp::kAllReduce, "vote", {3, 0}));
  EXPECT_NE(base, CallFingerprint(CollectiveOp::kAllReduce, "vote", {4, 1}));
  EXPECT_GE(base, 0);
  EXPECT_LT(base, int64_t{1} << 40);
}

}  // namespace
}  // namespace lockstep::comm
