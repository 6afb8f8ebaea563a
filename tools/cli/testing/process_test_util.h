// What the tests of the commands that start processes (launch, instance) share: the
// text of a file a process wrote, a process's children, and a fresh directory for the
// running test with the byte-level model the fake ranks serve.
//
// Thread-compatible plain functions.
#ifndef LOCKSTEP_TOOLS_CLI_TESTING_PROCESS_TEST_UTIL_H_
#define LOCKSTEP_TOOLS_CLI_TESTING_PROCESS_TEST_UTIL_H_

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <string>

namespace lockstep::cli::testing {

// The whole file at `path` ("" when it cannot be read).
std::string Slurp(const std::string& path);

// Pids whose parent is `parent`, with their command lines (arguments joined by spaces).
std::map<pid_t, std::string> ChildrenOf(pid_t parent);

// TempDir()/<the running test's name>, emptied, holding model/lockstep_tokenizer.json (a
// byte-level tokenizer: vocabulary 300, BOS 256, EOS 257).
std::filesystem::path FreshTestDirWithModel();

}  // namespace lockstep::cli::testing

#endif  // LOCKSTEP_TOOLS_CLI_TESTING_PROCESS_TEST_UTIL_H_
