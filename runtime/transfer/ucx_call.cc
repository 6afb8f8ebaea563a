// UcxWorker's calls: a request and its answer as active messages (UcxWorker::Call,
// ServeCalls), for the UCX data plane's session Offers and Releases
// (docs/transfer-ucx.md); a handler may answer before it returns (CallReply).
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/internal/endian.h"
#include "absl/strings/str_cat.h"
#include "runtime/transfer/ucx_worker.h"
#include "runtime/transfer/ucx_worker_internal.h"

namespace lockstep::transfer {

using ucx_internal::AwaitDone;
using ucx_internal::kAnswerHeader;
using ucx_internal::kAnswerId;
using ucx_internal::kCallHeader;
using ucx_internal::kCallId;
using ucx_internal::UcxError;

namespace {

// An active message in flight: its header and data live until UCX has sent them.
struct Outgoing {
  char header[kAnswerHeader] = {};
  std::string body;
};

// Sends `message` (taken over) as active message `id` on `ep` with `header_length` bytes
// of its header, eagerly; UCX's error where it fails at once.
ucs_status_t SendEager(ucp_ep_h ep, unsigned id, Outgoing* message, size_t header_length,
                       unsigned flags) {
  ucp_request_param_t param{};
  param.op_attr_mask =
      UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.flags = flags | UCP_AM_SEND_FLAG_EAGER;
  param.cb.send = [](void* request, ucs_status_t, void* user_data) {
    delete static_cast<Outgoing*>(user_data);
    ucp_request_free(request);
  };
  param.user_data = message;
  void* request = ucp_am_send_nbx(ep, id, message->header, header_length, message->body.data(),
                                  message->body.size(), &param);
  if (UCS_PTR_IS_PTR(request)) return UCS_OK;
  delete message;  // sent at once, or failed: no callback follows
  return UCS_PTR_STATUS(request);
}

}  // namespace

namespace ucx_internal {

ucs_status_t CallHandlers::OnCall(void* arg, const void* header, size_t header_length, void* data,
                                  size_t length, const ucp_am_recv_param_t* param) {
  const bool here = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) == 0;
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) != 0) {
    static_cast<UcxWorker*>(arg)->AnswerCall(param->reply_ep, header, header_length,
                                             here ? data : nullptr, here ? length : 0);
  }
  return UCS_OK;
}

ucs_status_t CallHandlers::OnAnswer(void* arg, const void* header, size_t header_length, void* data,
                                    size_t length, const ucp_am_recv_param_t* param) {
  const bool here = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) == 0;
  static_cast<UcxWorker*>(arg)->CompleteCall(header, header_length, here ? data : nullptr,
                                             here ? length : 0);
  return UCS_OK;
}

}  // namespace ucx_internal

void UcxWorker::CallReply::Answer(std::string answer) {
  if (answered_) return;
  answered_ = true;
  send_(std::move(answer));
}

void UcxWorker::ServeCalls(CallHandler handler) {
  if (handler == nullptr) {
    ServeCallsWithReply(nullptr);
    return;
  }
  ServeCallsWithReply([handler = std::move(handler)](absl::string_view request, CallReply&) {
    return handler(request);
  });
}

void UcxWorker::ServeCallsWithReply(ReplyingCallHandler handler) {
  absl::MutexLock lock(&call_handler_mu_);
  call_handler_ = std::move(handler);
}

void UcxWorker::AnswerCall(void* reply_ep, const void* header, size_t header_length,
                           const void* data, size_t length) {
  if (header_length != kCallHeader) return;  // not our call: nothing to answer
  // Sends the answer, served by a handler or not; a failed send leaves the caller to
  // its deadline or its endpoint's error.
  const auto send = [&](bool served, std::string body) {
    auto* answer = new Outgoing;
    std::memcpy(answer->header, header, kCallHeader);
    answer->header[kCallHeader] = served ? 1 : 0;
    answer->body = std::move(body);
    (void)SendEager(static_cast<ucp_ep_h>(reply_ep), kAnswerId, answer, kAnswerHeader, 0);
  };
  absl::ReaderMutexLock lock(&call_handler_mu_);
  if (!call_handler_) {
    send(false, "");
    return;
  }
  CallReply reply([&send](std::string body) { send(true, std::move(body)); });
  std::string body = call_handler_({static_cast<const char*>(data), length}, reply);
  reply.Answer(std::move(body));  // nothing, where the handler answered already
}

void UcxWorker::CompleteCall(const void* header, size_t header_length, const void* data,
                             size_t length) {
  if (header_length != kAnswerHeader) return;
  const char* bytes = static_cast<const char*>(header);
  std::shared_ptr<PendingCall> call;
  {
    absl::MutexLock lock(&calls_mu_);
    auto it = calls_.find(absl::little_endian::Load64(bytes));
    if (it == calls_.end()) return;  // the call ended before its answer came
    call = std::move(it->second);
    calls_.erase(it);
  }
  absl::MutexLock lock(&call->op.mu);
  call->served = bytes[kCallHeader] == 1;
  call->answer.assign(static_cast<const char*>(data), length);
  call->op.done = true;
}

absl::StatusOr<std::string> UcxWorker::Call(const std::string& peer, absl::string_view request,
                                            absl::Time deadline,
                                            const std::function<bool()>& cancelled,
                                            const std::function<absl::Status()>& peer_check,
                                            absl::Duration slice) {
  absl::StatusOr<std::shared_ptr<Endpoint>> endpoint =
      ConnectedEndpointTo(peer, deadline, cancelled, peer_check, slice);
  if (!endpoint.ok()) return endpoint.status();
  auto call = std::make_shared<PendingCall>();
  const uint64_t id = next_call_.fetch_add(1);
  {
    absl::MutexLock lock(&calls_mu_);
    calls_.emplace(id, call);
  }
  const auto forget = [&] {
    absl::MutexLock lock(&calls_mu_);
    calls_.erase(id);
  };
  if (hooks_.before_get) hooks_.before_get();
  auto* sending = new Outgoing;
  absl::little_endian::Store64(sending->header, id);
  sending->body.assign(request.data(), request.size());
  if (ucs_status_t sent =
          SendEager((*endpoint)->ep, kCallId, sending, kCallHeader, UCP_AM_SEND_FLAG_REPLY);
      sent != UCS_OK) {
    forget();
    CloseEndpoint(*endpoint, deadline);
    return UcxError("sending a UCX call to the context rank", sent);
  }
  absl::Status outcome;
  {
    PendingCall& pending = *call;
    Operation& op = pending.op;
    absl::MutexLock lock(&pending.op.mu);
    const auto failed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(pending.op.mu) -> absl::Status {
      if (pending.op.done || !(*endpoint)->failed) return absl::OkStatus();
      return UcxError("the UCX call to the context rank failed (endpoint error)",
                      static_cast<ucs_status_t>((*endpoint)->error.load()));
    };
    // The answer lands on this thread where it progresses the worker (ProgressFor).
    const auto progress = [this, &op](absl::Time until) { ProgressFor(op, until); };
    outcome = AwaitDone(pending.op.mu, pending.op.done, "UCX call", request.size(), deadline, slice,
                        cancelled, failed, progress, peer_check);
    if (outcome.ok()) {
      if (!pending.served) return absl::UnimplementedError("the UCX peer serves no calls");
      return std::move(pending.answer);
    }
  }
  forget();
  // Past its deadline, with its endpoint or `peer_check` failed, the peer is taken as
  // stuck or gone: the next use connects anew. A cancelled call leaves a live peer's
  // endpoint alone.
  if (!absl::IsCancelled(outcome)) CloseEndpoint(*endpoint, deadline);
  return outcome;
}

}  // namespace lockstep::transfer
