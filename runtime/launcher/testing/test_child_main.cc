// A child process for the supervisor tests.
//   test_child ready FILE        write FILE, then exit 0 on SIGTERM
//   test_child crash CODE        log an error line (common/log.h's format) between two
//                                other lines to stderr and exit with CODE
//   test_child quiet CODE        exit with CODE, writing nothing more
//   test_child ignore-term FILE  ignore SIGTERM, write FILE, wait for SIGKILL
//   test_child supervise FILE    supervise `test_child ready FILE` and wait forever
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "runtime/launcher/process_supervisor.h"

namespace {

void WriteFile(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp) << text;
  std::filesystem::rename(tmp, path);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const std::string mode = argv[1];
  const std::string arg = argv[2];
  std::printf("test_child %s pid %d\n", mode.c_str(), getpid());
  std::fflush(stdout);
  if (mode == "crash") {
    std::fprintf(stderr,
                 "[2026-01-02 03:04:05.678] [W] [tool/-/-] [test] a warning first\n"
                 "[2026-01-02 03:04:05.679] [E] [tool/-/-] [test] crashing on purpose [%s]\n"
                 "test_child: exiting\n",
                 arg.c_str());
    return std::atoi(arg.c_str());
  }
  if (mode == "quiet") return std::atoi(arg.c_str());
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  if (mode == "ready") {
    sigprocmask(SIG_BLOCK, &term, nullptr);
    WriteFile(arg, std::to_string(getpid()));
    int sig = 0;
    sigwait(&term, &sig);
    std::printf("test_child: SIGTERM, exiting\n");
    return 0;
  }
  if (mode == "ignore-term") {
    signal(SIGTERM, SIG_IGN);
    WriteFile(arg, std::to_string(getpid()));
    while (true) pause();
  }
  if (mode == "supervise") {
    lockstep::launcher::ProcessSupervisor supervisor;
    absl::Status status = supervisor.Start({"grandchild", {argv[0], "ready", arg}, arg + ".log"});
    if (!status.ok()) return 3;
    while (true) pause();
  }
  return 2;
}
