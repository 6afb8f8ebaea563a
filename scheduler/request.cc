#include "scheduler/request.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace lockstep::sched {

Request::Request(RequestId id, RequestType type, std::vector<int32_t> prompt,
                 SamplingParams sampling, absl::Time arrival,
                 const spec::SpeculativeConfig& speculative)
    : id_(id),
      type_(type),
      prompt_(std::move(prompt)),
      sampling_(std::move(sampling)),
      state_(type == RequestType::kGenerationOnly ? RequestState::kGenInit
                                                  : RequestState::kContextInit),
      context_tokens_(prompt_),
      dynamic_k_(speculative.MakeDynamicK()),
      arrival_time_(arrival) {}

std::unique_ptr<Request> Request::MakeDummy(RequestId id, absl::Time now) {
  SamplingParams sampling;
  sampling.max_tokens = 1;
  auto dummy = std::make_unique<Request>(id, RequestType::kAggregated, std::vector<int32_t>{0},
                                         sampling, now);
  dummy->is_dummy_ = true;
  dummy->context_position_ = dummy->context_length();
  dummy->state_ = RequestState::kGenerationInProgress;
  return dummy;
}

void Request::TransitionTo(RequestState next) {
  LOCKSTEP_CHECK(IsLegalTransition(state_, next))
      << "illegal request state transition " << RequestStateName(state_) << " -> "
      << RequestStateName(next) << " for request " << id_;
  state_ = next;
}

void Request::set_context_position(int64_t position) {
  LOCKSTEP_CHECK(position >= 0 && position <= context_length())
      << "context position " << position << " outside [0, " << context_length() << "] for request "
      << id_;
  context_position_ = position;
}

AppendResult Request::AppendTokens(absl::Span<const int32_t> tokens, int32_t eos_token_id) {
  AppendResult result;
  for (int32_t token : tokens) {
    if (num_output_tokens() >= sampling_.max_tokens) break;
    output_tokens_.push_back(token);
    ++result.num_appended;
    const bool is_stop = std::find(sampling_.stop_token_ids.begin(), sampling_.stop_token_ids.end(),
                                   token) != sampling_.stop_token_ids.end();
    const bool is_eos = eos_token_id >= 0 && token == eos_token_id && !sampling_.ignore_eos;
    if (is_stop || is_eos) {
      finish_reason_ = FinishReason::kStop;
      result.finished = true;
      return result;
    }
  }
  if (num_output_tokens() >= sampling_.max_tokens) {
    finish_reason_ = FinishReason::kLength;
    result.finished = true;
  }
  return result;
}

void Request::RecordAcceptance(int proposed, int accepted) {
  LOCKSTEP_CHECK(accepted >= 0 && accepted <= proposed)
      << "accepted " << accepted << " of " << proposed << " drafts for request " << id_;
  drafts_proposed_ += proposed;
  drafts_accepted_ += accepted;
  dynamic_k_.Observe(proposed, accepted);
}

void Request::AddInFlight(int delta) {
  in_flight_steps_ += delta;
  LOCKSTEP_CHECK(in_flight_steps_ >= 0) << "negative in-flight steps for request " << id_;
}

void Request::ResetForRecompute() {
  TransitionTo(RequestState::kContextInit);
  context_tokens_ = prompt_;
  context_tokens_.insert(context_tokens_.end(), output_tokens_.begin(), output_tokens_.end());
  context_position_ = 0;
  draft_tokens_.clear();
  // Steps launched before the pause address the released cache: their results are
  // stale and will not come back to this request.
  in_flight_steps_ = 0;
  start_order_ = -1;
  ++num_pauses_;
}

void Request::Finish(FinishReason reason, absl::Status status, absl::Time now, bool transfer) {
  finish_reason_ = reason;
  status_ = std::move(status);
  finish_time_ = now;
  if (reason == FinishReason::kError) {
    TransitionTo(transfer ? RequestState::kTransferError : RequestState::kError);
  } else {
    TransitionTo(RequestState::kGenerationComplete);
  }
}

std::string Request::DebugString() const {
  return absl::StrCat("request ", id_.value(), is_dummy_ ? " (dummy)" : "", " ",
                      RequestTypeName(type_), " ", RequestStateName(state_), " ctx ",
                      context_position_, "/", context_length(), " out ", num_output_tokens(), "/",
                      sampling_.max_tokens, " in_flight ", in_flight_steps_);
}

}  // namespace lockstep::sched
