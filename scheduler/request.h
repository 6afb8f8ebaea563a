// A request as one rank holds it: identity, prompt, sampling, state (checked
// transitions), context progress, generated tokens, speculation bookkeeping, times and
// the finish reason.
//
// Ownership: the executor thread owns every Request (thread-compatible, no locks).
// Other threads refer to requests by RequestId only.
#ifndef LOCKSTEP_SCHEDULER_REQUEST_H_
#define LOCKSTEP_SCHEDULER_REQUEST_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/ids.h"
#include "kvcache/prefix_hash.h"
#include "scheduler/request_state.h"
#include "scheduler/sampling_params.h"
#include "spec_decode/dynamic_k.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::sched {

// Where the KV of a generation-only request comes from, and what the context leg
// already produced. Mirrors transfer::ContextHandle without depending on the runtime.
struct ContextSource {
  std::string instance;
  int32_t rank = 0;
  std::string address;
  RequestId remote_id;
  absl::Time lease_expiry;
  int32_t first_token = 0;
  std::vector<int32_t> first_drafts;
};

// What AppendTokens kept of a step's tokens.
struct AppendResult {
  int num_appended = 0;  // tokens kept (stop/EOS/max_tokens truncate the rest)
  bool finished = false;
};

class Request {
 public:
  // `speculative`: how the instance speculates; the request's dynamic K chooses at most
  // its K.
  Request(RequestId id, RequestType type, std::vector<int32_t> prompt, SamplingParams sampling,
          absl::Time arrival, const spec::SpeculativeConfig& speculative = {});

  // The pad dummy: a generation request with one token of context (history 0), K
  // drafts, never answered.
  static std::unique_ptr<Request> MakeDummy(RequestId id, absl::Time now);

  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  RequestId id() const { return id_; }
  RequestType type() const { return type_; }
  bool is_dummy() const { return is_dummy_; }
  const std::vector<int32_t>& prompt() const { return prompt_; }
  const SamplingParams& sampling() const { return sampling_; }

  // ---- State. ----
  RequestState state() const { return state_; }
  // An illegal transition is a bug: CHECK-fails naming both states and the request.
  void TransitionTo(RequestState next);

  // ---- Context (prefill). ----
  // The tokens to prefill: the prompt, or prompt + generated tokens after a pause
  // (recompute).
  const std::vector<int32_t>& context_tokens() const { return context_tokens_; }
  int64_t context_length() const { return static_cast<int64_t>(context_tokens_.size()); }
  // Tokens already scheduled for prefill (including prefix reuse).
  int64_t context_position() const { return context_position_; }
  void set_context_position(int64_t position);
  int64_t context_remaining() const { return context_length() - context_position_; }
  // The prefix keys of the context's full blocks (kv::PrefixKeys), made when the
  // scheduler first tries to admit the request and extended as the context grows, so
  // the prompt is hashed once for every lookup of its prefix. The scheduler keeps them.
  const kv::PrefixKeys& prefix_keys() const { return prefix_keys_; }
  kv::PrefixKeys* mutable_prefix_keys() { return &prefix_keys_; }

  // ---- Generated tokens. ----
  const std::vector<int32_t>& output_tokens() const { return output_tokens_; }
  int64_t num_output_tokens() const { return static_cast<int64_t>(output_tokens_.size()); }
  // Appends a step's tokens in order, stopping at a stop token, EOS (unless
  // ignore_eos; `eos_token_id` < 0 means none) or max_tokens; sets the finish reason
  // when finished (the state is the caller's to change).
  AppendResult AppendTokens(absl::Span<const int32_t> tokens, int32_t eos_token_id);
  // Tokens appended but not yet sent to the client.
  int64_t num_streamed_tokens() const { return num_streamed_tokens_; }
  void MarkStreamed() { num_streamed_tokens_ = num_output_tokens(); }

  // Prompt tokens whose KV this rank reused from its prefix cache when the request's
  // prefill began (the first launched first chunk's position, at most the prompt). A
  // pause and recompute keeps the first value; a pause before any chunk launched (a
  // request holding only the prefix a KV tier was copying back) has none to keep.
  int64_t cached_prompt_tokens() const { return cached_prompt_tokens_; }
  // Records a launched first chunk's reuse: only the first call counts.
  void RecordPromptReuse(int64_t tokens) {
    if (prompt_reuse_recorded_) return;
    prompt_reuse_recorded_ = true;
    cached_prompt_tokens_ = tokens;
  }

  // ---- Speculation and steps. ----
  // Draft proposals the host knows of (the engine keeps its own; these go to the client
  // of a context-only request).
  const std::vector<int32_t>& draft_tokens() const { return draft_tokens_; }
  void set_draft_tokens(std::vector<int32_t> drafts) { draft_tokens_ = std::move(drafts); }
  int64_t drafts_proposed() const { return drafts_proposed_; }
  int64_t drafts_accepted() const { return drafts_accepted_; }
  // Counts a verified step and feeds the request's dynamic K.
  void RecordAcceptance(int proposed, int accepted);
  // K chosen from this request's acceptance rate (spec::DynamicK), at most the
  // instance's K (what the request was made with).
  const spec::DynamicK& dynamic_k() const { return dynamic_k_; }
  // Generation steps whose results have been applied.
  int64_t decoding_iter() const { return decoding_iter_; }
  void IncrementDecodingIter() { ++decoding_iter_; }
  // Steps launched with this request and not yet completed.
  int in_flight_steps() const { return in_flight_steps_; }
  void AddInFlight(int delta);

  // ---- Pause (recompute). ----
  // Back to kContextInit with context = prompt + generated tokens, position 0. The
  // caller has released the request's KV.
  void ResetForRecompute();
  int num_pauses() const { return num_pauses_; }
  // Order in which the request first got KV on this rank (-1: never); younger requests
  // (larger values) are paused first under KV pressure.
  int64_t start_order() const { return start_order_; }
  void set_start_order(int64_t order) { start_order_ = order; }

  // ---- Disaggregation. ----
  const std::optional<ContextSource>& context_source() const { return context_source_; }
  void set_context_source(ContextSource source) { context_source_ = std::move(source); }
  absl::Time transfer_deadline() const { return transfer_deadline_; }
  void set_transfer_deadline(absl::Time t) { transfer_deadline_ = t; }

  // ---- Times and finish. ----
  absl::Time arrival_time() const { return arrival_time_; }
  std::optional<absl::Time> first_token_time() const { return first_token_time_; }
  void set_first_token_time(absl::Time t) {
    if (!first_token_time_) first_token_time_ = t;
  }
  std::optional<absl::Time> finish_time() const { return finish_time_; }
  FinishReason finish_reason() const { return finish_reason_; }
  const absl::Status& status() const { return status_; }
  // Ends the request: kLength/kStop/kCancelled -> kGenerationComplete, kError ->
  // kError (or kTransferError when `transfer` is set). Records reason, status, time.
  void Finish(FinishReason reason, absl::Status status, absl::Time now, bool transfer = false);
  bool finished() const { return IsTerminal(state_); }

  std::string DebugString() const;

 private:
  RequestId id_;
  RequestType type_;
  bool is_dummy_ = false;
  std::vector<int32_t> prompt_;
  SamplingParams sampling_;
  RequestState state_;

  std::vector<int32_t> context_tokens_;
  int64_t context_position_ = 0;
  kv::PrefixKeys prefix_keys_;
  std::vector<int32_t> output_tokens_;
  int64_t num_streamed_tokens_ = 0;
  int64_t cached_prompt_tokens_ = 0;
  bool prompt_reuse_recorded_ = false;

  std::vector<int32_t> draft_tokens_;
  int64_t drafts_proposed_ = 0;
  int64_t drafts_accepted_ = 0;
  spec::DynamicK dynamic_k_;
  int64_t decoding_iter_ = 0;
  int in_flight_steps_ = 0;
  int num_pauses_ = 0;
  int64_t start_order_ = -1;

  std::optional<ContextSource> context_source_;
  absl::Time transfer_deadline_ = absl::InfiniteFuture();

  absl::Time arrival_time_;
  std::optional<absl::Time> first_token_time_;
  std::optional<absl::Time> finish_time_;
  FinishReason finish_reason_ = FinishReason::kNone;
  absl::Status status_;
};

}  // namespace lockstep::sched

#endif  // LOCKSTEP_SCHEDULER_REQUEST_H_
