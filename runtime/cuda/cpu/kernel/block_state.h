// The state of the block a worker thread is running (internal to //runtime/cuda/cpu:kernel:
// the block executor owns it, the race checker reads it). One Block per RunGrid call,
// reused for each block of the grid; only the OS thread running the grid touches it.
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_BLOCK_STATE_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_BLOCK_STATE_H_

#include <boost/context/fiber.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/cuda/cpu/kernel/block_executor.h"
#include "runtime/cuda/cpu/kernel/schedule.h"

namespace lockstep::cuda_cpu::kernel {

class RaceChecker;

enum class ThreadState : uint8_t { kNotStarted, kRunnable, kBarrier, kWarp, kExited };

struct KernelThread {
  ThreadCoords coords{};
  int linear = 0;
  ThreadState state = ThreadState::kNotStarted;
  // The sync op the thread waits at (kBarrier, kWarp) or last reached.
  const char* file = "";
  int line = 0;
  WarpOpKind kind = WarpOpKind::kSync;
  unsigned mask = 0;
  uint64_t value = 0;
  int src_lane = 0;  // shuffles: the lane (of the warp) whose value this lane receives
  uint64_t result = 0;
  // The stack the thread's fiber runs on: [stack_low, stack_high).
  const std::byte* stack_low = nullptr;
  const std::byte* stack_high = nullptr;
  boost::context::fiber fiber;
};

struct Block {
  const GridSpec* spec = nullptr;
  Schedule schedule;
  std::vector<KernelThread> threads;
  int live = 0;        // threads not exited (started or not)
  int at_barrier = 0;  // threads waiting at __syncthreads
  // Per warp, bit L set while lane L waits at a warp op (state kWarp).
  std::vector<uint32_t> warp_waiting;
  RunQueue queue;
  boost::context::fiber scheduler;  // where a yielding kernel thread returns to
  std::byte* dynamic_shared = nullptr;
  RaceChecker* race_checker = nullptr;  // non-null under LOCKSTEP_CUDA_CPU_RACECHECK=1
  bool failed = false;
  cudaError_t error = cudaSuccess;
  std::string message;
};

// The block and thread running on this OS thread (nullptr outside a kernel thread).
extern thread_local Block* tls_block;
extern thread_local KernelThread* tls_thread;

// "kernel K block (x,y,z) thread (x,y,z)".
std::string DescribeThread(const Block& block, const KernelThread& thread);

// Records the block's first fault (later ones are dropped).
void RecordFault(Block& block, const KernelThread* thread, cudaError_t error,
                 const std::string& what, const char* file, int line);

}  // namespace lockstep::cuda_cpu::kernel

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_BLOCK_STATE_H_
