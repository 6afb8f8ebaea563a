#include "runtime/worker/generate_stream.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/worker/draft_stats.h"
#include "runtime/worker/proto_convert.h"

namespace lockstep::worker {
namespace {

class RefusedStream final : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  explicit RefusedStream(grpc::Status status) { Finish(std::move(status)); }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::ServerWriteReactor<v1::GenerateResponse>* GenerateStream::Refuse(grpc::Status status) {
  return new RefusedStream(std::move(status));
}

GenerateStream::GenerateStream(const GenerateStreamDeps& deps,
                               grpc::CallbackServerContext* context, RequestId id,
                               std::shared_ptr<ResponseQueue> queue)
    : deps_(deps), context_(context), id_(id), queue_(std::move(queue)) {}

grpc::ServerWriteReactor<v1::GenerateResponse>* GenerateStream::Start(
    const GenerateStreamDeps& deps, grpc::CallbackServerContext* context, RequestId id,
    std::shared_ptr<ResponseQueue> queue) {
  std::shared_ptr<GenerateStream> stream(
      new GenerateStream(deps, context, id, std::move(queue)));
  GenerateStream* raw = stream.get();
  raw->self_ = stream;
  raw->StartSendInitialMetadata();
  {
    absl::MutexLock lock(&raw->mu_);
    raw->deadline_ = deps.clock->Now() + deps.request_timeout;
    raw->Arm();
  }
  // Responses queued before this are delivered by SetListener itself. The listener
  // runs on the executor thread: it only queues one Pump (several pushes share it).
  std::weak_ptr<GenerateStream> weak = stream;
  raw->queue_->SetListener([weak] {
    std::shared_ptr<GenerateStream> s = weak.lock();
    if (s == nullptr || s->wake_queued_.exchange(true)) return;
    WakePool* wake = s->deps_.wake;
    wake->Run([s = std::move(s)] {
      s->wake_queued_.store(false);  // a push from now on queues another Pump
      s->Pump();
    });
  });
  return raw;
}

void GenerateStream::Pump() {
  enum class Action { kNone, kWrite, kWriteAndFinish, kFinish };
  Action action = Action::kNone;
  {
    absl::MutexLock lock(&mu_);
    if (writing_ || finishing_ || done_) return;
    while (std::optional<exec::Response> next = queue_->TryPop()) {
      v1::GenerateResponse out = ToProto(*next);
      SetRequestDrafts(deps_.executor->spec_method(), *next, &out);
      if (out.finished()) {
        finishing_ = true;
        deps_.timers->Cancel(timer_);
        // After a cancel nothing more is written; the stream still ends OK.
        if (cancel_sent_) {
          action = Action::kFinish;
        } else {
          out_ = std::move(out);
          action = Action::kWriteAndFinish;
        }
        break;
      }
      if (cancel_sent_) continue;
      out_ = std::move(out);
      writing_ = true;
      action = Action::kWrite;
      break;
    }
  }
  // gRPC is called outside the lock: its reactions may run on any thread.
  switch (action) {
    case Action::kNone:
      return;
    case Action::kWrite:
      StartWrite(&out_);
      return;
    case Action::kWriteAndFinish:
      deps_.streams->Close(id_);
      StartWriteAndFinish(&out_, grpc::WriteOptions(), grpc::Status::OK);
      return;
    case Action::kFinish:
      deps_.streams->Close(id_);
      Finish(grpc::Status::OK);
      return;
  }
}

void GenerateStream::OnWriteDone(bool ok) {
  std::optional<grpc::Status> finish;
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) CancelRequest();  // the client left (or stopped reading and was cut off)
    if (pending_finish_.has_value()) {
      finish = std::move(pending_finish_);
      pending_finish_.reset();
    }
  }
  if (finish.has_value()) {
    Finish(*std::move(finish));
    return;
  }
  Pump();
}

void GenerateStream::OnCancel() {
  absl::MutexLock lock(&mu_);
  client_cancelled_ = true;
  CancelRequest();
}

void GenerateStream::OnTimer() {
  std::optional<grpc::Status> finish;
  bool cut = false;
  {
    absl::MutexLock lock(&mu_);
    if (finishing_ || done_) return;
    const absl::Time now = deps_.clock->Now();
    if (!cancel_sent_ && now >= deadline_) {
      CancelRequest();
    } else if (cancel_sent_ && now >= cancel_deadline_) {
      finishing_ = true;  // from here no write starts
      finish = client_cancelled_
                   ? grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client")
                   : grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                  absl::StrCat("request ", id_.value(), " did not finish within ",
                                               absl::FormatDuration(deps_.request_timeout)));
      cut = writing_;
    } else {
      Arm();  // the injected clock has not reached the deadline yet
    }
  }
  if (!finish.has_value()) return;
  deps_.streams->Close(id_);
  if (cut) {
    // A write the client does not take would never complete: cut the call (the write
    // then fails). Without a Finish the call cannot end, so the context is still valid.
    context_->TryCancel();
    absl::MutexLock lock(&mu_);
    if (writing_) {
      pending_finish_ = std::move(finish);  // OnWriteDone finishes
      return;
    }
  }
  Finish(*std::move(finish));
}

void GenerateStream::CancelRequest() {
  if (cancel_sent_) return;
  deps_.executor->inbox().Cancel(id_);
  cancel_sent_ = true;
  cancel_deadline_ = deps_.clock->Now() + deps_.cancel_grace;
  Arm();
}

void GenerateStream::Arm() {
  if (finishing_ || done_) return;
  if (timer_ != 0) deps_.timers->Cancel(timer_);
  const absl::Time next = cancel_sent_ ? cancel_deadline_ : deadline_;
  std::weak_ptr<GenerateStream> weak = self_;
  timer_ = deps_.timers->Schedule(next - deps_.clock->Now(), [weak] {
    if (std::shared_ptr<GenerateStream> s = weak.lock()) s->OnTimer();
  });
}

void GenerateStream::OnDone() {
  std::shared_ptr<GenerateStream> last;
  {
    absl::MutexLock lock(&mu_);
    done_ = true;
    deps_.timers->Cancel(timer_);
    last = std::move(self_);
  }
  queue_->SetListener(nullptr);
  // `last` may be the final reference: this stream is destroyed on return.
}

}  // namespace lockstep::worker
