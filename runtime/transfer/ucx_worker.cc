#include "runtime/transfer/ucx_worker.h"

#include <poll.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/base/internal/endian.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "runtime/transfer/ucx_worker_internal.h"
#include "ucp/api/ucp.h"

namespace lockstep::transfer {
namespace {

using ucx_internal::AwaitDone;
using ucx_internal::CallHandlers;
using ucx_internal::Context;
using ucx_internal::Frame;
using ucx_internal::kAnswerId;
using ucx_internal::kCallId;
using ucx_internal::kFetchId;
using ucx_internal::kPingId;
using ucx_internal::kPongId;
using ucx_internal::kRegionPrefix;
using ucx_internal::UcxError;
using ucx_internal::Worker;

// How long the progress thread sleeps on the event fd before rechecking its stop flag
// (Stop also wakes it at once through ucp_worker_signal).
constexpr int kIdlePollMs = 200;
// How long a stopping worker waits for its endpoints to finish connecting and close.
constexpr absl::Duration kStopTimeout = absl::Seconds(2);

// UCX's tcp receive segment, unless the environment sets one (UcxWorker::Create).
constexpr char kTcpRxSegment[] = "256k";

// A ping's handler: answers with a pong carrying the ping's token, on the endpoint the
// ping asked the answer to go back on. The pong leaves behind this worker's wire-up
// reply on that endpoint, so its arrival tells the peer that the reply is sent.
ucs_status_t AnswerPing(void* /*arg*/, const void* header, size_t header_length, void* /*data*/,
                        size_t /*length*/, const ucp_am_recv_param_t* param) {
  if (header_length != sizeof(uint64_t) ||
      (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) == 0) {
    return UCS_OK;  // not our ping: nothing to answer
  }
  auto* token = new uint64_t;
  std::memcpy(token, header, sizeof(*token));
  ucp_request_param_t send{};
  send.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  send.cb.send = [](void* request, ucs_status_t, void* user_data) {
    delete static_cast<uint64_t*>(user_data);
    ucp_request_free(request);
  };
  send.user_data = token;
  void* request =
      ucp_am_send_nbx(param->reply_ep, kPongId, token, sizeof(*token), nullptr, 0, &send);
  if (!UCS_PTR_IS_PTR(request)) delete token;  // sent at once, or failed
  return UCS_OK;
}

}  // namespace

UcxRegion::UcxRegion(std::shared_ptr<UcxWorker> worker, void* memh, const void* data, size_t size,
                     std::string rkey)
    : worker_(std::move(worker)), memh_(memh), data_(data), size_(size), rkey_(std::move(rkey)) {}

UcxRegion::~UcxRegion() {
  {
    absl::MutexLock lock(&worker_->served_mu_);
    worker_->served_.erase(reinterpret_cast<uint64_t>(data_));
  }
  ucp_mem_unmap(Context(worker_->context_), static_cast<ucp_mem_h>(memh_));
}

bool UcxTlsMayUseTcp(const char* ucx_tls) {
  if (ucx_tls == nullptr || *ucx_tls == '\0') return true;
  absl::string_view list(ucx_tls);
  const bool exclude = absl::ConsumePrefix(&list, "^");
  bool names_tcp = false;
  for (absl::string_view entry : absl::StrSplit(list, ',')) {
    entry = entry.substr(0, entry.find(':'));
    if (entry == "tcp") names_tcp = true;
    if (entry == "all" && !exclude) return true;
  }
  return exclude ? !names_tcp : names_tcp;
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
  // UCX's tcp transport receives into segments of 64 KiB by default, one system call and
  // one copy into the destination per segment; 256 KiB halves the system calls of a pull
  // and measured faster on loopback (docs/perf/ucx.md, 2026-12-06 fifth round). A
  // UCX_TCP_RX_SEG_SIZE set by the user wins. The name is the tcp transport's own field
  // (UCX applies it to each transport that has one: only tcp does); "TCP_RX_SEG_SIZE"
  // is accepted too, but reaches no transport. Not set where UCX_TLS leaves tcp out (UCX
  // would warn of an invalid setting).
  if (std::getenv("UCX_TCP_RX_SEG_SIZE") == nullptr && UcxTlsMayUseTcp(std::getenv("UCX_TLS"))) {
    (void)ucp_config_modify(config, "RX_SEG_SIZE", kTcpRxSegment);
  }
  // The worker is entered by its progress thread and by receive threads; UCX guards it
  // with a spinlock by default, which a thread spins on while the holder waits for a
  // core (14% of a tcp pull's samples on a 2-core VM): a mutex sleeps instead
  // (docs/perf/ucx.md, tenth round). Where tcp may carry pulls; UCX_USE_MT_MUTEX set by
  // the user wins.
  if (std::getenv("UCX_USE_MT_MUTEX") == nullptr && UcxTlsMayUseTcp(std::getenv("UCX_TLS"))) {
    (void)ucp_config_modify(config, "USE_MT_MUTEX", "y");
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_RMA | UCP_FEATURE_AM | UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
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
  // A pong's handler: the handshake of the endpoint its token names is complete.
  constexpr ucp_am_recv_callback_t OnPong = [](void* arg, const void* header,
                                               size_t header_length, void* /*data*/,
                                               size_t /*length*/,
                                               const ucp_am_recv_param_t* /*param*/) {
    if (header_length == sizeof(uint64_t)) {
      uint64_t token = 0;
      std::memcpy(&token, header, sizeof(token));
      static_cast<UcxWorker*>(arg)->Connected(token);
    }
    return UCS_OK;
  };
  // A fetch's handler (UcxWorker::AnswerFetch).
  constexpr ucp_am_recv_callback_t OnFetch = [](void* arg, const void* header, size_t header_length,
                                                void* /*data*/, size_t /*length*/,
                                                const ucp_am_recv_param_t* param) {
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) != 0) {
      static_cast<UcxWorker*>(arg)->AnswerFetch(param->reply_ep, header, header_length);
    }
    return UCS_OK;
  };
  const std::pair<unsigned, ucp_am_recv_callback_t> handlers[] = {
      {kPingId, &AnswerPing},
      {kPongId, OnPong},
      {kFetchId, OnFetch},
      {kCallId, &CallHandlers::OnCall},
      {kAnswerId, &CallHandlers::OnAnswer}};
  for (const auto& [id, callback] : handlers) {
    ucp_am_handler_param_t handler{};
    handler.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                         UCP_AM_HANDLER_PARAM_FIELD_ARG;
    handler.id = id;
    handler.cb = callback;
    handler.arg = w.get();
    if (ucs_status_t s = ucp_worker_set_am_recv_handler(worker, &handler); s != UCS_OK) {
      return UcxError("UCX active message handler", s);
    }
  }
  if (ucs_status_t s = ucp_worker_get_efd(worker, &w->event_fd_); s != UCS_OK) {
    return UcxError("UCX worker event fd", s);
  }
  ucp_address_t* address = nullptr;
  size_t length = 0;
  if (ucs_status_t s = ucp_worker_get_address(worker, &address, &length); s != UCS_OK) {
    return UcxError("UCX worker address", s);
  }
  w->address_ = Frame('A', {reinterpret_cast<const char*>(address), length});
  ucp_worker_release_address(worker, address);
  UcxWorker* self = w.get();
  w->progress_thread_ = std::thread([self] { self->ProgressLoop(); });
  return w;
}

UcxWorker::~UcxWorker() {
  stopping_ = true;
  { absl::MutexLock lock(&progress_mu_); }  // a progress thread standing aside sees it
  if (progress_thread_.joinable()) {
    ucp_worker_signal(Worker(worker_));
    progress_thread_.join();
  }
  if (worker_ != nullptr) {
    Quiesce(absl::Now() + kStopTimeout);
    ucp_worker_destroy(Worker(worker_));
  }
  if (context_ != nullptr) ucp_cleanup(Context(context_));
}

bool UcxWorker::TakeProgress() {
  absl::MutexLock lock(&progress_mu_);
  if (reader_progressing_) return false;
  reader_progressing_ = true;
  return true;
}

void UcxWorker::GiveProgressBack() {
  {
    absl::MutexLock lock(&progress_mu_);
    reader_progressing_ = false;
  }
  // Events the reader left (its own arm may have drained the event fd) go to the
  // progress thread now.
  ucp_worker_signal(Worker(worker_));
}

bool UcxWorker::ProgressUntil(const std::function<bool()>& done, absl::Time deadline,
                              absl::Duration max_sleep) {
  for (;;) {
    if (done()) return true;
    if (ucp_worker_progress(Worker(worker_)) != 0) continue;
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return done();
    const ucs_status_t armed = ucp_worker_arm(Worker(worker_));
    if (armed == UCS_ERR_BUSY) continue;  // events arrived meanwhile
    // Wakes on the next event; rechecks `done` at least every `max_sleep`.
    pollfd fd{event_fd_, POLLIN, 0};
    const timespec sleep = absl::ToTimespec(std::min(left, max_sleep));
    ppoll(&fd, 1, &sleep, nullptr);
  }
}

void UcxWorker::Quiesce(absl::Time deadline) {
  // UCX 1.13 aborts the process (an assertion in ucp_request.c) when an endpoint fails
  // or is destroyed while its wire-up reply is still queued, which is what the peer of
  // an endpoint still connecting meets when this worker goes. So: first the handshakes
  // still unanswered (the peer's reply has then left), then a worker flush (the
  // replies this worker still owes its peers leave), then the closes.
  const auto wait = [&](void* request, absl::Time by) {
    if (!UCS_PTR_IS_PTR(request)) return UCS_PTR_IS_ERR(request) ? UCS_PTR_STATUS(request) : UCS_OK;
    const bool done = ProgressUntil(
        [request] { return ucp_request_check_status(request) != UCS_INPROGRESS; }, by);
    const ucs_status_t status = done ? ucp_request_check_status(request) : UCS_ERR_TIMED_OUT;
    ucp_request_free(request);  // an unfinished one is released when UCX ends it
    return status;
  };
  // An endpoint whose handshake is unanswered may have the peer's wire-up reply still
  // queued at the peer: wait for the pong (or the endpoint's failure) first.
  ProgressUntil(
      [this] {
        absl::MutexLock lock(&mu_);
        return connecting_.empty();
      },
      deadline);
  ucp_request_param_t flush{};
  if (ucs_status_t s = wait(ucp_worker_flush_nbx(Worker(worker_), &flush), deadline);
      s != UCS_OK) {
    LOCKSTEP_LOG_WARN("transfer", "{}: flushing the UCX worker before it stops: {}", name_,
                      ucs_status_string(s));
  }
  // Then close what is left, forcibly (the peers learn it from their own errors).
  absl::flat_hash_map<std::string, std::shared_ptr<Endpoint>> endpoints;
  {
    absl::MutexLock lock(&mu_);
    endpoints.swap(endpoints_);
  }
  std::vector<std::shared_ptr<Endpoint>> closes;
  {
    absl::MutexLock lock(&mu_);
    closes.swap(deferred_closes_);
    for (auto& [token, endpoint] : connecting_) {
      if (endpoint->close_when_connected) closes.push_back(endpoint);
    }
  }
  for (const std::shared_ptr<Endpoint>& endpoint : closes) ForceClose(endpoint);
  for (auto& [peer, endpoint] : endpoints) {
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    (void)wait(ucp_ep_close_nbx(endpoint->ep, &param), deadline);
  }
  // Closes begun earlier (CloseEndpoint) complete on progress.
  ProgressUntil([this] { return closing_.load() == 0; }, deadline);
  absl::flat_hash_map<uint64_t, std::shared_ptr<Endpoint>> unanswered;
  {
    absl::MutexLock lock(&mu_);
    unanswered.swap(connecting_);
  }
  unanswered.clear();
  endpoints.clear();  // their cached remote keys go before the worker
}

void UcxWorker::ProgressLoop() {
  const auto free = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_mu_) {
    return !reader_progressing_ || stopping_.load();
  };
  while (!stopping_) {
    {
      absl::MutexLock lock(&progress_mu_);
      progress_mu_.Await(absl::Condition(&free));
    }
    if (hooks_.hold_progress && hooks_.hold_progress()) {
      pollfd none{-1, 0, 0};
      poll(&none, 0, 5);  // test-only: held, recheck soon
      continue;
    }
    if (ucp_worker_progress(Worker(worker_)) != 0) {
      CloseDeferred();
      continue;
    }
    CloseDeferred();
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
  // The key's bytes: the region's address and length (little-endian), then UCX's key.
  std::string key(kRegionPrefix, '\0');
  absl::little_endian::Store64(key.data(), reinterpret_cast<uint64_t>(data));
  absl::little_endian::Store64(key.data() + 8, static_cast<uint64_t>(size));
  key.append(static_cast<const char*>(packed), packed_size);
  std::string rkey = Frame('K', key);
  ucp_rkey_buffer_release(packed);
  {
    absl::MutexLock lock(&served_mu_);
    served_[reinterpret_cast<uint64_t>(data)] = Served{static_cast<uint64_t>(size), rkey};
  }
  return std::unique_ptr<UcxRegion>(
      new UcxRegion(shared_from_this(), memh, data, size, std::move(rkey)));
}

absl::Status UcxWorker::Get(const std::string& peer, const std::string& rkey,
                            uint64_t remote_address, absl::Span<std::byte> out,
                            std::shared_ptr<const void> keep_alive, absl::Time deadline,
                            const std::function<bool()>& cancelled,
                            const std::function<absl::Status()>& peer_check, absl::Duration slice) {
  return GetInPieces(peer, rkey, remote_address, out, {.sizes = {out.size()}},
                     std::move(keep_alive), deadline, cancelled, peer_check, slice);
}

absl::Status UcxWorker::GetInPieces(const std::string& peer, const std::string& rkey,
                                    uint64_t remote_address, absl::Span<std::byte> out,
                                    const Pieces& pieces, std::shared_ptr<const void> keep_alive,
                                    absl::Time deadline, const std::function<bool()>& cancelled,
                                    const std::function<absl::Status()>& peer_check,
                                    absl::Duration slice) {
  size_t total = 0;
  for (size_t size : pieces.sizes) total += size;
  if (total != out.size() || pieces.in_flight < 1) {
    return absl::InvalidArgumentError(absl::StrCat("UCX read of ", out.size(), " bytes cut into ",
                                                   pieces.sizes.size(), " pieces of ", total,
                                                   " bytes, ", pieces.in_flight, " in flight"));
  }
  absl::StatusOr<std::shared_ptr<Endpoint>> endpoint =
      ConnectedEndpointTo(peer, deadline, cancelled, peer_check, slice);
  if (!endpoint.ok()) return endpoint.status();
  auto op = std::make_shared<Operation>();
  op->keep_alive = std::move(keep_alive);
  absl::StatusOr<std::shared_ptr<RemoteKey>> key = RemoteKeyFor(**endpoint, rkey);
  if (!key.ok()) return key.status();
  if (absl::Status covered = (*key)->Covers(remote_address, out.size()); !covered.ok()) {
    return covered;
  }
  if (!(*endpoint)->native_get) {
    return Fetch(*endpoint, rkey, remote_address, out, pieces, std::move(op->keep_alive), deadline,
                 cancelled, peer_check, slice);
  }
  // The whole read lands first; then its pieces are handed over.
  const auto hand_over = [&]() -> absl::Status {
    if (!pieces.done) return absl::OkStatus();
    size_t at = 0;
    for (size_t i = 0; i < pieces.sizes.size(); ++i) {
      absl::Status handed = pieces.done(i, out.subspan(at, pieces.sizes[i]));
      if (!handed.ok()) return handed;
      at += pieces.sizes[i];
    }
    return absl::OkStatus();
  };
  op->rkey = std::move(*key);
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = [](void* request, ucs_status_t status, void* user_data) {
    auto* held = static_cast<std::shared_ptr<Operation>*>(user_data);
    {
      absl::MutexLock lock(&(*held)->mu);
      (*held)->done = true;
      (*held)->status = status;
    }
    delete held;
    ucp_request_free(request);
  };
  auto* held = new std::shared_ptr<Operation>(op);
  param.user_data = held;
  if (hooks_.before_get) hooks_.before_get();
  void* request = ucp_get_nbx((*endpoint)->ep, out.data(), out.size(), remote_address,
                              static_cast<ucp_rkey_h>(op->rkey->rkey), &param);
  if (!UCS_PTR_IS_PTR(request)) {  // done at once, or failed: no callback follows
    delete held;
    const ucs_status_t status = UCS_PTR_STATUS(request);
    if (status != UCS_OK) {
      CloseEndpoint(*endpoint, deadline);
      return UcxError("UCX get from the context rank", status);
    }
    return hand_over();
  }
  ucp_worker_signal(Worker(worker_));
  absl::Status outcome;
  {
    absl::ReleasableMutexLock lock(&op->mu);
    outcome = AwaitDone(op->mu, op->done, "UCX get", out.size(), deadline, slice, cancelled,
                        nullptr, nullptr, peer_check);
    if (outcome.ok()) {
      if (op->status == UCS_OK) {
        lock.Release();
        return hand_over();
      }
      const int error = (*endpoint)->error;
      outcome = absl::UnavailableError(absl::StrCat(
          "the UCX get from the context rank failed: ", ucs_status_string(op->status),
          (*endpoint)->failed
              ? absl::StrCat(
                    " (endpoint error: ", ucs_status_string(static_cast<ucs_status_t>(error)), ")")
              : ""));
    }
  }
  // The get may still be pending. Past its deadline (or found gone by `peer_check`) the
  // peer is taken as stuck or gone: closing the endpoint forcibly ends every get on it
  // (their callbacks release `keep_alive`), and the next get connects anew. A cancelled
  // get to a live peer is left to complete (its buffer held until then) so that other
  // receives from the same peer are not failed with it.
  if (!absl::IsCancelled(outcome)) CloseEndpoint(*endpoint, deadline);
  return outcome;
}

namespace ucx_internal {

absl::Status AwaitDone(absl::Mutex& mu, const bool& done, absl::string_view what, size_t bytes,
                       absl::Time deadline, absl::Duration slice,
                       const std::function<bool()>& cancelled,
                       const std::function<absl::Status()>& failed,
                       const std::function<void(absl::Time)>& progress,
                       const std::function<absl::Status()>& unlocked_check) {
  const auto is_done = [&done]() { return done; };
  for (;;) {
    if (failed) {
      if (absl::Status status = failed(); !status.ok()) return status;
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("the ", what, " of ", bytes, " bytes did not complete by its deadline"));
    }
    if (progress) {
      mu.Unlock();
      progress(std::min(deadline, now + slice));
      mu.Lock();
      if (done) return absl::OkStatus();
    } else if (mu.AwaitWithDeadline(absl::Condition(&is_done), std::min(deadline, now + slice))) {
      return absl::OkStatus();
    }
    if (cancelled && cancelled()) {
      return absl::CancelledError(absl::StrCat("the ", what, " was cancelled"));
    }
    if (unlocked_check) {
      mu.Unlock();
      absl::Status checked = unlocked_check();
      mu.Lock();
      if (done) return absl::OkStatus();
      if (!checked.ok()) return checked;
    }
  }
}

}  // namespace ucx_internal

}  // namespace lockstep::transfer
