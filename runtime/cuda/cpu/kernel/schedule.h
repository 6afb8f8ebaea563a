// The order in which the CPU execution layer runs a grid's blocks and a block's threads
// between sync points: LOCKSTEP_CUDA_CPU_SCHEDULE=forward (the default: ascending
// index), reverse (descending) or random:<seed> (a seeded shuffle of the blocks, and at
// each step a seeded pick among the runnable threads). A missing barrier or a
// cross-thread dependency without one shows as a different result under some schedule.
//
// Thread safety: ProcessSchedule is safe from any thread; a RunQueue is used by one.
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_SCHEDULE_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_SCHEDULE_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lockstep::cuda_cpu::kernel {

struct Schedule {
  enum class Kind { kForward, kReverse, kRandom };
  Kind kind = Kind::kForward;
  uint64_t seed = 0;  // kRandom only
};

// Parses "forward", "reverse" or "random:<seed>" (an unsigned 64-bit decimal).
absl::StatusOr<Schedule> ParseSchedule(absl::string_view text);

// "forward", "reverse" or "random:<seed>".
std::string ScheduleName(const Schedule& schedule);

// The process's schedule: LOCKSTEP_CUDA_CPU_SCHEDULE (read once), or a test's override.
// A malformed value ends the process with a message naming the variable.
Schedule ProcessSchedule();
// Replaces the process's schedule (tests).
void SetProcessSchedule(const Schedule& schedule);

// Block indices 0..count-1 in the order `schedule` runs them.
std::vector<uint32_t> BlockOrder(const Schedule& schedule, uint32_t count);

// The runnable threads of one block. Push adds threads made runnable together (in
// ascending index order; reverse pushes them descending); Pop takes the next to run:
// first in, first out, or under kRandom a seeded pick.
class RunQueue {
 public:
  // `stream`: mixes into the random pick (e.g. the block's linear index).
  void Reset(const Schedule& schedule, uint64_t stream);
  void PushGroup(const std::vector<int>& ascending);
  void Push(int thread);
  // -1 when empty.
  int Pop();
  bool empty() const { return head_ == items_.size(); }

 private:
  Schedule schedule_;
  std::mt19937_64 rng_;  // kRandom only
  std::vector<int> items_;
  size_t head_ = 0;
};

}  // namespace lockstep::cuda_cpu::kernel

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_SCHEDULE_H_
