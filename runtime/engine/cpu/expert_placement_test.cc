// ExpertLayoutFromText: the text form becomes the weight plan's layout (layers not named
// keep the contiguous sharding), errors name the problem; MakeExpertLoad's dump file.
#include "runtime/engine/cpu/expert_placement.h"

#include <cstdlib>
#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/engine/model/file_io.h"
#include "runtime/engine/model/make_model.h"

namespace lockstep::engine {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(ExpertPlacementTest, TextBecomesTheLayout) {
  const ModelConfig config = PresetConfig("tiny-moe").value();  // 8 experts, 4 layers
  const auto layout = ExpertLayoutFromText("2 0: 0 1 2 3 7\n2 1: 3 4 5 6 7\n", config, 2);
  ASSERT_THAT(layout.status(), IsOk());
  ASSERT_EQ(layout->size(), 4u);
  EXPECT_THAT((*layout)[2][1], ElementsAre(3, 4, 5, 6, 7));
  EXPECT_THAT((*layout)[0][1], ElementsAre(4, 5, 6, 7));  // not named: contiguous
  EXPECT_TRUE(ExpertLayoutFromText("", config, 2)->empty());
}

TEST(ExpertPlacementTest, ErrorsNameTheProblem) {
  const ModelConfig config = PresetConfig("tiny-moe").value();
  EXPECT_THAT(ExpertLayoutFromText("0 0: 0 1 2 3\n", config, 2).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("layer 0 rank 1")));
  EXPECT_THAT(ExpertLayoutFromText("0 0: 0 1 2 3\n0 1: 4 5 6 8\n", config, 2).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("expert 8 of 8")));
  const ModelConfig dense = PresetConfig("tiny").value();
  EXPECT_THAT(ExpertLayoutFromText("0 0: 0\n", dense, 1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no routed experts")));
}

TEST(ExpertPlacementTest, LoadsAFileAndNamesItInErrors) {
  const ModelConfig config = PresetConfig("tiny-moe").value();
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/placement.txt";
  ASSERT_THAT(WriteStringToFile(path, "# a plan\n1 0: 0 1 2 3 4\n1 1: 4 5 6 7\n"), IsOk());
  const auto layout = LoadExpertLayout(path, config, 2);
  ASSERT_THAT(layout.status(), IsOk());
  EXPECT_THAT((*layout)[1][0], ElementsAre(0, 1, 2, 3, 4));
  EXPECT_TRUE(LoadExpertLayout("", config, 2)->empty());
  ASSERT_THAT(WriteStringToFile(path, "1 0: 0 1\n"), IsOk());
  EXPECT_THAT(LoadExpertLayout(path, config, 2).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(path + ": ")));
  EXPECT_FALSE(LoadExpertLayout(path + ".missing", config, 2).ok());
}

TEST(ExpertPlacementTest, RankZeroDumpsEachWindow) {
  const ModelConfig config = PresetConfig("tiny-moe").value();
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/expert_load.txt";
  auto load = MakeExpertLoad(config, /*window=*/1, nullptr, 0, absl::Seconds(5), path);
  const int experts[] = {2, 5};
  load->AddRouted(1, experts, 2);
  ASSERT_THAT(load->EndForward(), IsOk());
  const auto text = ReadFileToString(path);
  ASSERT_THAT(text.status(), IsOk());
  EXPECT_THAT(*text, StartsWith("# windows 1 forwards 1\nrouted 0: 0 0 0 0 0 0 0 0\n"));
  EXPECT_THAT(*text, HasSubstr("routed 1: 0 0 1 0 0 1 0 0\n"));
}

TEST(ExpertPlacementTest, EveryRankPublishesEachWindowOnTheBoard) {
  const ModelConfig config = PresetConfig("tiny-moe").value();
  ExpertLoadBoard board;
  EXPECT_EQ(board.Latest().windows, 0);
  // Not rank 0 and no dump file: the board still gets every window.
  auto load = MakeExpertLoad(config, /*window=*/2, nullptr, 1, absl::Seconds(5), "", &board);
  const int experts[] = {3, 3, 7};
  load->AddRouted(1, experts, 3);
  ASSERT_THAT(load->EndForward(), IsOk());
  EXPECT_EQ(board.Latest().windows, 0);  // mid-window: nothing published
  ASSERT_THAT(load->EndForward(), IsOk());
  const ExpertLoadSnapshot latest = board.Latest();
  EXPECT_EQ(latest.windows, 1);
  EXPECT_EQ(latest.forwards, 2);
  EXPECT_EQ(latest.Format(), load->Latest().Format());
  EXPECT_THAT(latest.LayerLoads(1), ElementsAre(0, 0, 0, 2, 0, 0, 0, 1));
}

}  // namespace
}  // namespace lockstep::engine
