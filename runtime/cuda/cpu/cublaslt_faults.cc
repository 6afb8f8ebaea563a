#include "runtime/cuda/cpu/cublaslt_faults.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace lockstep::cuda_cpu {
namespace {

struct Armed {
  cublasStatus_t status;  // CUBLAS_STATUS_SUCCESS: an M-dependent heuristic answer
  int remaining;          // matching calls until it fires (1: the next one)
};

struct Faults {
  std::mutex mu;
  bool env_read = false;
  std::vector<Armed> armed;
};

Faults& F() {
  static Faults* faults = new Faults;
  return *faults;
}

[[noreturn]] void Malformed(absl::string_view value, absl::string_view why) {
  std::fprintf(stderr,
               "LOCKSTEP_CUDA_CPU_CUBLASLT_FAULTS=%.*s: %.*s (expected KIND:N,... with KIND "
               "not_supported, execution_failed or m_dependent and N >= 1)\n",
               static_cast<int>(value.size()), value.data(), static_cast<int>(why.size()),
               why.data());
  std::abort();
}

void ReadEnvLocked(Faults& f) {
  if (f.env_read) return;
  f.env_read = true;
  const char* env = std::getenv("LOCKSTEP_CUDA_CPU_CUBLASLT_FAULTS");
  if (env == nullptr || *env == '\0') return;
  for (absl::string_view item : absl::StrSplit(env, ',')) {
    const std::vector<absl::string_view> parts = absl::StrSplit(item, ':');
    int nth = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &nth) || nth < 1) {
      Malformed(env, item);
    }
    if (parts[0] == "not_supported") {
      f.armed.push_back({CUBLAS_STATUS_NOT_SUPPORTED, nth});
    } else if (parts[0] == "execution_failed") {
      f.armed.push_back({CUBLAS_STATUS_EXECUTION_FAILED, nth});
    } else if (parts[0] == "m_dependent") {
      f.armed.push_back({CUBLAS_STATUS_SUCCESS, nth});
    } else {
      Malformed(env, parts[0]);
    }
  }
}

}  // namespace

namespace testing {

void InjectCublasLtFault(cublasStatus_t status, int nth) {
  Faults& f = F();
  std::lock_guard lock(f.mu);
  ReadEnvLocked(f);
  f.armed.push_back({status, nth < 1 ? 1 : nth});
}

void InjectMDependentAlgorithm(int nth) {
  Faults& f = F();
  std::lock_guard lock(f.mu);
  ReadEnvLocked(f);
  f.armed.push_back({CUBLAS_STATUS_SUCCESS, nth < 1 ? 1 : nth});
}

void ClearCublasLtFaults() {
  Faults& f = F();
  std::lock_guard lock(f.mu);
  f.env_read = true;
  f.armed.clear();
}

}  // namespace testing

namespace internal {

namespace {

// Counts one call for the faults that `heuristic` selects; whether one fired, and its
// status in *status (the first armed).
bool CountCall(bool heuristic, cublasStatus_t* status) {
  Faults& f = F();
  std::lock_guard lock(f.mu);
  ReadEnvLocked(f);
  bool fired = false;
  for (auto it = f.armed.begin(); it != f.armed.end();) {
    if ((it->status == CUBLAS_STATUS_SUCCESS) != heuristic || --it->remaining > 0) {
      ++it;
      continue;
    }
    if (!fired) *status = it->status;
    fired = true;
    it = f.armed.erase(it);
  }
  return fired;
}

}  // namespace

cublasStatus_t NextMatmulFault() {
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  CountCall(/*heuristic=*/false, &status);
  return status;
}

bool NextHeuristicIsMDependent() {
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  return CountCall(/*heuristic=*/true, &status);
}

}  // namespace internal
}  // namespace lockstep::cuda_cpu
