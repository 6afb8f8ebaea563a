#include "common/clock.h"

#include <chrono>
#include <thread>

#include "common/check.h"

namespace lockstep {
namespace {

int64_t SteadyNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

SystemClock::SystemClock() : base_(absl::Now()), steady_base_ns_(SteadyNanos()) {}

absl::Time SystemClock::Now() const {
  return base_ + absl::Nanoseconds(SteadyNanos() - steady_base_ns_);
}

void SystemClock::SleepUntil(absl::Time deadline) {
  const absl::Duration remaining = deadline - Now();
  if (remaining > absl::ZeroDuration()) {
    std::this_thread::sleep_for(absl::ToChronoNanoseconds(remaining));
  }
}

SystemClock* SystemClock::Get() {
  static SystemClock* clock = new SystemClock();
  return clock;
}

FakeClock::FakeClock() : FakeClock(absl::UnixEpoch() + absl::Hours(24)) {}

FakeClock::FakeClock(absl::Time start) : now_(start) {}

absl::Time FakeClock::Now() const {
  absl::MutexLock lock(&mu_);
  return now_;
}

void FakeClock::SleepUntil(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  if (deadline > now_) now_ = deadline;
}

void FakeClock::Advance(absl::Duration d) {
  LOCKSTEP_CHECK(d >= absl::ZeroDuration()) << "a clock cannot go backwards: " << d;
  absl::MutexLock lock(&mu_);
  now_ += d;
}

void FakeClock::SetTime(absl::Time t) {
  absl::MutexLock lock(&mu_);
  LOCKSTEP_CHECK(t >= now_) << "a clock cannot go backwards: " << t << " < " << now_;
  now_ = t;
}

}  // namespace lockstep
