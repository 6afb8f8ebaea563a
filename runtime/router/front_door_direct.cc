#include "runtime/router/front_door_direct.h"

#include <unistd.h>

#include <chrono>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "proto/worker.grpc.pb.h"
#include "runtime/security/grpc_credentials.h"

namespace lockstep::router {
namespace {

// One Generate stream. Its reactions run one at a time (gRPC serializes them), so its
// own fields need no lock; the shared tally does.
class DirectStream final : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  struct Tally {
    absl::Mutex mu;
    int done ABSL_GUARDED_BY(mu) = 0;
  };

  DirectStream(Tally* tally, int max_tokens) : tally_(tally), max_tokens_(max_tokens) {}

  void Start(v1::WorkerService::Stub* stub, const v1::GenerateRequest& request) {
    sent_ = absl::Now();
    stub->async()->Generate(&context_, &request, this);
    StartRead(&response_);
    StartCall();
  }
  void Cancel() { context_.TryCancel(); }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows
    const absl::Time now = absl::Now();
    if (response_.token_ids_size() > 0) {
      tokens_ += response_.token_ids_size();
      if (responses_++ == 0) {
        first_ms_ = absl::ToDoubleMilliseconds(now - sent_);
        first_ = now;
      } else {
        gap_ms_.push_back(absl::ToDoubleMilliseconds(now - last_));
      }
      last_ = now;
    }
    if (response_.finished() && response_.finish_reason() == v1::FINISH_REASON_ERROR) {
      error_ = absl::StrCat("worker error: ", response_.error_message());
    }
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& status) override {
    if (!status.ok() && error_.empty()) {
      error_ = absl::StrCat("gRPC ", static_cast<int>(status.error_code()), ": ",
                            status.error_message());
    }
    if (error_.empty() && tokens_ < max_tokens_) error_ = "fewer tokens than asked for";
    absl::MutexLock lock(&tally_->mu);
    ++tally_->done;
  }

  // After OnDone.
  const std::string& error() const { return error_; }
  int64_t responses() const { return responses_; }
  double first_ms() const { return first_ms_; }
  double decode_ms() const { return absl::ToDoubleMilliseconds(last_ - first_); }
  const std::vector<double>& gap_ms() const { return gap_ms_; }

 private:
  Tally* const tally_;
  const int max_tokens_;
  grpc::ClientContext context_;
  v1::GenerateResponse response_;
  absl::Time sent_, first_, last_;
  int64_t responses_ = 0;
  int tokens_ = 0;
  double first_ms_ = 0;
  std::vector<double> gap_ms_;
  std::string error_;
};

}  // namespace

DirectResult RunDirect(const DirectLoad& load) {
  std::shared_ptr<grpc::Channel> channel = security::CreateChannel(load.worker);
  // Connected before the clock starts, as the router's channel is.
  channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10));
  std::unique_ptr<v1::WorkerService::Stub> stub = v1::WorkerService::NewStub(channel);
  DirectStream::Tally tally;
  std::vector<std::unique_ptr<DirectStream>> streams;
  streams.reserve(load.streams);
  // Ids of their own, far from the router's (which start at 1).
  const uint64_t first_id = (uint64_t{1} << 62) + (static_cast<uint64_t>(getpid()) << 24);
  v1::GenerateRequest request;
  request.set_model(load.model);
  request.set_type(v1::REQUEST_TYPE_AGGREGATED);
  for (int id : load.prompt_token_ids) request.add_prompt_token_ids(id);
  request.mutable_sampling()->set_max_tokens(load.max_tokens);
  request.mutable_sampling()->set_ignore_eos(true);
  const absl::Time start = absl::Now();
  for (int i = 0; i < load.streams; ++i) {
    request.set_request_id(first_id + static_cast<uint64_t>(i));
    streams.push_back(std::make_unique<DirectStream>(&tally, load.max_tokens));
    streams.back()->Start(stub.get(), request);
  }
  const auto all_done = [&tally, &load]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return tally.done == load.streams;  // under tally.mu (Await)
  };
  tally.mu.Lock();
  const bool finished = tally.mu.AwaitWithDeadline(absl::Condition(&all_done), start + load.timeout);
  tally.mu.Unlock();
  if (!finished) {
    for (auto& stream : streams) stream->Cancel();  // each ends with CANCELLED
    absl::MutexLock lock(&tally.mu);
    tally.mu.Await(absl::Condition(&all_done));
  }
  DirectResult result;
  result.wall_s = absl::ToDoubleSeconds(absl::Now() - start);
  for (const auto& stream : streams) {
    result.responses += stream->responses();
    if (stream->responses() > 0) result.first_ms.push_back(stream->first_ms());
    result.gap_ms.insert(result.gap_ms.end(), stream->gap_ms().begin(), stream->gap_ms().end());
    if (stream->error().empty()) {
      ++result.completed;
      if (load.max_tokens > 1) {
        result.per_token_ms.push_back(stream->decode_ms() / (load.max_tokens - 1));
      }
    } else {
      ++result.errors[stream->error()];
    }
  }
  return result;
}

}  // namespace lockstep::router
