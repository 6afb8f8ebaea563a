#include "runtime/transfer/ucx_worker.h"

#include <poll.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "ucp/api/ucp.h"

namespace lockstep::transfer {
namespace {

// How long the progress thread sleeps on the event fd before rechecking its stop flag
// (Stop also wakes it at once through ucp_worker_signal).
constexpr int kIdlePollMs = 200;

absl::Status UcxError(absl::string_view what, ucs_status_t status) {
  return absl::UnavailableError(absl::StrCat(what, ": ", ucs_status_string(status)));
}

ucp_context_h Context(void* p) { return static_cast<ucp_context_h>(p); }
ucp_worker_h Worker(void* p) { return static_cast<ucp_worker_h>(p); }

}  // namespace

// A connection to one peer worker. `failed` is set by UCX's error callback (on the
// progress thread); a failed endpoint is replaced on the next use.
struct UcxWorker::Endpoint {
  ucp_ep_h ep = nullptr;
  std::string peer;
  std::atomic<bool> failed{false};
  std::atomic<int> error{UCS_OK};
};

// One get in flight: completed by UCX's callback on the progress thread.
struct UcxWorker::Operation {
  absl::Mutex mu;
  bool done ABSL_GUARDED_BY(mu) = false;
  ucs_status_t status ABSL_GUARDED_BY(mu) = UCS_OK;
  ucp_rkey_h rkey = nullptr;
  std::shared_ptr<const void> keep_alive;  // the destination, until UCX lets go
};

UcxRegion::UcxRegion(std::shared_ptr<UcxWorker> worker, void* memh, const void* data, size_t size,
                     std::string rkey)
    : worker_(std::move(worker)), memh_(memh), data_(data), size_(size), rkey_(std::move(rkey)) {}

UcxRegion::~UcxRegion() {
  ucp_mem_unmap(Context(worker_->context_), static_cast<ucp_mem_h>(memh_));
}

UcxWorker::UcxWorker(std::string name, UcxWorkerHooks hooks)
    : name_(std::move(name)), hooks_(std::move(hooks)) {}

absl::StatusOr<std::shared_ptr<UcxWorker>> UcxWorker::Create(std::string name,
                                                             UcxWorkerHooks hooks) {
  std::shared_ptr<UcxWorker> w(new UcxWorker(std::move(name), std::move(hooks)));
  ucp_config_t* config = nullptr;
  if (ucs_status_t s = ucp_config_read(nullptr, nullptr, &config); s != UCS_OK) {
    return UcxError("UCX configuration (UCX_* variables)", s);
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 1;
  ucp_context_h context = nullptr;
  const ucs_status_t init = ucp_init(&params, config, &context);
  ucp_config_release(config);
  if (init != UCS_OK) return UcxError("UCX context", init);
  w->context_ = context;
  ucp_worker_params_t worker_params{};
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  worker_params.thread_mode = UCS_THREAD_MODE_MULTI;
  ucp_worker_h worker = nullptr;
  if (ucs_status_t s = ucp_worker_create(context, &worker_params, &worker); s != UCS_OK) {
    return UcxError("UCX worker", s);
  }
  w->worker_ = worker;
  if (ucs_status_t s = ucp_worker_get_efd(worker, &w->event_fd_); s != UCS_OK) {
    return UcxError("UCX worker event fd", s);
  }
  ucp_address_t* address = nullptr;
  size_t length = 0;
  if (ucs_status_t s = ucp_worker_get_address(worker, &address, &length); s != UCS_OK) {
    return UcxError("UCX worker address", s);
  }
  w->address_.assign(reinterpret_cast<const char*>(address), length);
  ucp_worker_release_address(worker, address);
  UcxWorker* self = w.get();
  w->progress_thread_ = std::thread([self] { self->ProgressLoop(); });
  return w;
}

UcxWorker::~UcxWorker() {
  stopping_ = true;
  if (progress_thread_.joinable()) {
    ucp_worker_signal(Worker(worker_));
    progress_thread_.join();
  }
  if (worker_ != nullptr) {
    // Close what is left, forcibly, progressing here (the thread is gone) for at most 1s.
    absl::flat_hash_map<std::string, std::shared_ptr<Endpoint>> endpoints;
    {
      absl::MutexLock lock(&mu_);
      endpoints.swap(endpoints_);
    }
    const absl::Time deadline = absl::Now() + absl::Seconds(1);
    for (auto& [peer, endpoint] : endpoints) {
      ucp_request_param_t param{};
      param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      param.flags = UCP_EP_CLOSE_FLAG_FORCE;
      void* request = ucp_ep_close_nbx(endpoint->ep, &param);
      if (UCS_PTR_IS_PTR(request)) {
        while (ucp_request_check_status(request) == UCS_INPROGRESS && absl::Now() < deadline) {
          ucp_worker_progress(Worker(worker_));
        }
        ucp_request_free(request);
      }
    }
    while (ucp_worker_progress(Worker(worker_)) != 0 && absl::Now() < deadline) {
    }
    ucp_worker_destroy(Worker(worker_));
  }
  if (context_ != nullptr) ucp_cleanup(Context(context_));
}

void UcxWorker::ProgressLoop() {
  while (!stopping_) {
    if (hooks_.hold_progress && hooks_.hold_progress()) {
      pollfd none{-1, 0, 0};
      poll(&none, 0, 5);  // test-only: held, recheck soon
      continue;
    }
    if (ucp_worker_progress(Worker(worker_)) != 0) continue;
    const ucs_status_t armed = ucp_worker_arm(Worker(worker_));
    if (armed == UCS_ERR_BUSY) continue;  // events arrived meanwhile
    if (armed != UCS_OK) {
      LOCKSTEP_LOG_WARN("transfer", "{}: UCX worker arm failed: {}", name_,
                        ucs_status_string(armed));
    }
    pollfd fd{event_fd_, POLLIN, 0};
    poll(&fd, 1, kIdlePollMs);
  }
}

absl::StatusOr<std::unique_ptr<UcxRegion>> UcxWorker::Register(absl::Span<const std::byte> data) {
  return Map(const_cast<std::byte*>(data.data()), data.size(), /*allocate=*/false);
}

absl::StatusOr<std::unique_ptr<UcxRegion>> UcxWorker::Allocate(size_t size) {
  return Map(nullptr, size, /*allocate=*/true);
}

absl::StatusOr<std::unique_ptr<UcxRegion>> UcxWorker::Map(void* data, size_t size, bool allocate) {
  if (hooks_.fail_registration) {
    if (absl::Status s = hooks_.fail_registration(); !s.ok()) return s;
  }
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  params.address = data;
  params.length = std::max<size_t>(size, 1);
  params.flags = allocate ? UCP_MEM_MAP_ALLOCATE : 0;
  ucp_mem_h memh = nullptr;
  if (ucs_status_t s = ucp_mem_map(Context(context_), &params, &memh); s != UCS_OK) {
    return UcxError(absl::StrCat(allocate ? "allocating " : "registering ", size,
                                 " bytes with UCX"),
                    s);
  }
  if (allocate) {
    ucp_mem_attr_t attr{};
    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
    if (ucs_status_t s = ucp_mem_query(memh, &attr); s != UCS_OK) {
      ucp_mem_unmap(Context(context_), memh);
      return UcxError("querying UCX-allocated memory", s);
    }
    data = attr.address;
  }
  void* packed = nullptr;
  size_t packed_size = 0;
  if (ucs_status_t s = ucp_rkey_pack(Context(context_), memh, &packed, &packed_size); s != UCS_OK) {
    ucp_mem_unmap(Context(context_), memh);
    return UcxError("packing a UCX remote key", s);
  }
  std::string rkey(static_cast<const char*>(packed), packed_size);
  ucp_rkey_buffer_release(packed);
  return std::unique_ptr<UcxRegion>(
      new UcxRegion(shared_from_this(), memh, data, size, std::move(rkey)));
}

void UcxWorker::OnEndpointError(void* arg, void* /*ep*/, int status) {
  auto* endpoint = static_cast<Endpoint*>(arg);
  endpoint->error = status;
  endpoint->failed = true;
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
  auto endpoint = std::make_shared<Endpoint>();
  endpoint->peer = peer;
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(peer.data());
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
  }
  // Forcible: outstanding gets end with an error at once. The progress thread completes
  // the close; the request frees itself, the endpoint state lives until then.
  ucp_request_param_t param{};
  param.op_attr_mask =
      UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  param.cb.send = [](void* request, ucs_status_t, void* user_data) {
    delete static_cast<std::shared_ptr<Endpoint>*>(user_data);
    ucp_request_free(request);
  };
  auto* hold = new std::shared_ptr<Endpoint>(endpoint);
  param.user_data = hold;
  void* request = ucp_ep_close_nbx(endpoint->ep, &param);
  if (!UCS_PTR_IS_PTR(request)) delete hold;  // closed at once (or failed: nothing pends)
  ucp_worker_signal(Worker(worker_));
}

int UcxWorker::endpoints() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(endpoints_.size());
}

absl::Status UcxWorker::Get(const std::string& peer, const std::string& rkey,
                            uint64_t remote_address, absl::Span<std::byte> out,
                            std::shared_ptr<const void> keep_alive, absl::Time deadline,
                            const std::function<bool()>& cancelled, absl::Duration slice) {
  if (peer.empty()) return absl::UnavailableError("the context rank sent no UCX worker address");
  absl::StatusOr<std::shared_ptr<Endpoint>> endpoint = EndpointTo(peer);
  if (!endpoint.ok()) return endpoint.status();
  auto op = std::make_shared<Operation>();
  op->keep_alive = std::move(keep_alive);
  if (ucs_status_t s = ucp_ep_rkey_unpack((*endpoint)->ep, rkey.data(), &op->rkey); s != UCS_OK) {
    return UcxError("unpacking the context rank's UCX remote key", s);
  }
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = [](void* request, ucs_status_t status, void* user_data) {
    auto* held = static_cast<std::shared_ptr<Operation>*>(user_data);
    {
      absl::MutexLock lock(&(*held)->mu);
      (*held)->done = true;
      (*held)->status = status;
    }
    ucp_rkey_destroy((*held)->rkey);
    delete held;
    ucp_request_free(request);
  };
  auto* held = new std::shared_ptr<Operation>(op);
  param.user_data = held;
  if (hooks_.before_get) hooks_.before_get();
  void* request =
      ucp_get_nbx((*endpoint)->ep, out.data(), out.size(), remote_address, op->rkey, &param);
  if (!UCS_PTR_IS_PTR(request)) {  // done at once, or failed: no callback follows
    delete held;
    ucp_rkey_destroy(op->rkey);
    const ucs_status_t status = UCS_PTR_STATUS(request);
    if (status != UCS_OK) {
      CloseEndpoint(*endpoint, deadline);
      return UcxError("UCX get from the context rank", status);
    }
    return absl::OkStatus();
  }
  ucp_worker_signal(Worker(worker_));
  absl::Status outcome;
  {
    absl::MutexLock lock(&op->mu);
    const auto done = [&op]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(op->mu) { return op->done; };
    for (;;) {
      const absl::Time now = absl::Now();
      if (now >= deadline) {
        outcome = absl::DeadlineExceededError(
            absl::StrCat("the UCX get of ", out.size(), " bytes did not complete by its deadline"));
        break;
      }
      if (op->mu.AwaitWithDeadline(absl::Condition(&done), std::min(deadline, now + slice))) break;
      if (cancelled && cancelled()) {
        outcome = absl::CancelledError("the UCX get was cancelled");
        break;
      }
    }
    if (outcome.ok()) {
      if (op->status == UCS_OK) return absl::OkStatus();
      const int error = (*endpoint)->error;
      outcome = absl::UnavailableError(absl::StrCat(
          "the UCX get from the context rank failed: ", ucs_status_string(op->status),
          (*endpoint)->failed
              ? absl::StrCat(
                    " (endpoint error: ", ucs_status_string(static_cast<ucs_status_t>(error)), ")")
              : ""));
    }
  }
  // The get may still be pending. Past its deadline the peer is taken as stuck or gone:
  // closing the endpoint forcibly ends every get on it (their callbacks release
  // `keep_alive`), and the next get connects anew. A cancelled get to a live peer is
  // left to complete (its buffer held until then) so that other receives from the same
  // peer are not failed with it.
  if (!absl::IsCancelled(outcome)) CloseEndpoint(*endpoint, deadline);
  return outcome;
}

}  // namespace lockstep::transfer
