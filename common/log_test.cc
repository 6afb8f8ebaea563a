#include "common/log.h"

#include <memory>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spdlog/sinks/ostream_sink.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sink_ = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    AddLogSink(sink_);
  }
  void TearDown() override {
    RemoveLogSink(sink_);
    InitLogging(LogIdentity{});
  }

  std::ostringstream out_;
  spdlog::sink_ptr sink_;
};

TEST_F(LogTest, LinesCarryIdentityAndModule) {
  InitLogging({.role = "generation", .instance = "gen0", .rank = 2});
  LOCKSTEP_LOG_INFO("exec", "step {} vetoed", 7);
  EXPECT_THAT(out_.str(), HasSubstr("[generation/gen0/r2] [exec] step 7 vetoed"));
  EXPECT_EQ(LogIdentityTag(), "generation/gen0/r2");
}

TEST_F(LogTest, NonRankProcessHasNoRank) {
  InitLogging({.role = "router", .instance = "main", .rank = -1});
  LOCKSTEP_LOG_WARN("router", "hello");
  EXPECT_THAT(out_.str(), HasSubstr("[router/main/-] [router] hello"));
}

TEST_F(LogTest, LevelFiltersLines) {
  InitLogging({.role = "r", .instance = "i", .rank = 0}, spdlog::level::warn);
  LOCKSTEP_LOG_INFO("kv", "hidden line");
  LOCKSTEP_LOG_ERROR("kv", "shown line");
  EXPECT_THAT(out_.str(), Not(HasSubstr("hidden line")));
  EXPECT_THAT(out_.str(), HasSubstr("shown line"));
}

TEST_F(LogTest, OneLoggerPerModule) {
  EXPECT_EQ(GetLogger("sched"), GetLogger("sched"));
  EXPECT_NE(GetLogger("sched"), GetLogger("kv"));
  EXPECT_EQ(GetLogger("sched")->name(), "sched");
}

}  // namespace
}  // namespace lockstep
