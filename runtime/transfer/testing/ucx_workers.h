// Test scaffolding for UcxWorker tests over the transports UCX_TLS names: workers of this
// process, seeded random bytes, and an owner whose progress a test can hold (so that a
// get or a call waits for it). Testonly.
#ifndef LOCKSTEP_RUNTIME_TRANSFER_TESTING_UCX_WORKERS_H_
#define LOCKSTEP_RUNTIME_TRANSFER_TESTING_UCX_WORKERS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "runtime/transfer/ucx_worker.h"

namespace lockstep::transfer::testing {

// A worker named `name`; null (with a test failure) when UCX cannot make one.
std::shared_ptr<UcxWorker> MakeWorker(const char* name, UcxWorkerHooks hooks = {});

// `n` bytes from a generator seeded with `seed`.
std::shared_ptr<std::vector<std::byte>> RandomBytes(size_t n, uint64_t seed);

// Whether UCX_TLS names shared memory (reads then land without the owner's progress).
bool OverShm();

// An owner worker that does not progress while `hold` (a transport that needs its
// progress, tcp, then never completes a get; shm and cma complete without it), a
// reader, and 1 MiB of random bytes registered with the owner. The workers go first on
// destruction (the owner's hook points at `hold`).
struct HeldOwner {
  // Holds the owner's progress again; true once its progress thread has seen the hold
  // (it then progresses nothing until `hold` is false), false after 10 s without.
  bool Hold();

  std::atomic<bool> hold{true};
  absl::Mutex mu;
  int held_checks ABSL_GUARDED_BY(mu) = 0;  // the hook's answers while `hold`
  std::shared_ptr<std::vector<std::byte>> source;
  std::shared_ptr<UcxWorker> owner;
  std::shared_ptr<UcxWorker> reader;
  std::unique_ptr<UcxRegion> region;
  std::shared_ptr<std::vector<std::byte>> dest;
};

// A HeldOwner whose bytes come from `seed`, held from the start; null (with a test
// failure) when a worker or the registration fails.
std::unique_ptr<HeldOwner> MakeHeldOwner(uint64_t seed);

}  // namespace lockstep::transfer::testing

#endif  // LOCKSTEP_RUNTIME_TRANSFER_TESTING_UCX_WORKERS_H_
