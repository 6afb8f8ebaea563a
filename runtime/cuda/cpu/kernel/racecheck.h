// A race checker for the threads of one block, like compute-sanitizer's racecheck but
// over all memory a kernel touches outside its threads' own stacks (shared memory,
// static and dynamic, and global memory): a thread reading or writing a byte that
// another thread of its block wrote, or writing a byte another thread read, since the
// last __syncthreads, without a __syncwarp/shuffle/vote joining the two in between
// (lanes of one warp), is a fault naming both threads and the address.
//
// How accesses are seen: kernel code compiled with
// `-fsanitize-coverage=edge,trace-loads,trace-stores` (no other coverage, no runtime)
// calls __sanitizer_cov_load<N>/__sanitizer_cov_store<N> before each load and store;
// this library defines them (weak). The check runs only when LOCKSTEP_CUDA_CPU_RACECHECK=1
// (or SetRaceCheckEnabled) and only for code built with those flags; otherwise each
// instrumented access costs a call and two thread_local reads.
//
// Limits: atomics (read-modify-write) are not seen, so they never race; accesses made
// by library code not built with the flags (libm, memcpy calls) are not seen; races
// between blocks are not checked (only within a block); threads run one at a time
// between sync points, so this finds the races of the executed paths, whatever the
// schedule. A shadow entry per byte: meant for tests' small shapes.
//
// Thread safety: a RaceChecker belongs to the block executor of one OS thread.
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_RACECHECK_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_RACECHECK_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace lockstep::cuda_cpu::kernel {

// LOCKSTEP_CUDA_CPU_RACECHECK=1 (read once), unless SetRaceCheckEnabled said otherwise.
bool RaceCheckEnabled();
void SetRaceCheckEnabled(bool enabled);

class RaceChecker {
 public:
  // A new block of `threads` threads.
  void Reset(int threads);
  // Every thread passed a __syncthreads: all earlier accesses are ordered.
  void OnBarrier();
  // The lanes of `mask` of the warp starting at thread `warp_base` joined at a warp op.
  void OnWarpSync(int warp_base, unsigned mask);
  // The running kernel thread accesses [address, address + size).
  void Access(const void* address, size_t size, bool write);

 private:
  static constexpr int kMaxReaders = 4;
  struct Shadow {
    int32_t writer = -1;
    uint32_t writer_clock = 0;
    int32_t readers[kMaxReaders] = {-1, -1, -1, -1};
    uint32_t reader_clocks[kMaxReaders] = {};
  };

  // Whether thread `before`'s access at its clock `clock` is ordered before `thread`'s.
  bool Ordered(int before, uint32_t clock, int thread) const;
  void Report(const void* address, int first, bool first_wrote, int second, bool second_writes);

  absl::flat_hash_map<uintptr_t, Shadow> shadow_;
  // Per thread: the clocks of its warp's lanes as it knows them (its own lane: its own).
  std::vector<std::array<uint32_t, 32>> clocks_;
};

}  // namespace lockstep::cuda_cpu::kernel

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_RACECHECK_H_
