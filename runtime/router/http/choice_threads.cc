#include "runtime/router/http/choice_threads.h"

#include <string>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "fmt/format.h"

namespace lockstep::router {

absl::StatusOr<std::thread> StartThread(std::function<void()> body) {
  try {
    return std::thread(std::move(body));
  } catch (const std::system_error& error) {
    return absl::UnavailableError(error.what());
  }
}

absl::StatusOr<std::unique_ptr<ChoiceThreads>> ChoiceThreads::Start(int32_t n,
                                                                     const ThreadStarter& start) {
  std::unique_ptr<ChoiceThreads> threads(new ChoiceThreads());
  threads->threads_.reserve(n > 1 ? n - 1 : 0);
  for (int32_t i = 1; i < n; ++i) {
    ChoiceThreads* self = threads.get();
    absl::StatusOr<std::thread> thread = start([self, i] { self->Park(i); });
    if (!thread.ok()) {
      // The destructor lets the ones started end without running anything.
      return absl::UnavailableError(fmt::format(
          "the router cannot start a thread for choice {} of {} ({}); retry later", i, n,
          std::string(thread.status().message())));
    }
    threads->threads_.push_back(*std::move(thread));
  }
  return threads;
}

ChoiceThreads::~ChoiceThreads() { ReleaseAndJoin(nullptr); }

void ChoiceThreads::Run(const std::function<void(int32_t)>& run) {
  {
    absl::MutexLock lock(&mu_);
    if (released_) return;
    released_ = true;
    run_ = &run;
  }
  run(0);
  ReleaseAndJoin(&run);
}

void ChoiceThreads::Park(int32_t i) {
  const std::function<void(int32_t)>* run;
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&released_));
    run = run_;
  }
  if (run != nullptr) (*run)(i);
}

void ChoiceThreads::ReleaseAndJoin(const std::function<void(int32_t)>* run) {
  {
    absl::MutexLock lock(&mu_);
    if (!released_) {
      released_ = true;
      run_ = run;
    }
  }
  for (std::thread& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
}

}  // namespace lockstep::router
