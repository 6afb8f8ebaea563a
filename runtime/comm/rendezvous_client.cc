#include "runtime/comm/rendezvous_client.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "runtime/security/grpc_credentials.h"

namespace lockstep::comm {
namespace {

void PrepareContext(grpc::ClientContext& context, absl::Time deadline) {
  context.set_deadline(absl::ToChronoTime(deadline));
  context.set_wait_for_ready(true);
}

}  // namespace

RendezvousClient::RendezvousClient(std::shared_ptr<grpc::Channel> channel, std::string key_space,
                                   absl::Duration rpc_timeout)
    : stub_(lockstep::v1::RendezvousService::NewStub(std::move(channel))),
      key_space_(std::move(key_space)),
      rpc_timeout_(rpc_timeout) {}

std::unique_ptr<RendezvousClient> RendezvousClient::Connect(const std::string& address,
                                                            std::string key_space,
                                                            absl::Duration rpc_timeout) {
  return std::make_unique<RendezvousClient>(
      security::CreateChannel(address), std::move(key_space),
      rpc_timeout);
}

absl::Status RendezvousClient::Set(absl::string_view key, absl::string_view value) {
  lockstep::v1::RendezvousSetRequest request;
  request.set_key_space(key_space_);
  request.set_key(std::string(key));
  request.set_value(std::string(value));
  lockstep::v1::RendezvousSetResponse response;
  grpc::ClientContext context;
  PrepareContext(context, absl::Now() + rpc_timeout_);
  return FromGrpcStatus(stub_->Set(&context, request, &response),
                        absl::StrCat("rendezvous Set '", key, "'"));
}

absl::StatusOr<std::string> RendezvousClient::Get(absl::string_view key) {
  lockstep::v1::RendezvousGetRequest request;
  request.set_key_space(key_space_);
  request.set_key(std::string(key));
  lockstep::v1::RendezvousGetResponse response;
  grpc::ClientContext context;
  PrepareContext(context, absl::Now() + rpc_timeout_);
  absl::Status status = FromGrpcStatus(stub_->Get(&context, request, &response),
                                       absl::StrCat("rendezvous Get '", key, "'"));
  if (!status.ok()) return status;
  return std::move(*response.mutable_value());
}

absl::Status RendezvousClient::Wait(const std::vector<std::string>& keys, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  // A little slack so that the service, not the transport, reports the timeout.
  const absl::Duration slack = std::min(rpc_timeout_, absl::Seconds(1));
  while (true) {
    lockstep::v1::RendezvousWaitRequest request;
    request.set_key_space(key_space_);
    for (const std::string& key : keys) request.add_keys(key);
    const absl::Duration remaining = std::max(deadline - absl::Now(), absl::ZeroDuration());
    request.set_timeout_ms(absl::ToInt64Milliseconds(remaining));
    lockstep::v1::RendezvousWaitResponse response;
    grpc::ClientContext context;
    PrepareContext(context, deadline + slack);
    grpc::Status status = stub_->Wait(&context, request, &response);
    // The service caps each wait; wait again while time is left.
    if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && absl::Now() < deadline) {
      continue;
    }
    return FromGrpcStatus(status, absl::StrCat("rendezvous Wait in key space '", key_space_, "'"));
  }
}

}  // namespace lockstep::comm
