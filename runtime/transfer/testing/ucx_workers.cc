#include "runtime/transfer/testing/ucx_workers.h"

#include <cstdlib>
#include <random>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace lockstep::transfer::testing {

std::shared_ptr<UcxWorker> MakeWorker(const char* name, UcxWorkerHooks hooks) {
  absl::StatusOr<std::shared_ptr<UcxWorker>> worker = UcxWorker::Create(name, std::move(hooks));
  EXPECT_TRUE(worker.ok()) << worker.status();
  return worker.ok() ? *worker : nullptr;
}

std::shared_ptr<std::vector<std::byte>> RandomBytes(size_t n, uint64_t seed) {
  auto bytes = std::make_shared<std::vector<std::byte>>(n);
  std::mt19937_64 rng(seed);
  for (std::byte& b : *bytes) b = static_cast<std::byte>(rng());
  return bytes;
}

bool OverShm() {
  const char* tls = std::getenv("UCX_TLS");
  return tls != nullptr && absl::StrContains(tls, "shm");
}

bool HeldOwner::Hold() {
  hold = true;
  absl::MutexLock lock(&mu);
  const int seen = held_checks;
  const auto held = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return held_checks > seen; };
  return mu.AwaitWithTimeout(absl::Condition(&held), absl::Seconds(10));
}

std::unique_ptr<HeldOwner> MakeHeldOwner(uint64_t seed) {
  auto held = std::make_unique<HeldOwner>();
  HeldOwner* h = held.get();
  h->source = RandomBytes(1 << 20, seed);
  h->owner = MakeWorker("context", {.hold_progress = [h] {
                          if (!h->hold.load()) return false;
                          absl::MutexLock lock(&h->mu);
                          ++h->held_checks;
                          return true;
                        }});
  h->reader = MakeWorker("generation");
  if (h->owner == nullptr || h->reader == nullptr) return nullptr;
  absl::StatusOr<std::unique_ptr<UcxRegion>> registered = h->owner->Register(*h->source);
  if (!registered.ok()) {
    ADD_FAILURE() << "Register: " << registered.status();
    return nullptr;
  }
  h->region = std::move(*registered);
  h->dest = std::make_shared<std::vector<std::byte>>(h->source->size());
  return held;
}

}  // namespace lockstep::transfer::testing
