// UcxWorker's endpoints: made on first use per peer with a ping / pong handshake
// (EndpointTo, AwaitConnected), closed when failed or at stop (CloseEndpoint,
// ForceClose), and the remote keys and mappings kept per endpoint (RemoteKeyFor,
// MapRemote). Split from ucx_worker.cc, which makes the worker and runs its progress.
#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/internal/endian.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "runtime/transfer/ucx_worker.h"
#include "runtime/transfer/ucx_worker_internal.h"
#include "ucp/api/ucp.h"

namespace lockstep::transfer {
namespace {

using ucx_internal::kPingId;
using ucx_internal::kRegionPrefix;
using ucx_internal::UcxError;
using ucx_internal::Worker;

// Remote keys unpacked and kept per endpoint (the same staging chunk is read again and
// again: unpacking attaches its shared-memory segment, which is costly).
constexpr size_t kMaxCachedRkeys = 16;

}  // namespace

// A close in flight (CloseEndpoint): the endpoint's state lives until UCX completes it.
struct UcxWorker::Closing {
  UcxWorker* worker;
  std::shared_ptr<Endpoint> endpoint;
};

void UcxWorker::OnEndpointError(void* arg, void* /*ep*/, int status) {
  auto* endpoint = static_cast<Endpoint*>(arg);
  endpoint->error = status;
  endpoint->failed = true;
  // The peer is gone: its answer to the handshake no longer matters.
  endpoint->worker->Connected(endpoint->token);
}

void UcxWorker::Connected(uint64_t token) {
  absl::MutexLock lock(&mu_);
  auto it = connecting_.find(token);
  if (it == connecting_.end()) return;
  // A close put off until now: the progress thread (or Quiesce) makes it, outside UCX's
  // callback.
  if (it->second->close_when_connected) deferred_closes_.push_back(std::move(it->second));
  connecting_.erase(it);
}

absl::Status UcxWorker::AwaitConnected(const Endpoint& endpoint, absl::Time deadline,
                                       const std::function<bool()>& cancelled,
                                       const std::function<absl::Status()>& peer_check,
                                       absl::Duration slice) {
  const uint64_t token = endpoint.token;
  const auto connected = [this, token]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !connecting_.contains(token);
  };
  absl::MutexLock lock(&mu_);
  for (;;) {
    const absl::Time now = absl::Now();
    if (connected()) return absl::OkStatus();
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          "the UCX get did not complete by its deadline: the endpoint to the context rank "
          "is still connecting");
    }
    if (mu_.AwaitWithDeadline(absl::Condition(&connected), std::min(deadline, now + slice))) {
      return absl::OkStatus();
    }
    if (cancelled && cancelled()) return absl::CancelledError("the UCX get was cancelled");
    if (peer_check) {
      mu_.Unlock();
      absl::Status checked = peer_check();
      mu_.Lock();
      if (connected()) return absl::OkStatus();
      if (!checked.ok()) return checked;
    }
  }
}

absl::StatusOr<std::shared_ptr<UcxWorker::Endpoint>> UcxWorker::ConnectedEndpointTo(
    const std::string& peer, absl::Time deadline, const std::function<bool()>& cancelled,
    const std::function<absl::Status()>& peer_check, absl::Duration slice) {
  if (peer.empty()) return absl::UnavailableError("the context rank sent no UCX worker address");
  absl::StatusOr<std::shared_ptr<Endpoint>> endpoint = EndpointTo(peer);
  if (!endpoint.ok()) return endpoint.status();
  if (absl::Status connected = AwaitConnected(**endpoint, deadline, cancelled, peer_check, slice);
      !connected.ok()) {
    return connected;
  }
  return endpoint;
}

void UcxWorker::CloseDeferred() {
  std::vector<std::shared_ptr<Endpoint>> closes;
  {
    absl::MutexLock lock(&mu_);
    closes.swap(deferred_closes_);
  }
  for (const std::shared_ptr<Endpoint>& endpoint : closes) ForceClose(endpoint);
}

absl::StatusOr<std::shared_ptr<UcxWorker::Endpoint>> UcxWorker::EndpointTo(
    const std::string& peer) {
  std::shared_ptr<Endpoint> stale;
  {
    absl::MutexLock lock(&mu_);
    auto it = endpoints_.find(peer);
    if (it != endpoints_.end()) {
      if (!it->second->failed) return it->second;
      stale = std::move(it->second);
      endpoints_.erase(it);
    }
  }
  if (stale != nullptr) CloseEndpoint(stale, absl::Now());
  absl::StatusOr<absl::string_view> address = Unframe('A', peer);
  if (!address.ok()) return address.status();
  auto endpoint = std::make_shared<Endpoint>();
  endpoint->peer = peer;
  endpoint->worker = this;
  endpoint->token = next_token_.fetch_add(1);
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(address->data());
  params.err_handler.cb = [](void* arg, ucp_ep_h ep, ucs_status_t status) {
    OnEndpointError(arg, ep, status);
  };
  params.err_handler.arg = endpoint.get();
  // Peer failure detection where the transports have it (tcp, verbs); shared memory
  // has none, and UCX refuses such a peer in that mode: connect without it, relying on
  // each get's deadline.
  // (UCX logs one error when it refuses; later endpoints skip the first try.)
  ucs_status_t created = UCS_ERR_UNREACHABLE;
  if (!peer_mode_refused_) {
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    created = ucp_ep_create(Worker(worker_), &params, &endpoint->ep);
    if (created == UCS_ERR_UNREACHABLE) peer_mode_refused_ = true;
  }
  if (created == UCS_ERR_UNREACHABLE) {
    params.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    created = ucp_ep_create(Worker(worker_), &params, &endpoint->ep);
  }
  if (created != UCS_OK) {
    return UcxError("connecting a UCX endpoint to the context rank", created);
  }
  endpoint->native_get = ucx_internal::HasNativeGet(endpoint->ep);
  // The handshake: a worker stopping before the pong arrives waits for it (Quiesce).
  {
    absl::MutexLock lock(&mu_);
    connecting_.emplace(endpoint->token, endpoint);
  }
  // A ping that fails (the endpoint failed, or was closed at the stop deadline) gets no
  // answer: the handshake ends there.
  struct Ping {
    uint64_t token;
    UcxWorker* worker;
  };
  auto* held = new Ping{endpoint->token, this};
  ucp_request_param_t ping{};
  ping.op_attr_mask =
      UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  ping.flags = UCP_AM_SEND_FLAG_REPLY;
  ping.cb.send = [](void* request, ucs_status_t status, void* user_data) {
    auto* sent = static_cast<Ping*>(user_data);
    if (status != UCS_OK) sent->worker->Connected(sent->token);
    delete sent;
    ucp_request_free(request);
  };
  ping.user_data = held;
  void* sent =
      ucp_am_send_nbx(endpoint->ep, kPingId, &held->token, sizeof(held->token), nullptr, 0, &ping);
  if (!UCS_PTR_IS_PTR(sent)) {
    if (UCS_PTR_IS_ERR(sent)) Connected(held->token);  // the endpoint failed already
    delete held;
  }
  std::shared_ptr<Endpoint> theirs;
  {
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = endpoints_.emplace(peer, endpoint);
    if (inserted) return endpoint;
    theirs = it->second;  // another thread connected meanwhile: use its endpoint
  }
  CloseEndpoint(endpoint, absl::Now());
  return theirs;
}

void UcxWorker::CloseEndpoint(const std::shared_ptr<Endpoint>& endpoint, absl::Time /*deadline*/) {
  {
    absl::MutexLock lock(&mu_);
    auto it = endpoints_.find(endpoint->peer);
    if (it != endpoints_.end() && it->second == endpoint) endpoints_.erase(it);
    // Still connecting: the peer may hold its wire-up reply for this endpoint, and
    // closing it now would leave the reply queued until this worker is gone. Close it
    // once the handshake ends (no get rides on it: gets wait for it, AwaitConnected).
    if (connecting_.contains(endpoint->token)) {
      endpoint->close_when_connected = true;
      return;
    }
  }
  ForceClose(endpoint);
}

void UcxWorker::ForceClose(const std::shared_ptr<Endpoint>& endpoint) {
  // Forcible: outstanding gets end with an error at once. The progress thread completes
  // the close; the request frees itself, the endpoint state lives until then.
  ucp_request_param_t param{};
  param.op_attr_mask =
      UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  param.cb.send = [](void* request, ucs_status_t, void* user_data) {
    auto* held = static_cast<Closing*>(user_data);
    held->worker->closing_.fetch_sub(1);
    delete held;
    ucp_request_free(request);
  };
  auto* held = new Closing{this, endpoint};
  param.user_data = held;
  closing_.fetch_add(1);
  void* request = ucp_ep_close_nbx(endpoint->ep, &param);
  if (!UCS_PTR_IS_PTR(request)) {  // closed at once (or failed: nothing pends)
    closing_.fetch_sub(1);
    delete held;
  }
  ucp_worker_signal(Worker(worker_));
}

absl::StatusOr<std::shared_ptr<UcxWorker::RemoteKey>> UcxWorker::RemoteKeyFor(
    Endpoint& endpoint, const std::string& framed) {
  absl::MutexLock lock(&endpoint.mu);
  if (auto it = endpoint.rkeys.find(framed); it != endpoint.rkeys.end()) return it->second;
  absl::StatusOr<absl::string_view> bytes = Unframe('K', framed);
  if (!bytes.ok()) return bytes.status();
  if (bytes->size() <= kRegionPrefix) {
    return absl::InvalidArgumentError(
        absl::StrCat("the context rank's UCX remote key is malformed: ", bytes->size(), " bytes"));
  }
  auto key = std::make_shared<RemoteKey>();
  key->base = absl::little_endian::Load64(bytes->data());
  key->length = absl::little_endian::Load64(bytes->data() + 8);
  const absl::string_view packed = bytes->substr(kRegionPrefix);
  ucp_rkey_h unpacked = nullptr;
  if (ucs_status_t s = ucp_ep_rkey_unpack(endpoint.ep, packed.data(), &unpacked); s != UCS_OK) {
    return UcxError("unpacking the context rank's UCX remote key", s);
  }
  key->rkey = unpacked;
  if (endpoint.rkeys.size() >= kMaxCachedRkeys) endpoint.rkeys.erase(endpoint.rkeys.begin());
  endpoint.rkeys.emplace(framed, key);
  return key;
}

absl::StatusOr<UcxWorker::Mapped> UcxWorker::MapRemote(const std::string& peer,
                                                       const std::string& rkey,
                                                       uint64_t remote_address, size_t size) {
  if (hooks_.no_mapping) return absl::UnimplementedError("mapping peer memory is turned off");
  if (peer.empty()) return absl::UnavailableError("the context rank sent no UCX worker address");
  absl::StatusOr<std::shared_ptr<Endpoint>> endpoint = EndpointTo(peer);
  if (!endpoint.ok()) return endpoint.status();
  absl::StatusOr<std::shared_ptr<RemoteKey>> key = RemoteKeyFor(**endpoint, rkey);
  if (!key.ok()) return key.status();
  if (absl::Status covered = (*key)->Covers(remote_address, size); !covered.ok()) return covered;
  if (hooks_.before_get) hooks_.before_get();
  const auto rkey_h = static_cast<ucp_rkey_h>((*key)->rkey);
  void* first = nullptr;
  const ucs_status_t mapped = ucp_rkey_ptr(rkey_h, remote_address, &first);
  if (mapped == UCS_ERR_UNREACHABLE) {
    return absl::UnimplementedError("no UCX transport maps the context rank's memory");
  }
  if (mapped != UCS_OK) return UcxError("mapping the context rank's UCX region", mapped);
  return Mapped{static_cast<const std::byte*>(first), std::move(*key)};
}

int UcxWorker::endpoints() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(endpoints_.size());
}

}  // namespace lockstep::transfer
