// Fault injection for the error paths above the CPU execution layer's cuBLASLt: the nth
// cublasLtMatmul call returns a chosen status (CUBLAS_STATUS_NOT_SUPPORTED,
// CUBLAS_STATUS_EXECUTION_FAILED, ...) at once, without enqueuing anything, as the
// real library does when it cannot launch; or the nth heuristic query ranks first an
// algorithm whose rows depend on the batch although it reports no split-K (as a
// stream-K kernel's can: what the GEMM wrapper's batch-invariance check is for). (A
// fault while the product runs on its stream is the runtime's:
// LOCKSTEP_CUDA_CPU_FAULTS=illegal_address:N@cublasLtMatmul, faults.h.)
//
// Each fault fires at the nth matching call counted from when it was armed. Armed from
// the environment at the first call, LOCKSTEP_CUDA_CPU_CUBLASLT_FAULTS is a
// comma-separated list of KIND:N with KIND not_supported or execution_failed (nth
// cublasLtMatmul) or m_dependent (nth cublasLtMatmulAlgoGetHeuristic), e.g.
//   LOCKSTEP_CUDA_CPU_CUBLASLT_FAULTS=not_supported:1,execution_failed:4,m_dependent:1
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

// Arms: the `nth` (>= 1) cublasLtMatmulAlgoGetHeuristic call from now answers first an
// algorithm that reports split-K 1 and no reduction but, when D has more than one
// column (a batch of more than one row in the wrapper's terms), adds the two halves of
// k computed apart, so a row's bits depend on the batch.
void InjectMDependentAlgorithm(int nth);

// Disarms every cuBLASLt fault (those from the environment included).
void ClearCublasLtFaults();

}  // namespace testing

namespace internal {

// Counts one cublasLtMatmul call: CUBLAS_STATUS_SUCCESS, or the status of the fault
// that fires at it.
cublasStatus_t NextMatmulFault();

// Counts one heuristic query: whether its first answer is to be M-dependent.
bool NextHeuristicIsMDependent();

}  // namespace internal
}  // namespace lockstep::cuda_cpu

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_CUBLASLT_FAULTS_H_
