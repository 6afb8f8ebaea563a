// Runs a kernel launch's grid on the host: blocks one after another (in the schedule's
// order) on the calling thread, each block's threads as fibers (Boost.Context) on pooled
// stacks, switched only at sync ops. A thread that never reaches a sync op runs to its
// end before the next starts, on the stack the previous one released (the cheap path of
// elementwise kernels and empty blocks).
//
// Semantics (docs/gpu.md, "CUDA on the CPU"):
// * `__syncthreads` completes when every thread of the block that has not exited waits
//   at it; waits at different source lines are a "divergent __syncthreads" fault.
// * A warp op (`__syncwarp`, shuffles, votes) completes when every lane named in its
//   mask waits at the same op with the same mask (shuffles and votes: the same line
//   too). A masked lane that exited or does not exist, a lane not in its own mask, a
//   shuffle reading a lane outside the mask, or masked lanes at different warp ops is
//   a fault. Nothing runnable while threads wait: a deadlock fault listing every
//   thread's wait site. Faults never hang.
// * Between sync points the threads run in the order LOCKSTEP_CUDA_CPU_SCHEDULE says
//   (schedule.h), so a missing barrier changes results under some schedule.
// * A fault (also `__trap`, device `assert`, a race under racecheck.h) stops the grid:
//   it becomes the device's sticky error, with kernel, block, thread and file:line.
//
// Thread safety: RunGrid may run on several threads at once (one grid each); the sync
// ops act on the grid of the calling thread. Static `__shared__` variables are
// thread_local, so a block's threads (fibers of one OS thread) share them.
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_BLOCK_EXECUTOR_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_BLOCK_EXECUTOR_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "driver_types.h"
#include "vector_types.h"

namespace lockstep::cuda_cpu::kernel {

// The built-in variables of the kernel thread running now (threadIdx and friends).
struct ThreadCoords {
  uint3 thread_idx;
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
};

// Set while a kernel thread runs on this OS thread, nullptr otherwise.
extern thread_local const ThreadCoords* tls_coords;

// One launch: what RunGrid needs. `body(context)` runs one kernel thread.
struct GridSpec {
  std::string kernel_name;
  dim3 grid;
  dim3 block;
  size_t dynamic_shared_bytes = 0;
  void (*body)(const void* context) = nullptr;
  const void* context = nullptr;
};

// Runs every block of `spec`. On a fault: records it with SetStickyError (stream_ops.h)
// and returns its error (cudaErrorLaunchFailure, cudaErrorAssert, ...), running no
// further block.
cudaError_t RunGrid(const GridSpec& spec);

// The warp ops of the sync layer.
enum class WarpOpKind : uint8_t { kSync, kShfl, kShflUp, kShflDown, kShflXor, kBallot, kAny, kAll };

// Called from kernel threads only (device_builtins.h wraps them).
void SyncThreads(const char* file, int line);
// `value`: the lane's operand bits (shuffles) or predicate (votes); `operand`: the
// source lane, delta or lane mask of shuffles. Returns the lane's result bits.
uint64_t WarpOp(WarpOpKind kind, unsigned mask, uint64_t value, int operand, int width,
                const char* file, int line);
// Ends the grid with `error` (never returns to the kernel thread).
[[noreturn]] void FailKernel(cudaError_t error, const std::string& what, const char* file,
                             int line);
// The running block's dynamic shared memory (LOCKSTEP_DYNAMIC_SHARED).
void* DynamicShared();

// A number unique to the grid whose block runs on this OS thread (0 outside any), so
// per-thread state a kernel keeps on the host (ptx.h's cp.async queues) can tell a new
// grid from the last one.
uint64_t CurrentGridSerial();

// The message of the last fault of a grid in this process ("" if none): what RunGrid
// gave SetStickyError (tests read it).
std::string LastKernelFault();

// "kernel K block (x,y,z) thread (x,y,z)" of the kernel thread running on this OS
// thread, or "" when none does (for reports of faults caught elsewhere, e.g. SIGSEGV).
std::string CurrentKernelThread();

}  // namespace lockstep::cuda_cpu::kernel

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_BLOCK_EXECUTOR_H_
