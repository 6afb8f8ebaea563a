// Client of the RendezvousService (proto/rendezvous.proto), bound to one key space.
// Every call has a deadline and waits for the channel to become ready within it, so
// ranks may start before the service does.
//
// Thread safety: thread-safe.
#ifndef LOCKSTEP_RUNTIME_COMM_RENDEZVOUS_CLIENT_H_
#define LOCKSTEP_RUNTIME_COMM_RENDEZVOUS_CLIENT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "proto/rendezvous.grpc.pb.h"

namespace lockstep::comm {

class RendezvousClient {
 public:
  // `key_space` separates deployments sharing one service; `rpc_timeout` bounds Set
  // and Get (Wait uses its own timeout).
  RendezvousClient(std::shared_ptr<grpc::Channel> channel, std::string key_space,
                   absl::Duration rpc_timeout = absl::Seconds(10));

  // A client on an insecure channel to `address` ("host:port").
  static std::unique_ptr<RendezvousClient> Connect(const std::string& address,
                                                   std::string key_space,
                                                   absl::Duration rpc_timeout = absl::Seconds(10));

  absl::Status Set(absl::string_view key, absl::string_view value);
  // NotFound if the key is not set.
  absl::StatusOr<std::string> Get(absl::string_view key);
  // Returns once every key is set; DeadlineExceeded naming the missing keys after
  // `timeout`. Long waits are split into several calls (the service caps each).
  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout);

  const std::string& key_space() const { return key_space_; }

 private:
  std::unique_ptr<lockstep::v1::RendezvousService::Stub> stub_;
  const std::string key_space_;
  const absl::Duration rpc_timeout_;
};

}  // namespace lockstep::comm

#endif  // LOCKSTEP_RUNTIME_COMM_RENDEZVOUS_CLIENT_H_
