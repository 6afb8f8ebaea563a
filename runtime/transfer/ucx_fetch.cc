// UcxWorker's reads where UCX has no native get (UcxWorker::Fetch, AnswerFetch), and
// the check that reads UCX's description of an endpoint's lanes (ucx_internal::HasNativeGet).
#include <stdio.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/internal/endian.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "runtime/transfer/ucx_worker.h"
#include "runtime/transfer/ucx_worker_internal.h"

namespace lockstep::transfer {
namespace ucx_internal {

namespace {

// What `print` writes to a FILE* (UCX's *_print_info), as a string; nullopt when no
// memory stream could be opened.
template <typename Print>
std::optional<std::string> PrintedText(Print print) {
  char* text = nullptr;
  size_t size = 0;
  FILE* stream = open_memstream(&text, &size);
  if (stream == nullptr) return std::nullopt;
  print(stream);
  fclose(stream);
  std::string info(text != nullptr ? text : "", size);
  free(text);
  return info;
}

}  // namespace

bool HasNativeGet(ucp_ep_h ep) {
  // UCX 1.13 has no query for an endpoint's lanes; ucp_ep_print_info describes them, one
  // line per lane naming its uses ("rma#0" for a lane that carries gets and puts
  // natively; "rma_bw#0" alone is a rendezvous lane, which tcp offers for puts only).
  const std::optional<std::string> info =
      PrintedText([ep](FILE* stream) { ucp_ep_print_info(ep, stream); });
  if (!info.has_value()) return true;
  bool lanes = false;
  for (absl::string_view line : absl::StrSplit(*info, '\n')) {
    if (!absl::StrContains(line, "lane[")) continue;
    lanes = true;
    if (absl::StrContains(line, " rma#")) return true;
  }
  return !lanes;  // unreadable: keep the get
}

}  // namespace ucx_internal

using ucx_internal::AwaitDone;
using ucx_internal::kFetchHeader;
using ucx_internal::kFetchId;
using ucx_internal::UcxError;
using ucx_internal::Worker;

// How long a reader progressing the worker sleeps on its event fd at most before it
// checks its read again (the progress thread may have taken the event that completed
// the read just before standing aside).
constexpr absl::Duration kReaderSleep = absl::Microseconds(200);

void UcxWorker::AnswerFetch(void* reply_ep, const void* header, size_t header_length) {
  if (header_length < kFetchHeader) return;  // not our fetch: nothing to answer
  const char* bytes = static_cast<const char*>(header);
  const uint64_t tag = absl::little_endian::Load64(bytes);
  const uint64_t address = absl::little_endian::Load64(bytes + 8);
  const uint64_t size = absl::little_endian::Load64(bytes + 16);
  const absl::string_view rkey(bytes + kFetchHeader, header_length - kFetchHeader);
  const void* from = nullptr;
  size_t send_size = 0;  // a range this worker does not serve is answered with no bytes
  {
    absl::MutexLock lock(&served_mu_);
    auto it = served_.upper_bound(address);
    if (it != served_.begin()) {
      --it;
      const uint64_t offset = address - it->first;
      if (it->second.rkey == rkey && offset <= it->second.length &&
          size <= it->second.length - offset) {
        from = reinterpret_cast<const void*>(address);
        send_size = static_cast<size_t>(size);
      }
    }
  }
  // The bytes stay valid while the send is in flight as they do for a peer's get: the
  // region lives as long as its staging chunk, and a range dropped meanwhile only
  // changes bytes that the reader's checksums then refuse.
  ucp_request_param_t send{};
  send.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK;
  send.cb.send = [](void* request, ucs_status_t, void*) { ucp_request_free(request); };
  (void)ucp_tag_send_nbx(static_cast<ucp_ep_h>(reply_ep), from, send_size, tag, &send);
}

void UcxWorker::ProgressFor(Operation& op, absl::Time until) {
  if (!TakeProgress()) {  // another reader progresses: its progress completes ours
    absl::MutexLock lock(&op.mu);
    op.mu.AwaitWithDeadline(absl::Condition(&op.done), until);
    return;
  }
  // A missed wake-up costs at most kReaderSleep.
  ProgressUntil(
      [&op] {
        absl::MutexLock lock(&op.mu);
        return op.done;
      },
      until, kReaderSleep);
  GiveProgressBack();
}

absl::Status UcxWorker::Fetch(const std::shared_ptr<Endpoint>& endpoint, const std::string& rkey,
                              uint64_t remote_address, absl::Span<std::byte> out,
                              const Pieces& pieces, std::shared_ptr<const void> keep_alive,
                              absl::Time deadline, const std::function<bool()>& cancelled,
                              const std::function<absl::Status()>& peer_check,
                              absl::Duration slice) {
  // One receive per piece, each for a fresh tag, and one request to the owner to send it.
  struct Piece {
    std::shared_ptr<Operation> op;
    void* request = nullptr;  // the posted receive, freed on return
    size_t offset = 0;
  };
  std::vector<Piece> posted;
  posted.reserve(pieces.sizes.size());
  // A request that could not be sent: its endpoint's error.
  ucs_status_t ask_failed = UCS_OK;
  const auto ask = [&](size_t i) -> absl::Status {
    const size_t offset = posted.empty() ? 0 : posted.back().offset + pieces.sizes[i - 1];
    const absl::Span<std::byte> into = out.subspan(offset, pieces.sizes[i]);
    fetches_.fetch_add(1);
    auto op = std::make_shared<Operation>();
    op->keep_alive = keep_alive;
    const uint64_t tag = next_tag_.fetch_add(1);
    ucp_request_param_t recv{};
    recv.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    recv.cb.recv = [](void* /*request*/, ucs_status_t status, const ucp_tag_recv_info_t* info,
                      void* user_data) {
      auto* held = static_cast<std::shared_ptr<Operation>*>(user_data);
      {
        absl::MutexLock lock(&(*held)->mu);
        (*held)->done = true;
        (*held)->status = status;
        if (status == UCS_OK) (*held)->received = info->length;
      }
      delete held;  // the request itself is freed by Fetch
    };
    auto* held = new std::shared_ptr<Operation>(op);
    recv.user_data = held;
    if (hooks_.before_get) hooks_.before_get();
    void* request =
        ucp_tag_recv_nbx(Worker(worker_), into.data(), into.size(), tag, ~ucp_tag_t{0}, &recv);
    if (!UCS_PTR_IS_PTR(request)) {  // a fresh tag cannot match at once: failed
      delete held;
      return UcxError("posting a UCX receive", UCS_PTR_STATUS(request));
    }
    posted.push_back({std::move(op), request, offset});
    // The request: tag, address, length, then the key (freed once sent).
    auto* asking = new std::string(kFetchHeader, '\0');
    absl::little_endian::Store64(asking->data(), tag);
    absl::little_endian::Store64(asking->data() + 8, remote_address + offset);
    absl::little_endian::Store64(asking->data() + 16, into.size());
    asking->append(rkey);
    ucp_request_param_t param{};
    param.op_attr_mask =
        UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.flags = UCP_AM_SEND_FLAG_REPLY;
    param.cb.send = [](void* sent, ucs_status_t, void* user_data) {
      delete static_cast<std::string*>(user_data);
      ucp_request_free(sent);
    };
    param.user_data = asking;
    void* asked =
        ucp_am_send_nbx(endpoint->ep, kFetchId, asking->data(), asking->size(), nullptr, 0, &param);
    if (!UCS_PTR_IS_PTR(asked)) delete asking;  // sent at once, or failed
    if (UCS_PTR_IS_ERR(asked) && ask_failed == UCS_OK) ask_failed = UCS_PTR_STATUS(asked);
    return absl::OkStatus();
  };
  // Waits for piece `i` (posted): OK once its bytes are all there.
  const auto await = [&](size_t i, const std::function<bool()>& give_up) -> absl::Status {
    Operation& op = *posted[i].op;
    absl::MutexLock lock(&op.mu);
    // A posted receive is not tied to the endpoint: its failure is checked here.
    const auto failed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(op.mu) -> absl::Status {
      if (op.done || (!endpoint->failed && ask_failed == UCS_OK)) return absl::OkStatus();
      const ucs_status_t error =
          ask_failed != UCS_OK ? ask_failed : static_cast<ucs_status_t>(endpoint->error.load());
      return UcxError("the UCX read from the context rank failed (endpoint error)", error);
    };
    // Progressed on this thread (ProgressFor): the bytes land and complete the receive
    // here, without the progress thread's wake-up of this one (docs/perf/ucx.md).
    const auto progress = [this, &op](absl::Time until) { ProgressFor(op, until); };
    absl::Status outcome = AwaitDone(op.mu, op.done, "UCX read", pieces.sizes[i], deadline, slice,
                                     give_up, failed, progress, peer_check);
    if (!outcome.ok()) return outcome;
    if (op.status != UCS_OK)
      return UcxError("the UCX read from the context rank failed", op.status);
    if (op.received != pieces.sizes[i]) {
      return absl::OutOfRangeError(absl::StrCat("the context rank serves no UCX range of ",
                                                pieces.sizes[i], " bytes under this key (it sent ",
                                                op.received, ")"));
    }
    return absl::OkStatus();
  };

  const size_t count = pieces.sizes.size();
  absl::Status outcome;
  bool handed_error = false;  // `outcome` is what pieces.done returned
  for (size_t i = 0; i < count && outcome.ok(); ++i) {
    // Keep `in_flight` pieces asked for, this one included.
    while (outcome.ok() && posted.size() < count &&
           posted.size() < i + static_cast<size_t>(pieces.in_flight)) {
      outcome = ask(posted.size());
    }
    if (outcome.ok()) outcome = await(i, cancelled);
    if (outcome.ok() && pieces.done) {
      outcome = pieces.done(i, out.subspan(posted[i].offset, pieces.sizes[i]));
      // A cancel seen there is a cancel: the pieces on the wire are left to land.
      handed_error = !outcome.ok() && !absl::IsCancelled(outcome);
    }
  }
  // After the caller's error the owner is live and the pieces asked for are on their way:
  // they land (unread) before this returns, rather than waiting in this worker's
  // unexpected queue for a receive that was cancelled (a cancel meanwhile leaves them to
  // land later, as a cancelled read does).
  if (handed_error) {
    for (size_t i = 0; i < posted.size(); ++i) {
      const absl::Status landed = await(i, cancelled);
      if (absl::IsCancelled(landed)) break;
      if (!landed.ok()) {
        outcome = absl::Status(
            outcome.code(),
            absl::StrCat(outcome.message(), " (and the UCX pieces still in flight did not land)"));
        handed_error = false;  // cancelled and closed below
        break;
      }
    }
  }
  // A cancelled read from a live peer is left to complete, as a cancelled get is (its
  // buffer held until then): the peer's sends then meet their receives instead of
  // waiting in this worker's unexpected queue. Otherwise an unmatched receive ends now
  // (its callback releases `keep_alive`) and one already matched ends with the
  // endpoint's close.
  if (!outcome.ok() && !absl::IsCancelled(outcome) && !handed_error) {
    for (Piece& piece : posted) ucp_request_cancel(Worker(worker_), piece.request);
    if (!absl::IsOutOfRange(outcome)) CloseEndpoint(endpoint, deadline);
  }
  for (Piece& piece : posted) ucp_request_free(piece.request);
  return outcome;
}

}  // namespace lockstep::transfer
