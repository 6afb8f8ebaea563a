#include "common/ids.h"

#include <sstream>
#include <type_traits>

#include "absl/container/flat_hash_set.h"
#include "fmt/format.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

TEST(IdsTest, DistinctTypesDoNotConvert) {
  static_assert(!std::is_convertible_v<RequestId, BlockId>);
  static_assert(!std::is_convertible_v<int64_t, RequestId>);  // explicit construction only
  static_assert(std::is_trivially_copyable_v<RequestId>);
  static_assert(sizeof(BlockId) == sizeof(int32_t));
}

TEST(IdsTest, CompareHashAndPrint) {
  RequestId a(3), b(5);
  EXPECT_LT(a, b);
  EXPECT_EQ(a, RequestId(3));
  EXPECT_NE(a, b);
  absl::flat_hash_set<RequestId> set = {a, b, RequestId(3)};
  EXPECT_EQ(set.size(), 2u);
  std::ostringstream os;
  os << Rank(2);
  EXPECT_EQ(os.str(), "2");
  EXPECT_EQ(fmt::format("{}/{:>3}", StepId(7), BlockId(9)), "7/  9");
  EXPECT_EQ(RequestId().value(), 0);
}

}  // namespace
}  // namespace lockstep
