#include "tools/cli/flags.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace lockstep::cli {

std::string ResolvePath(const std::string& path, const std::string& working_dir) {
  if (path.empty() || working_dir.empty() || std::filesystem::path(path).is_absolute()) {
    return path;
  }
  std::string resolved = (std::filesystem::path(working_dir) / path).lexically_normal().string();
  if (resolved.size() > 1 && resolved.back() == '/') resolved.pop_back();  // "dir/." -> "dir"
  return resolved;
}

std::string ResolveUserPath(const std::string& path) {
  const char* working_dir = std::getenv("BUILD_WORKING_DIRECTORY");
  return ResolvePath(path, working_dir != nullptr ? working_dir : "");
}

void FlagSet::AddString(const std::string& name, std::string* out, const std::string& help) {
  flags_.push_back({name, out, help, *out});
}

void FlagSet::AddPath(const std::string& name, std::string* out, const std::string& help) {
  flags_.push_back({name, out, help, *out});
  flags_.back().path = true;
}

void FlagSet::AddInt(const std::string& name, int64_t* out, const std::string& help) {
  flags_.push_back({name, out, help, absl::StrCat(*out)});
}

void FlagSet::AddInt(const std::string& name, int* out, const std::string& help) {
  flags_.push_back({name, out, help, absl::StrCat(*out)});
}

void FlagSet::AddDouble(const std::string& name, double* out, const std::string& help) {
  flags_.push_back({name, out, help, absl::StrCat(*out)});
}

void FlagSet::AddBool(const std::string& name, bool* out, const std::string& help) {
  flags_.push_back({name, out, help, *out ? "true" : "false"});
}

FlagSet::Flag* FlagSet::Find(const std::string& name) {
  for (Flag& flag : flags_) {
    if (flag.name == name) return &flag;
  }
  return nullptr;
}

bool FlagSet::WasSet(const std::string& name) const {
  for (const Flag& flag : flags_) {
    if (flag.name == name) return flag.set;
  }
  return false;
}

absl::Status FlagSet::Assign(Flag& flag, const std::string& value) {
  flag.set = true;
  auto bad = [&](const char* type) {
    return absl::InvalidArgumentError(
        absl::StrCat(command_, ": flag --", flag.name, " expects ", type, ", got '", value, "'"));
  };
  if (auto* s = std::get_if<std::string*>(&flag.target)) {
    **s = value;
  } else if (auto* i64 = std::get_if<int64_t*>(&flag.target)) {
    if (!absl::SimpleAtoi(value, *i64)) return bad("an integer");
  } else if (auto* i = std::get_if<int*>(&flag.target)) {
    if (!absl::SimpleAtoi(value, *i)) return bad("an integer");
  } else if (auto* d = std::get_if<double*>(&flag.target)) {
    if (!absl::SimpleAtod(value, *d)) return bad("a number");
  } else if (auto* b = std::get_if<bool*>(&flag.target)) {
    if (!absl::SimpleAtob(value, *b)) return bad("true or false");
  }
  return absl::OkStatus();
}

absl::Status FlagSet::Parse(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      positional_.insert(positional_.end(), args.begin() + i + 1, args.end());
      break;
    }
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
      positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::string value;
    bool has_value = false;
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (name == "help") {
      help_requested_ = true;
      continue;
    }
    Flag* flag = Find(name);
    if (flag == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(command_, ": unknown flag --", name, " (see --help)"));
    }
    if (!has_value) {
      if (std::holds_alternative<bool*>(flag->target)) {
        value = "true";
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat(command_, ": flag --", name, " needs a value"));
      }
    }
    if (absl::Status s = Assign(*flag, value); !s.ok()) return s;
  }
  for (Flag& flag : flags_) {
    if (flag.path)
      *std::get<std::string*>(flag.target) = ResolveUserPath(*std::get<std::string*>(flag.target));
  }
  return absl::OkStatus();
}

std::optional<int> FlagSet::ParseCommandLine(const std::vector<std::string>& args) {
  if (absl::Status s = Parse(args); !s.ok()) {
    std::fprintf(stderr, "lockstep %s\n%s", std::string(s.message()).c_str(), Usage().c_str());
    return 2;
  }
  if (help_requested()) {
    std::printf("%s", Usage().c_str());
    return 0;
  }
  return std::nullopt;
}

std::string FlagSet::Usage() const {
  std::string out = absl::StrCat("usage: lockstep ", command_, " [flags]\n");
  size_t width = 0;
  for (const Flag& flag : flags_) width = std::max(width, flag.name.size());
  for (const Flag& flag : flags_) {
    absl::StrAppendFormat(&out, "  --%-*s  %s (default: %s)\n", static_cast<int>(width), flag.name,
                          flag.help, flag.default_text.empty() ? "\"\"" : flag.default_text);
  }
  return out;
}

}  // namespace lockstep::cli
