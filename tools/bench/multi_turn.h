// The multi-turn workload of `lockstep bench --workload multi-turn`: many users, each
// holding one conversation of min_turns..max_turns turns that starts with a system
// prompt all users share. Turn k's prompt is turn k-1's prompt, its reply and a new user
// message, so each turn extends the previous one: what prefix reuse and kv_aware
// routing are for. `concurrency` conversations run at once (their turns interleave);
// each runs its turns one after another, the user pausing `think` between a reply and
// the next message (zero: at once). Requests go to RouterService.Generate with
// token prompts (the reply's token ids come back exactly), greedy, ignoring EOS.
//
// The ideal, per turn: every prompt token whose KV the workers published before the
// turn was sent, in full blocks, never the prompt's last token (kvcache/kv_manager.h
// CreateCache): for a follow-up, what the previous turn published (PublishedTokens: its
// prompt, and in aggregated serving the reply its decoding completed); for a first turn
// the system prompt once any request of the run has finished.
//
// Thread safety: RunMultiTurn is called once; it uses its own client threads.
#ifndef LOCKSTEP_TOOLS_BENCH_MULTI_TURN_H_
#define LOCKSTEP_TOOLS_BENCH_MULTI_TURN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace lockstep::bench {

struct MultiTurnOptions {
  std::string grpc_address;  // the router's RouterService
  std::string model;
  std::string api_key;  // sent as `authorization: Bearer` when set
  int64_t users = 16;
  int64_t concurrency = 8;  // conversations in progress at once
  int64_t min_turns = 5;
  int64_t max_turns = 10;
  int64_t system_tokens = 384;
  int64_t min_user_tokens = 32;
  int64_t max_user_tokens = 64;
  int64_t min_output_tokens = 32;
  int64_t max_output_tokens = 64;
  int32_t tokens_per_block = 16;  // the instances' kv.tokens_per_block (for the ideal)
  // Whether the instances that prefill the prompts also decode them (aggregated
  // serving), so that a reply's KV is published too (for the ideal). Not in
  // disaggregated serving: the generation instance decodes, and KV that arrived by
  // transfer is not published.
  bool replies_published = true;
  // The mean of a user's pause between a reply and the next message; each pause is
  // uniform in [0, 2 × mean], drawn from the seed apart from the prompts (which stay the
  // same whatever the pauses).
  absl::Duration mean_think = absl::ZeroDuration();
  uint64_t seed = 1;
  absl::Duration request_timeout = absl::Seconds(600);
  bool progress = true;
};

struct TurnOutcome {
  int64_t user = 0;
  int64_t turn = 0;  // 1-based
  bool ok = false;
  std::string error;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  int64_t ideal_reused_tokens = 0;
  // The prompt tokens the serving instance reused from its prefix cache (the router's
  // final response, cached_prompt_tokens).
  int64_t cached_tokens = 0;
  absl::Duration ttft;
  absl::Duration latency;
};

struct MultiTurnResult {
  std::vector<TurnOutcome> turns;  // in completion order
  absl::Duration wall;
};

// The workload a seed makes: the shared system prompt and each user's turns.
struct PlannedTurn {
  std::vector<int32_t> user;  // the user's message
  int64_t max_tokens = 0;
  uint64_t seed = 0;
  absl::Duration think;  // the user's pause before sending it (none before the first turn)
};
struct MultiTurnPlan {
  std::vector<int32_t> system;
  std::vector<std::vector<PlannedTurn>> users;
};
MultiTurnPlan MakeMultiTurnPlan(const MultiTurnOptions& options);

MultiTurnResult RunMultiTurn(const MultiTurnOptions& options);

// The ideal reuse of a prompt of `prompt_tokens` whose first `cached_tokens` tokens had
// KV in an earlier request: full blocks of min(cached, prompt - 1).
int64_t IdealReusedTokens(int64_t prompt_tokens, int64_t cached_tokens, int tokens_per_block);

// The leading tokens of a finished turn's prompt + reply whose KV its worker published
// (runtime/executor/executor_batch.cc): the prompt, which prefill commits; with
// `replies_published` also what decoding completed, up to history - 1 = prompt + reply
// - 2 (Executor::PublishDecoded: the last reply token has no KV, and a draft model's KV
// may lag the target's by one more). A speculative step that ran past max_tokens can
// publish one token more; this counts the lower bound.
int64_t PublishedTokens(int64_t prompt_tokens, int64_t reply_tokens, bool replies_published);

}  // namespace lockstep::bench

#endif  // LOCKSTEP_TOOLS_BENCH_MULTI_TURN_H_
