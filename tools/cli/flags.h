// A small command-line flag parser for the `lockstep` subcommands. Flags live only in
// the CLI (never read by libraries): each subcommand binds flags to fields of its
// config struct, parses, then validates the struct.
//
//   FlagSet flags("sim");
//   int64_t seeds = 1;
//   flags.AddInt("seeds", &seeds, "number of seeds to run");
//   RETURN_IF_ERROR(flags.Parse(args));   // "--seeds 10" or "--seeds=10"
//
// Errors name the flag: unknown flag, missing value, or a value of the wrong type.
//
// Path flags (AddPath) are resolved with ResolveUserPath after parsing, defaults
// included, so `bazel run //tools:lockstep -- bench --config deploy/...` reads the
// file the user meant, not one in the runfiles tree Bazel runs the binary in.
#ifndef LOCKSTEP_TOOLS_CLI_FLAGS_H_
#define LOCKSTEP_TOOLS_CLI_FLAGS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"

namespace lockstep::cli {

// `path` as the user meant it: a relative path is taken against `working_dir` when that
// is non-empty; absolute and empty paths are returned as they are.
std::string ResolvePath(const std::string& path, const std::string& working_dir);
// ResolvePath against $BUILD_WORKING_DIRECTORY (the directory `bazel run` was started
// in); unchanged when it is not set. For every path a command takes from its user.
std::string ResolveUserPath(const std::string& path);

class FlagSet {
 public:
  explicit FlagSet(std::string command) : command_(std::move(command)) {}

  void AddString(const std::string& name, std::string* out, const std::string& help);
  // A file or directory: after parsing, `*out` (set or default) is ResolveUserPath'd.
  void AddPath(const std::string& name, std::string* out, const std::string& help);
  void AddInt(const std::string& name, int64_t* out, const std::string& help);
  void AddInt(const std::string& name, int* out, const std::string& help);
  void AddDouble(const std::string& name, double* out, const std::string& help);
  // A bool flag takes no value ("--verbose"); "--verbose=false" also works.
  void AddBool(const std::string& name, bool* out, const std::string& help);

  // Parses `args` (without the command name). Non-flag arguments are kept in order as
  // positional arguments. "--help" sets `help_requested()`.
  absl::Status Parse(const std::vector<std::string>& args);

  // For a command's entry point: parses `args`; on an error prints it and the usage to
  // stderr and returns 2, on --help prints the usage and returns 0; otherwise returns
  // nullopt (go on).
  std::optional<int> ParseCommandLine(const std::vector<std::string>& args);

  const std::vector<std::string>& positional() const { return positional_; }
  bool help_requested() const { return help_requested_; }
  // True when the flag appeared on the command line.
  bool WasSet(const std::string& name) const;

  std::string Usage() const;

 private:
  using Target = std::variant<std::string*, int64_t*, int*, double*, bool*>;
  struct Flag {
    std::string name;
    Target target;
    std::string help;
    std::string default_text;
    bool set = false;
    bool path = false;
  };

  Flag* Find(const std::string& name);
  absl::Status Assign(Flag& flag, const std::string& value);

  std::string command_;
  std::vector<Flag> flags_;
  std::vector<std::string> positional_;
  bool help_requested_ = false;
};

}  // namespace lockstep::cli

#endif  // LOCKSTEP_TOOLS_CLI_FLAGS_H_
