#include "runtime/comm/rendezvous_service.h"

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/host_port.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "runtime/security/grpc_credentials.h"

namespace lockstep::comm {
namespace {

using lockstep::v1::RendezvousGetRequest;
using lockstep::v1::RendezvousGetResponse;
using lockstep::v1::RendezvousSetRequest;
using lockstep::v1::RendezvousSetResponse;
using lockstep::v1::RendezvousWaitRequest;
using lockstep::v1::RendezvousWaitResponse;

// Cancellation is noticed at least this often while a Wait blocks.
constexpr absl::Duration kCancelCheckPeriod = absl::Milliseconds(100);

std::string MapKey(const std::string& key_space, const std::string& key) {
  return absl::StrCat(key_space, absl::string_view("\0", 1), key);
}

grpc::Status InvalidArgument(const std::string& message) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message);
}

grpc::Status ShutDownStatus() {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, "rendezvous service is shutting down");
}

}  // namespace

RendezvousServiceImpl::RendezvousServiceImpl(RendezvousServiceOptions options)
    : options_(options) {}

grpc::Status RendezvousServiceImpl::Set(grpc::ServerContext* /*context*/,
                                        const RendezvousSetRequest* request,
                                        RendezvousSetResponse* /*response*/) {
  if (request->key().empty()) return InvalidArgument("rendezvous Set: empty key");
  if (request->key().size() + request->key_space().size() > options_.max_key_bytes) {
    return InvalidArgument(absl::StrCat("rendezvous Set: key '", request->key().substr(0, 64),
                                        "...' is longer than ", options_.max_key_bytes, " bytes"));
  }
  if (request->value().size() > options_.max_value_bytes) {
    return InvalidArgument(absl::StrCat("rendezvous Set: value of key '", request->key(), "' has ",
                                        request->value().size(), " bytes, more than ",
                                        options_.max_value_bytes));
  }
  absl::MutexLock lock(&mu_);
  if (shut_down_) return ShutDownStatus();
  std::string key = MapKey(request->key_space(), request->key());
  if (!values_.contains(key) && values_.size() >= options_.max_keys) {
    return grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        absl::StrCat("rendezvous Set: the service holds ", values_.size(), " keys already"));
  }
  values_[std::move(key)] = request->value();
  changed_.SignalAll();
  return grpc::Status::OK;
}

grpc::Status RendezvousServiceImpl::Get(grpc::ServerContext* /*context*/,
                                        const RendezvousGetRequest* request,
                                        RendezvousGetResponse* response) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return ShutDownStatus();
  auto it = values_.find(MapKey(request->key_space(), request->key()));
  if (it == values_.end()) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("rendezvous key '", request->key(), "' in key space '",
                                     request->key_space(), "' is not set"));
  }
  response->set_value(it->second);
  return grpc::Status::OK;
}

grpc::Status RendezvousServiceImpl::Wait(grpc::ServerContext* context,
                                         const RendezvousWaitRequest* request,
                                         RendezvousWaitResponse* /*response*/) {
  if (request->timeout_ms() < 0) {
    return InvalidArgument(
        absl::StrCat("rendezvous Wait: negative timeout_ms ", request->timeout_ms()));
  }
  std::vector<std::string> keys;
  keys.reserve(request->keys_size());
  for (const std::string& key : request->keys()) keys.push_back(MapKey(request->key_space(), key));
  const absl::Time now = absl::Now();
  absl::Time deadline =
      now + std::min(absl::Milliseconds(request->timeout_ms()), options_.max_wait);
  if (context->deadline() != std::chrono::system_clock::time_point::max()) {
    deadline = std::min(deadline, absl::FromChrono(context->deadline()));
  }

  absl::MutexLock lock(&mu_);
  ++wait_calls_;
  while (true) {
    if (shut_down_) return ShutDownStatus();
    std::vector<std::string> missing;
    for (int i = 0; i < request->keys_size(); ++i) {
      if (!values_.contains(keys[i])) missing.push_back(request->keys(i));
    }
    if (missing.empty()) return grpc::Status::OK;
    if (context->IsCancelled()) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "rendezvous Wait cancelled by the client");
    }
    if (absl::Now() >= deadline) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                          absl::StrCat("rendezvous Wait in key space '", request->key_space(),
                                       "': key(s) ", absl::StrJoin(missing, ", "),
                                       " not set after ", absl::FormatDuration(absl::Now() - now)));
    }
    changed_.WaitWithDeadline(&mu_, std::min(deadline, absl::Now() + kCancelCheckPeriod));
  }
}

void RendezvousServiceImpl::Shutdown() {
  absl::MutexLock lock(&mu_);
  shut_down_ = true;
  changed_.SignalAll();
}

int64_t RendezvousServiceImpl::wait_calls() const {
  absl::MutexLock lock(&mu_);
  return wait_calls_;
}

size_t RendezvousServiceImpl::size() const {
  absl::MutexLock lock(&mu_);
  return values_.size();
}

absl::StatusOr<std::unique_ptr<RendezvousServer>> RendezvousServer::Start(
    const std::string& address, RendezvousServiceOptions options) {
  auto service = std::make_unique<RendezvousServiceImpl>(options);
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, security::ServerCredentials(), &port);
  builder.RegisterService(service.get());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("rendezvous server could not listen on '", address, "'"));
  }
  ASSIGN_OR_RETURN(const HostPort listen, ParseHostPort(address));
  std::string bound = listen.WithPort(port).ToString();
  LOCKSTEP_LOG_INFO("comm", "rendezvous service listening on {}", bound);
  return std::unique_ptr<RendezvousServer>(
      new RendezvousServer(std::move(service), std::move(server), port, std::move(bound)));
}

RendezvousServer::RendezvousServer(std::unique_ptr<RendezvousServiceImpl> service,
                                   std::unique_ptr<grpc::Server> server, int port,
                                   std::string address)
    : service_(std::move(service)),
      server_(std::move(server)),
      port_(port),
      address_(std::move(address)) {}

RendezvousServer::~RendezvousServer() {
  service_->Shutdown();
  server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  server_->Wait();
}

}  // namespace lockstep::comm
