// Fault injection for the error paths of the code above the CPU execution layer: an
// allocation that fails, a stream op that faults (sticky, as an illegal address in a
// kernel), a stream op that never finishes, a graph launch that fails.
//
// Each fault fires at the nth matching event counted from when it was armed (events
// that match several armed faults count for each). Stream ops are counted when they
// run (a graph's nodes at each replay), and only those put on streams through
// Enqueue (kernel launches, cuBLASLt, NCCL), optionally only those whose name
// contains a filter. Ops of different streams count in the order they run, which
// varies: a test that needs one exact op uses a filter or a single stream.
//
// Armed from the environment at the first event, LOCKSTEP_CUDA_CPU_FAULTS is a
// comma-separated list of KIND:N[@FILTER], e.g.
//   LOCKSTEP_CUDA_CPU_FAULTS=alloc:3,illegal_address:5@Rope,hang:2,graph_launch:1
// KIND is one of
//   alloc            the nth cudaMalloc/cudaMallocAsync returns cudaErrorMemoryAllocation
//   illegal_address  the nth stream op fails with cudaErrorIllegalAddress (sticky)
//   hang             the nth stream op never finishes: its stream's later work waits
//                    until the stream is destroyed (then the op is dropped) or the
//                    process exits, so callers' deadlines must fire
//   graph_launch     the nth cudaGraphLaunch returns cudaErrorLaunchFailure (not sticky)
// A malformed value ends the process with a message naming it.
//
// Thread safety: every function may be called from any thread.
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_FAULTS_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_FAULTS_H_

#include <string>
#include <string_view>

#include "driver_types.h"
#include "runtime/cuda/cpu/stream_ops.h"

namespace lockstep::cuda_cpu {
namespace testing {

enum class Fault { kAllocationFails, kOpIllegalAddress, kOpHangs, kGraphLaunchFails };

// Arms `fault` to fire at the `nth` (>= 1) matching event from now on. `filter`, for
// the op faults: only ops whose name contains it count.
void InjectFault(Fault fault, int nth, std::string filter = "");

// Disarms every fault (those from the environment included).
void ClearFaults();

// Clears every device's sticky error (what cudaDeviceReset would do), so one test
// process can check several faults.
void ClearStickyErrors();

}  // namespace testing

namespace internal {

// Runs the stream op `op` named `name`, unless an armed fault replaces it.
cudaError_t RunWithFaults(const std::string& name, const StreamOp& op);

// Whether this allocation / graph launch is to fail.
bool AllocationFails();
bool GraphLaunchFails();

}  // namespace internal
}  // namespace lockstep::cuda_cpu

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_FAULTS_H_
