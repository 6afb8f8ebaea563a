// Stacks for the kernel threads' fibers: 256 KiB each with a PROT_NONE guard page below
// (an overflow faults instead of corrupting memory), mapped once and reused. A Boost
// stack allocator over the calling OS thread's pool.
//
// Thread safety: each OS thread has its own pool; a PooledStack must be used on the
// thread that made it (fibers never move between OS threads).
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_FIBER_STACKS_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_FIBER_STACKS_H_

#include <boost/context/stack_context.hpp>

#include <cstddef>

namespace lockstep::cuda_cpu::kernel {

inline constexpr size_t kFiberStackBytes = 256 * 1024;

class PooledStack {
 public:
  boost::context::stack_context allocate();
  void deallocate(boost::context::stack_context& stack) noexcept;
};

// Stacks mapped by this OS thread's pool so far (in use or free).
size_t MappedStacks();

}  // namespace lockstep::cuda_cpu::kernel

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_FIBER_STACKS_H_
