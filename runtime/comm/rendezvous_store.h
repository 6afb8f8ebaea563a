// RendezvousStore: a gloo::rendezvous::Store backed by the gRPC RendezvousService, so
// that ranks on different hosts can bootstrap a GlooCommunicator.
//
// gloo's Store interface reports errors only by throwing, and project code does not
// throw. A failed call therefore records the error (first_error()) and returns empty
// data, which makes gloo's connect fail; GlooCommunicator::Create then reports the
// recorded error instead of gloo's.
//
// Thread safety: thread-safe.
#ifndef LOCKSTEP_RUNTIME_COMM_RENDEZVOUS_STORE_H_
#define LOCKSTEP_RUNTIME_COMM_RENDEZVOUS_STORE_H_

#include <chrono>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gloo/rendezvous/store.h"
#include "runtime/comm/rendezvous_client.h"

namespace lockstep::comm {

class RendezvousStore final : public gloo::rendezvous::Store {
 public:
  // `client` must outlive the store. `default_wait` bounds wait() without a timeout.
  explicit RendezvousStore(RendezvousClient* client,
                           absl::Duration default_wait = absl::Seconds(30));

  void set(const std::string& key, const std::vector<char>& data) override;
  // Empty (and the error recorded) if the key is not set or the service fails.
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // The first error of any call, OK if none.
  absl::Status first_error() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Record(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);

  RendezvousClient* const client_;
  const absl::Duration default_wait_;
  mutable absl::Mutex mu_;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep::comm

#endif  // LOCKSTEP_RUNTIME_COMM_RENDEZVOUS_STORE_H_
