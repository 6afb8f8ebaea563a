#include "tools/cli/testing/process_test_util.h"

#include <dirent.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "fmt/format.h"
#include "gtest/gtest.h"

namespace lockstep::cli::testing {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::map<pid_t, std::string> ChildrenOf(pid_t parent) {
  std::map<pid_t, std::string> children;
  DIR* proc = opendir("/proc");
  while (dirent* entry = readdir(proc)) {
    const pid_t pid = std::atoi(entry->d_name);
    if (pid <= 0) continue;
    const std::string stat = Slurp(fmt::format("/proc/{}/stat", pid));
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream rest(stat.substr(paren + 2));
    std::string state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid != parent) continue;
    std::string cmdline = Slurp(fmt::format("/proc/{}/cmdline", pid));
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    children[pid] = cmdline;
  }
  closedir(proc);
  return children;
}

std::filesystem::path FreshTestDirWithModel() {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
                                    ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "model");
  std::ofstream(dir / "model" / "lockstep_tokenizer.json")
      << R"({"type": "byte_level", "vocab_size": 300, "bos_token_id": 256, "eos_token_id": 257})";
  return dir;
}

}  // namespace lockstep::cli::testing
