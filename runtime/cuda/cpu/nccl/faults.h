// Fault injection for tests of the host code's NCCL error paths (the CPU execution
// layer only). A spec is a comma-separated list of faults, each optionally limited to
// one rank of a communicator:
//
//   never_arrive[:rank=R]   init never attaches: the communicator stays ncclInProgress
//                           until ncclCommAbort (or the bootstrap timeout)
//   error@N[:rank=R]        the Nth operation (1-based, counted per communicator) fails
//                           with the async error ncclSystemError and stays incomplete
//   kill@N[:rank=R]         the process SIGKILLs itself in the middle of its Nth
//                           operation (after the operation's first chunk is sent)
//
// e.g. LOCKSTEP_NCCL_CPU_FAULTS="kill@3:rank=1". The spec comes from that environment
// variable, or from SetFaultsForTesting, which overrides it. A bad spec fails
// ncclCommInitRank* with ncclInvalidArgument naming the bad entry.
//
// Thread safety: every function may be called from any thread.
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_NCCL_FAULTS_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_NCCL_FAULTS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lockstep::cuda_cpu::nccl {

inline constexpr char kFaultsEnv[] = "LOCKSTEP_NCCL_CPU_FAULTS";

// The faults that apply to one rank of one communicator.
struct Faults {
  bool never_arrive = false;
  int64_t error_at_op = 0;  // 0: none
  int64_t kill_at_op = 0;   // 0: none
};

// The faults of `spec` that apply to `rank`.
absl::StatusOr<Faults> ParseFaults(absl::string_view spec, int rank);

// The faults in force for `rank`: the testing override if set, else the environment.
absl::StatusOr<Faults> FaultsFor(int rank);

// Overrides the environment for communicators initialized from now on (nullopt:
// back to the environment).
void SetFaultsForTesting(std::optional<std::string> spec);

}  // namespace lockstep::cuda_cpu::nccl

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_NCCL_FAULTS_H_
