#include "runtime/cuda/cpu/kernel/schedule.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace lockstep::cuda_cpu::kernel {
namespace {

std::mutex& ScheduleMutex() {
  static std::mutex mu;
  return mu;
}

std::optional<Schedule>& ScheduleSlot() {
  static std::optional<Schedule> schedule;
  return schedule;
}

}  // namespace

absl::StatusOr<Schedule> ParseSchedule(absl::string_view text) {
  if (text == "forward") return Schedule{Schedule::Kind::kForward, 0};
  if (text == "reverse") return Schedule{Schedule::Kind::kReverse, 0};
  constexpr absl::string_view kRandom = "random:";
  if (text.substr(0, kRandom.size()) == kRandom) {
    uint64_t seed = 0;
    if (absl::SimpleAtoi(text.substr(kRandom.size()), &seed)) {
      return Schedule{Schedule::Kind::kRandom, seed};
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "schedule '", text, "' is not forward, reverse or random:<unsigned 64-bit seed>"));
}

std::string ScheduleName(const Schedule& schedule) {
  switch (schedule.kind) {
    case Schedule::Kind::kForward:
      return "forward";
    case Schedule::Kind::kReverse:
      return "reverse";
    case Schedule::Kind::kRandom:
      return absl::StrCat("random:", schedule.seed);
  }
  return "forward";
}

Schedule ProcessSchedule() {
  std::lock_guard<std::mutex> lock(ScheduleMutex());
  std::optional<Schedule>& slot = ScheduleSlot();
  if (!slot.has_value()) {
    const char* env = std::getenv("LOCKSTEP_CUDA_CPU_SCHEDULE");
    if (env == nullptr || *env == '\0') {
      slot = Schedule{};
    } else {
      absl::StatusOr<Schedule> parsed = ParseSchedule(env);
      if (!parsed.ok()) {
        std::fprintf(stderr, "LOCKSTEP_CUDA_CPU_SCHEDULE: %s\n",
                     std::string(parsed.status().message()).c_str());
        std::abort();
      }
      slot = *parsed;
    }
  }
  return *slot;
}

void SetProcessSchedule(const Schedule& schedule) {
  std::lock_guard<std::mutex> lock(ScheduleMutex());
  ScheduleSlot() = schedule;
}

std::vector<uint32_t> BlockOrder(const Schedule& schedule, uint32_t count) {
  std::vector<uint32_t> order(count);
  std::iota(order.begin(), order.end(), 0u);
  if (schedule.kind == Schedule::Kind::kReverse) {
    std::reverse(order.begin(), order.end());
  } else if (schedule.kind == Schedule::Kind::kRandom) {
    std::mt19937_64 rng(schedule.seed);
    for (uint32_t i = count; i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
  }
  return order;
}

void RunQueue::Reset(const Schedule& schedule, uint64_t stream) {
  schedule_ = schedule;
  if (schedule.kind == Schedule::Kind::kRandom) {
    std::seed_seq seq{static_cast<uint32_t>(schedule.seed),
                      static_cast<uint32_t>(schedule.seed >> 32), static_cast<uint32_t>(stream),
                      static_cast<uint32_t>(stream >> 32)};
    rng_.seed(seq);
  }
  items_.clear();
  head_ = 0;
}

void RunQueue::PushGroup(const std::vector<int>& ascending) {
  if (schedule_.kind == Schedule::Kind::kReverse) {
    items_.insert(items_.end(), ascending.rbegin(), ascending.rend());
  } else {
    items_.insert(items_.end(), ascending.begin(), ascending.end());
  }
}

void RunQueue::Push(int thread) { items_.push_back(thread); }

int RunQueue::Pop() {
  if (empty()) return -1;
  if (schedule_.kind == Schedule::Kind::kRandom) {
    const size_t pick = head_ + rng_() % (items_.size() - head_);
    std::swap(items_[head_], items_[pick]);
  }
  const int thread = items_[head_++];
  if (head_ == items_.size()) {
    items_.clear();
    head_ = 0;
  }
  return thread;
}

}  // namespace lockstep::cuda_cpu::kernel
