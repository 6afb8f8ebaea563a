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

}  // namespace
}  // namespace lockstep::comm
