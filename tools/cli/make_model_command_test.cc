#include "tools/cli/make_model_command.h"

#include <cstdlib>
#include <string>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "runtime/engine/file_io.h"
#include "runtime/engine/safetensors.h"

namespace lockstep::cli {
namespace {

using ::lockstep::testing::IsOk;

std::string OutDir(const std::string& name) {
  return engine::JoinPath(std::getenv("TEST_TMPDIR"), name);
}

TEST(MakeModelCommandTest, CommandWritesFilesAndRejectsBadFlags) {
  const std::string out = OutDir("command");
  EXPECT_EQ(
      RunMakeModelCommand({"--preset", "tiny", "--out", out, "--seed", "3", "--dtype", "bf16"}), 0);
  auto tensors = engine::SafetensorsModel::Open(out);
  ASSERT_THAT(tensors, IsOk());
  EXPECT_EQ((*(*tensors)->Find("model.norm.weight"))->dtype, engine::DType::kBF16);
  EXPECT_EQ(RunMakeModelCommand({"--preset", "tiny", "--out", out, "--dtype", "int8"}), 2);
  EXPECT_EQ(RunMakeModelCommand({"--preset", "nope", "--out", out}), 2);
  EXPECT_EQ(RunMakeModelCommand({"--bogus"}), 2);
}

}  // namespace
}  // namespace lockstep::cli
