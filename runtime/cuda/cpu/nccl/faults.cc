#include "runtime/cuda/cpu/nccl/faults.h"

#include <cstdlib>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace lockstep::cuda_cpu::nccl {
namespace {

std::mutex& OverrideMutex() {
  static std::mutex mu;
  return mu;
}
std::optional<std::string>& Override() {
  static std::optional<std::string> spec;
  return spec;
}

absl::Status Bad(absl::string_view entry, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(kFaultsEnv, ": bad fault '", entry, "': ", why,
                                                 " (expected never_arrive, error@N or kill@N, "
                                                 "each optionally followed by :rank=R)"));
}

}  // namespace

absl::StatusOr<Faults> ParseFaults(absl::string_view spec, int rank) {
  Faults faults;
  for (absl::string_view entry : absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    entry = absl::StripAsciiWhitespace(entry);
    std::vector<absl::string_view> parts = absl::StrSplit(entry, ':');
    if (parts.size() > 2) return Bad(entry, "more than one ':'");
    bool applies = true;
    if (parts.size() == 2) {
      absl::string_view r = parts[1];
      int only = -1;
      if (!absl::ConsumePrefix(&r, "rank=") || !absl::SimpleAtoi(r, &only) || only < 0) {
        return Bad(entry, "the qualifier is not rank=R");
      }
      applies = only == rank;
    }
    std::vector<absl::string_view> kind = absl::StrSplit(parts[0], '@');
    int64_t n = 0;
    if (kind.size() == 2 && (!absl::SimpleAtoi(kind[1], &n) || n < 1)) {
      return Bad(entry, "N must be a positive operation number");
    }
    if (kind[0] == "never_arrive" && kind.size() == 1) {
      if (applies) faults.never_arrive = true;
    } else if (kind[0] == "error" && kind.size() == 2) {
      if (applies) faults.error_at_op = n;
    } else if (kind[0] == "kill" && kind.size() == 2) {
      if (applies) faults.kill_at_op = n;
    } else {
      return Bad(entry, "unknown fault");
    }
  }
  return faults;
}

absl::StatusOr<Faults> FaultsFor(int rank) {
  std::string spec;
  {
    std::lock_guard<std::mutex> lock(OverrideMutex());
    if (Override().has_value()) {
      spec = *Override();
    } else if (const char* env = std::getenv(kFaultsEnv); env != nullptr) {
      spec = env;
    }
  }
  return ParseFaults(spec, rank);
}

void SetFaultsForTesting(std::optional<std::string> spec) {
  std::lock_guard<std::mutex> lock(OverrideMutex());
  Override() = std::move(spec);
}

}  // namespace lockstep::cuda_cpu::nccl
