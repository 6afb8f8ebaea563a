// Placement: the contiguous default, validation errors, replica lookup, rank loads and
// the text form's round trip and errors.
#include "runtime/eplb/placement.h"

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::eplb {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(PlacementTest, ContiguousMatchesTheShardingRanges) {
  const Placement p = ContiguousPlacement(7, 3, 2);
  ASSERT_EQ(p.layers.size(), 2u);
  EXPECT_THAT(p.layers[1].slots[0], ElementsAre(0, 1));
  EXPECT_THAT(p.layers[1].slots[1], ElementsAre(2, 3));
  EXPECT_THAT(p.layers[1].slots[2], ElementsAre(4, 5, 6));
  EXPECT_THAT(Validate(p), IsOk());
}

TEST(PlacementTest, ValidateNamesTheProblem) {
  Placement p = ContiguousPlacement(4, 2, 1);
  p.layers[0].slots[1] = {2};  // expert 3 has no slot
  EXPECT_THAT(Validate(p), StatusIs(absl::StatusCode::kInvalidArgument,
                                    HasSubstr("no replica of expert 3")));
  p.layers[0].slots[1] = {3, 2};
  EXPECT_THAT(Validate(p), StatusIs(absl::StatusCode::kInvalidArgument,
                                    HasSubstr("ascending")));
  p.layers[0].slots[1] = {2, 9};
  EXPECT_THAT(Validate(p), StatusIs(absl::StatusCode::kInvalidArgument,
                                    HasSubstr("rank 1 names expert 9")));
}

TEST(PlacementTest, ReplicasLoadsAndImbalance) {
  LayerPlacement layer{{{0, 1}, {0, 2}, {0, 3}}};
  EXPECT_THAT(ReplicaRanks(layer, 4)[0], ElementsAre(0, 1, 2));
  EXPECT_THAT(ReplicaRanks(layer, 4)[3], ElementsAre(2));
  // Expert 0's 30 split three ways.
  EXPECT_THAT(RankLoads(layer, {30, 1, 2, 3}), ElementsAre(11, 12, 13));
  EXPECT_DOUBLE_EQ(Imbalance(layer, {30, 1, 2, 3}), 13.0 / 12.0);
  EXPECT_DOUBLE_EQ(Imbalance(layer, {0, 0, 0, 0}), 1.0);
  EXPECT_EQ(SlotsToLoad(layer, LayerPlacement{{{0, 1}, {1, 2}, {0, 3}}}), 1);
}

TEST(PlacementTest, TextRoundTrip) {
  Placement p{4, 2, {LayerPlacement{{{0, 1, 3}, {2, 3}}}, LayerPlacement{{{0, 2}, {1, 3}}}}};
  const auto parsed = Parse("# a comment\n" + Format(p) + "\n", 4, 2, 2);
  ASSERT_THAT(parsed.status(), IsOk());
  EXPECT_EQ(*parsed, p);
}

TEST(PlacementTest, ParseTakesTheDefaultForLayersNotNamed) {
  const auto parsed = Parse("1 0: 0 1 2\n1 1: 2 3\n", 4, 2, 2);
  ASSERT_THAT(parsed.status(), IsOk());
  EXPECT_EQ(parsed->layers[0], ContiguousPlacement(4, 2, 1).layers[0]);
  EXPECT_THAT(parsed->layers[1].slots[0], ElementsAre(0, 1, 2));
}

TEST(PlacementTest, ParseErrors) {
  EXPECT_THAT(Parse("0 0 0 1\n", 4, 2, 1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("line 1")));
  EXPECT_THAT(Parse("0 0: 0 1\n", 4, 2, 1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("layer 0 rank 1")));
  EXPECT_THAT(Parse("0 0: 0 1\n0 0: 2 3\n", 4, 2, 1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("given twice")));
  EXPECT_THAT(Parse("0 2: 0 1\n", 4, 2, 1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rank out of range")));
  EXPECT_THAT(Parse("0 0: 0 x\n", 4, 2, 1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not an expert id: x")));
  EXPECT_THAT(Parse("0 0: 0 1\n0 1: 1 2\n", 4, 2, 1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("expert 3")));
}

TEST(PlacementTest, ParseLoadsReadsTheRoutedLines) {
  const auto loads = ParseLoads(
      "# windows 1 forwards 2\nrouted 0: 1 2 0 1\ncomputed 0: 4\nrouted 1: 1 1 0 0\n");
  ASSERT_THAT(loads.status(), IsOk());
  ASSERT_EQ(loads->size(), 2u);
  EXPECT_THAT((*loads)[0], ElementsAre(1, 2, 0, 1));
  EXPECT_THAT(ParseLoads("routed 1: 1 2\n").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("layer 0 was expected")));
  EXPECT_THAT(ParseLoads("routed 0: 1 2\nrouted 1: 1\n").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("1 experts")));
  EXPECT_THAT(ParseLoads("routed 0: 1 -2\n").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a load: -2")));
  EXPECT_THAT(ParseLoads("computed 0: 1\n").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no 'routed' line")));
}

}  // namespace
}  // namespace lockstep::eplb
