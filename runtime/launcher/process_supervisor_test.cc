#include "runtime/launcher/process_supervisor.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::launcher {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

constexpr char kChild[] = "runtime/launcher/test_child";
constexpr absl::Duration kDeadline = absl::Seconds(20);

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class ProcessSupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  ProcessSpec Child(const std::string& name, const std::string& mode, const std::string& arg) {
    return {name, {kChild, mode, arg}, Path(name + ".log")};
  }
  std::function<bool()> FileExists(const std::string& path) {
    return [path] { return std::filesystem::exists(path); };
  }

  std::filesystem::path dir_;
};

TEST_F(ProcessSupervisorTest, StartsWaitsReadyAndStopsCleanly) {
  ProcessSupervisor supervisor;
  LOCKSTEP_ASSERT_OK(supervisor.Start(Child("good", "ready", Path("good.ready"))));
  LOCKSTEP_ASSERT_OK(supervisor.WaitReady(FileExists(Path("good.ready")), kDeadline));
  EXPECT_THAT(supervisor.Running(), ::testing::ElementsAre("good"));
  const pid_t pid = supervisor.PidOf("good");
  EXPECT_EQ(Slurp(Path("good.ready")), std::to_string(pid));
  EXPECT_TRUE(supervisor.Wait(absl::ZeroDuration()).exited.empty());

  std::vector<ChildExit> exits = supervisor.StopAll(kDeadline);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_TRUE(exits[0].clean()) << exits[0].Describe();
  EXPECT_EQ(exits[0].pid, pid);
  EXPECT_TRUE(supervisor.Running().empty());
  EXPECT_EQ(kill(pid, 0), -1);  // reaped: gone
  // Its output went to its log.
  EXPECT_THAT(Slurp(Path("good.log")), HasSubstr("SIGTERM, exiting"));
}

TEST_F(ProcessSupervisorTest, ReportsACrashWithItsStatusAndLog) {
  ProcessSupervisor supervisor;
  LOCKSTEP_ASSERT_OK(supervisor.Start(Child("crasher", "crash", "3")));
  ProcessSupervisor::WaitResult result = supervisor.Wait(kDeadline);
  ASSERT_EQ(result.exited.size(), 1u);
  const ChildExit& exit = result.exited[0];
  EXPECT_EQ(exit.name, "crasher");
  EXPECT_EQ(exit.exit_code, 3);
  EXPECT_FALSE(exit.clean());
  // The reason is on the screen: the last error line it logged, not the lines around it.
  EXPECT_EQ(exit.last_error, "crashing on purpose [3]");
  EXPECT_THAT(exit.Describe(),
              HasSubstr("exited with status 3; last error: crashing on purpose [3]; log: " +
                        Path("crasher.log")));
  EXPECT_THAT(Slurp(Path("crasher.log")), HasSubstr("test_child: exiting"));
  EXPECT_TRUE(supervisor.Running().empty());
}

// A restarted child appends to the same log: only what this run wrote counts.
TEST_F(ProcessSupervisorTest, TheLastErrorIsFromThisRunOfTheChildOnly) {
  ProcessSupervisor supervisor;
  LOCKSTEP_ASSERT_OK(supervisor.Start(Child("child", "crash", "3")));
  ProcessSupervisor::WaitResult first = supervisor.Wait(kDeadline);
  ASSERT_EQ(first.exited.size(), 1u);
  EXPECT_EQ(first.exited[0].last_error, "crashing on purpose [3]");
  LOCKSTEP_ASSERT_OK(supervisor.Start(Child("child", "quiet", "4")));
  ProcessSupervisor::WaitResult second = supervisor.Wait(kDeadline);
  ASSERT_EQ(second.exited.size(), 1u);
  EXPECT_EQ(second.exited[0].exit_code, 4);
  EXPECT_EQ(second.exited[0].last_error, "");
  EXPECT_THAT(second.exited[0].Describe(), HasSubstr("exited with status 4; log: "));
}

TEST(LastLoggedErrorTest, FindsTheLastErrorOrCriticalLineAndStripsItsPrefix) {
  const std::string path = ::testing::TempDir() + "/last_error.log";
  std::ofstream(path) << "[2026-01-02 03:04:05.678] [E] [worker/agg0/r1] [worker] early\n"
                         "[2026-01-02 03:04:05.679] [C] [worker/agg0/r1] [check] a.cc:3: check "
                         "failed: x \n"
                         "[2026-01-02 03:04:05.680] [I] [worker/agg0/r1] [worker] bye\n"
                         "lockstep worker: [E] not a log line\r\n\n";
  EXPECT_EQ(LastLoggedError(path), "a.cc:3: check failed: x");
  EXPECT_EQ(LastLoggedError(path, 1 << 20), "");  // nothing after that offset
  EXPECT_EQ(LastLoggedError(path + ".missing"), "");
  std::ofstream(path) << "[2026-01-02 03:04:05.678] [E] [t] [m] " << std::string(1000, 'x');
  EXPECT_EQ(LastLoggedError(path), std::string(400, 'x') + "...");
}

// Without a log file the child writes to the supervisor's own stdout and stderr, the
// same open files (not reopened by path: another user's pipe cannot be).
TEST_F(ProcessSupervisorTest, WithoutALogFileAChildInheritsStdoutAndStderr) {
  ProcessSupervisor supervisor;
  LOCKSTEP_ASSERT_OK(supervisor.Start({"inherits", {kChild, "ready", Path("inherits.ready")}, ""}));
  LOCKSTEP_ASSERT_OK(supervisor.WaitReady(FileExists(Path("inherits.ready")), kDeadline));
  const pid_t pid = supervisor.PidOf("inherits");
  for (int fd : {STDOUT_FILENO, STDERR_FILENO}) {
    struct stat ours, theirs;
    ASSERT_EQ(fstat(fd, &ours), 0);
    ASSERT_EQ(stat(("/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd)).c_str(), &theirs),
              0);
    EXPECT_EQ(ours.st_dev, theirs.st_dev) << "fd " << fd;
    EXPECT_EQ(ours.st_ino, theirs.st_ino) << "fd " << fd;
  }
  std::vector<ChildExit> exits = supervisor.StopAll(kDeadline);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_THAT(exits[0].Describe(), ::testing::EndsWith("exited with status 0"));
}

TEST_F(ProcessSupervisorTest, ReadinessFailsWhenAChildDies) {
  ProcessSupervisor supervisor;
  LOCKSTEP_ASSERT_OK(supervisor.Start(Child("good", "ready", Path("good.ready"))));
  LOCKSTEP_ASSERT_OK(supervisor.Start(Child("crasher", "crash", "7")));
  EXPECT_THAT(supervisor.WaitReady([] { return false; }, kDeadline),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("crasher (pid")));
  EXPECT_THAT(supervisor.Running(), ::testing::ElementsAre("good"));
}

TEST_F(ProcessSupervisorTest, ReadinessHasADeadlineAndAWakeFd) {
  ProcessSupervisor supervisor;
  LOCKSTEP_ASSERT_OK(supervisor.Start(Child("good", "ready", Path("good.ready"))));
  EXPECT_THAT(
      supervisor.WaitReady([] { return false; }, absl::Milliseconds(300), absl::Milliseconds(50)),
      StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("running: good")));
  const int wake = eventfd(1, EFD_CLOEXEC);  // already readable
  EXPECT_THAT(supervisor.WaitReady([] { return false; }, kDeadline, absl::Milliseconds(50), wake),
              StatusIs(absl::StatusCode::kCancelled));
  close(wake);
}

TEST_F(ProcessSupervisorTest, AChildIgnoringSigtermIsKilledAfterTheGrace) {
  ProcessSupervisor supervisor;
  LOCKSTEP_ASSERT_OK(supervisor.Start(Child("stubborn", "ignore-term", Path("stubborn.ready"))));
  LOCKSTEP_ASSERT_OK(supervisor.WaitReady(FileExists(Path("stubborn.ready")), kDeadline));
  std::vector<ChildExit> exits = supervisor.StopAll(absl::Milliseconds(200));
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].signal, SIGKILL);
  EXPECT_THAT(exits[0].Describe(), HasSubstr("was killed by signal 9"));
}

TEST_F(ProcessSupervisorTest, AMissingExecutableIsAnError) {
  ProcessSupervisor supervisor;
  EXPECT_THAT(supervisor.Start({"ghost", {"/no/such/binary"}, Path("ghost.log")}),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("ghost: cannot run /no/such/binary: No such file")));
  EXPECT_THAT(supervisor.Start({"nolog", {kChild, "crash", "0"}, "/no/such/dir/x.log"}),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("cannot open log file")));
  EXPECT_TRUE(supervisor.Running().empty());
}

TEST_F(ProcessSupervisorTest, ChildrenDieWithAKilledSupervisor) {
  ProcessSupervisor outer;
  const std::string ready = Path("grandchild.ready");
  LOCKSTEP_ASSERT_OK(outer.Start(Child("middle", "supervise", ready)));
  LOCKSTEP_ASSERT_OK(outer.WaitReady(FileExists(ready), kDeadline));
  const pid_t grandchild = std::stoi(Slurp(ready));
  const int pidfd = OpenPidfd(grandchild);
  ASSERT_GE(pidfd, 0);
  // SIGKILL the middle supervisor: it cannot stop its child, the kernel does.
  ASSERT_EQ(kill(outer.PidOf("middle"), SIGKILL), 0);
  ProcessSupervisor::WaitResult result = outer.Wait(kDeadline);
  ASSERT_EQ(result.exited.size(), 1u);
  EXPECT_EQ(result.exited[0].signal, SIGKILL);
  pollfd fd = {pidfd, POLLIN, 0};
  EXPECT_EQ(poll(&fd, 1, static_cast<int>(absl::ToInt64Milliseconds(kDeadline))), 1)
      << "the grandchild outlived its supervisor";
  close(pidfd);
}

}  // namespace
}  // namespace lockstep::launcher
