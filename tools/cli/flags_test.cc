#include "tools/cli/flags.h"

#include <cstdlib>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::cli {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Fixture {
  FlagSet flags{"sim"};
  std::string name = "none";
  int64_t seeds = 1;
  int batch = 2;
  double rate = 0.5;
  bool verbose = false;
  Fixture() {
    flags.AddString("name", &name, "a name");
    flags.AddInt("seeds", &seeds, "seeds");
    flags.AddInt("batch", &batch, "batch");
    flags.AddDouble("rate", &rate, "rate");
    flags.AddBool("verbose", &verbose, "verbose");
  }
};

TEST(FlagSetTest, ParsesBothSpellingsAndPositionals) {
  Fixture f;
  ASSERT_THAT(f.flags.Parse({"--seeds", "10", "pos1", "--batch=4", "--rate", "0.25", "--verbose",
                             "--name=x", "--", "--not-a-flag"}),
              IsOk());
  EXPECT_EQ(f.seeds, 10);
  EXPECT_EQ(f.batch, 4);
  EXPECT_DOUBLE_EQ(f.rate, 0.25);
  EXPECT_TRUE(f.verbose);
  EXPECT_EQ(f.name, "x");
  EXPECT_THAT(f.flags.positional(), ElementsAre("pos1", "--not-a-flag"));
  EXPECT_TRUE(f.flags.WasSet("seeds"));
  EXPECT_FALSE(Fixture().flags.WasSet("seeds"));
}

TEST(FlagSetTest, ErrorsNameTheFlag) {
  Fixture f;
  EXPECT_THAT(f.flags.Parse({"--bogus", "1"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown flag --bogus")));
  EXPECT_THAT(Fixture().flags.Parse({"--seeds", "ten"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--seeds expects an integer, got 'ten'")));
  EXPECT_THAT(Fixture().flags.Parse({"--seeds"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--seeds needs a value")));
  EXPECT_THAT(Fixture().flags.Parse({"--verbose=maybe"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--verbose")));
}

TEST(FlagSetTest, HelpAndUsage) {
  Fixture f;
  ASSERT_THAT(f.flags.Parse({"--help"}), IsOk());
  EXPECT_TRUE(f.flags.help_requested());
  EXPECT_THAT(f.flags.Usage(), HasSubstr("--seeds"));
  EXPECT_THAT(f.flags.Usage(), HasSubstr("(default: 1)"));
}

}  // namespace
}  // namespace lockstep::cli

namespace lockstep::cli {
namespace {

TEST(FlagSetTest, ParseCommandLineExitCodes) {
  Fixture bad;
  EXPECT_EQ(bad.flags.ParseCommandLine({"--bogus"}), std::optional<int>(2));
  Fixture help;
  EXPECT_EQ(help.flags.ParseCommandLine({"--help"}), std::optional<int>(0));
  Fixture ok;
  EXPECT_EQ(ok.flags.ParseCommandLine({"--seeds", "3"}), std::nullopt);
  EXPECT_EQ(ok.seeds, 3);
}

}  // namespace
}  // namespace lockstep::cli

namespace lockstep::cli {
namespace {

TEST(ResolvePathTest, RelativePathsJoinTheWorkingDirectory) {
  EXPECT_EQ(ResolvePath("deploy/local/a.yaml", "/home/u/repo"), "/home/u/repo/deploy/local/a.yaml");
  EXPECT_EQ(ResolvePath("./out/../runs/x", "/w"), "/w/runs/x");
  EXPECT_EQ(ResolvePath(".", "/w"), "/w");
  EXPECT_EQ(ResolvePath("/etc/abs.yaml", "/w"), "/etc/abs.yaml");
  EXPECT_EQ(ResolvePath("", "/w"), "");
  EXPECT_EQ(ResolvePath("rel/x", ""), "rel/x");  // not under `bazel run`: as given
}

// Sets BUILD_WORKING_DIRECTORY for one test, as `bazel run` does.
class BazelRunEnv {
 public:
  explicit BazelRunEnv(const char* dir) { setenv("BUILD_WORKING_DIRECTORY", dir, 1); }
  ~BazelRunEnv() { unsetenv("BUILD_WORKING_DIRECTORY"); }
};

TEST(ResolvePathTest, PathFlagsResolveAgainstBuildWorkingDirectory) {
  BazelRunEnv env("/home/u/repo");
  FlagSet flags("bench");
  std::string config, json = "out.json", name, unset;
  flags.AddPath("config", &config, "deployment");
  flags.AddPath("json", &json, "report");
  flags.AddPath("unset", &unset, "empty stays empty");
  flags.AddString("name", &name, "not a path");
  ASSERT_THAT(flags.Parse({"--config", "deploy/local/a.yaml", "--name", "x/y"}), IsOk());
  EXPECT_EQ(config, "/home/u/repo/deploy/local/a.yaml");
  EXPECT_EQ(json, "/home/u/repo/out.json");  // defaults too
  EXPECT_EQ(unset, "");
  EXPECT_EQ(name, "x/y");
  EXPECT_EQ(ResolveUserPath("runs/bench-1"), "/home/u/repo/runs/bench-1");
}

TEST(ResolvePathTest, WithoutBazelRunPathsStayAsGiven) {
  unsetenv("BUILD_WORKING_DIRECTORY");
  FlagSet flags("bench");
  std::string config;
  flags.AddPath("config", &config, "deployment");
  ASSERT_THAT(flags.Parse({"--config=deploy/local/a.yaml"}), IsOk());
  EXPECT_EQ(config, "deploy/local/a.yaml");
}

}  // namespace
}  // namespace lockstep::cli
