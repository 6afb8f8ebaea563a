#include "runtime/cuda/cpu/kernel/fiber_stacks.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace lockstep::cuda_cpu::kernel {
namespace {

size_t PageBytes() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

// The calling thread's stacks: each the low end of a mapping (guard page, then stack).
struct StackPool {
  std::vector<void*> free_stacks;
  size_t mapped = 0;

  ~StackPool() {
    for (void* base : free_stacks) munmap(base, PageBytes() + kFiberStackBytes);
  }
};

StackPool& Pool() {
  thread_local StackPool pool;
  return pool;
}

}  // namespace

boost::context::stack_context PooledStack::allocate() {
  StackPool& pool = Pool();
  void* base = nullptr;
  if (!pool.free_stacks.empty()) {
    base = pool.free_stacks.back();
    pool.free_stacks.pop_back();
  } else {
    base = mmap(nullptr, PageBytes() + kFiberStackBytes, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
      std::perror("cuda_cpu: mapping a kernel thread's stack");
      std::abort();
    }
    mprotect(base, PageBytes(), PROT_NONE);
    ++pool.mapped;
  }
  boost::context::stack_context stack;
  stack.size = kFiberStackBytes;
  stack.sp = static_cast<char*>(base) + PageBytes() + kFiberStackBytes;
  return stack;
}

void PooledStack::deallocate(boost::context::stack_context& stack) noexcept {
  Pool().free_stacks.push_back(static_cast<char*>(stack.sp) - kFiberStackBytes - PageBytes());
}

size_t MappedStacks() { return Pool().mapped; }

}  // namespace lockstep::cuda_cpu::kernel
