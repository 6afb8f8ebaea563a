// Fault injection for the error paths above the CPU execution layer's cuBLASLt: the nth
// cublasLtMatmul call returns a chosen status (CUBLAS_STATUS_NOT_SUPPORTED,
// CUBLAS_STATUS_EXECUTION_FAILED, ...) at once, without enqueuing anything, as the
// real library does when it cannot launch. (A fault while the product runs on its
// stream is the runtime's: LOCKSTEP_CUDA_CPU_FAULTS=illegal_address:N@cublasLtMatmul,
// faults.h.)
//
// Each fault fires at the nth cublasLtMatmul call counted from when it was armed.
// Armed from the environment at the first call, LOCKSTEP_CUDA_CPU_CUBLASLT_FAULTS is a
// comma-separated list of KIND:N with KIND not_supported or execution_failed, e.g.
//   LOCKSTEP_CUDA_CPU_CUBLASLT_FAULTS=not_supported:1,execution_failed:4
// A malformed value ends the process with a message naming it.
//
// Thread safety: every function may be called from any thread.
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_CUBLASLT_FAULTS_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_CUBLASLT_FAULTS_H_

#include "cublas_api.h"

namespace lockstep::cuda_cpu {
namespace testing {

// Arms: the `nth` (>= 1) cublasLtMatmul call from now returns `status`.
void InjectCublasLtFault(cublasStatus_t status, int nth);

// Disarms every cuBLASLt fault (those from the environment included).
void ClearCublasLtFaults();

}  // namespace testing

namespace internal {

// Counts one cublasLtMatmul call: CUBLAS_STATUS_SUCCESS, or the status of the fault
// that fires at it.
cublasStatus_t NextMatmulFault();

}  // namespace internal
}  // namespace lockstep::cuda_cpu

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_CUBLASLT_FAULTS_H_
