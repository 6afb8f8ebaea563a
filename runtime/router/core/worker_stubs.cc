#include "runtime/router/core/worker_stubs.h"

#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "runtime/security/grpc_credentials.h"

namespace lockstep::router {

std::shared_ptr<v1::WorkerService::Stub> WorkerStubs::Get(const std::string& address) {
  return GetKind(address, 0);
}

std::shared_ptr<v1::WorkerService::Stub> WorkerStubs::GetControl(const std::string& address) {
  return GetKind(address, 1);
}

std::shared_ptr<v1::WorkerService::Stub> WorkerStubs::GetKind(const std::string& address,
                                                              int kind) {
  absl::MutexLock lock(&mu_);
  absl::flat_hash_map<std::string, Entry>& stubs = stubs_[kind];
  auto it = stubs.find(address);
  if (it != stubs.end() &&
      it->second.channel->GetState(/*try_to_connect=*/false) != GRPC_CHANNEL_TRANSIENT_FAILURE) {
    return it->second.stub;
  }
  grpc::ChannelArguments args;
  // Reconnect quickly after a worker restarts at the same address. (Not
  // GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: gRPC also takes it as the connect timeout, and a
  // loaded machine needs more than a few hundred ms for a handshake.)
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // Channels with equal arguments share a connection: the control channel differs, and
  // takes no subchannel from the global pool.
  if (kind == 1) {
    args.SetString("lockstep.channel", "control");
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  }
  std::shared_ptr<grpc::Channel> channel =
      security::CreateChannel(address, args);
  auto stub = std::shared_ptr<v1::WorkerService::Stub>(v1::WorkerService::NewStub(channel));
  stubs[address] = Entry{std::move(channel), stub};
  return stub;
}

}  // namespace lockstep::router
