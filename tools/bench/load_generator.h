// A load generator for the OpenAI-compatible HTTP API: N streaming completion requests
// at a fixed concurrency, measuring what a client sees — time to first token, time
// per output token, errors — with a progress line on stderr.
//
// Thread safety: Run is called once; it uses its own client threads.
#ifndef LOCKSTEP_TOOLS_BENCH_LOAD_GENERATOR_H_
#define LOCKSTEP_TOOLS_BENCH_LOAD_GENERATOR_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace lockstep::bench {

struct LoadOptions {
  std::string http_address;  // the router: host:port, http://host:port or https://host:port
  std::string ca_file;       // checks an HTTPS router's certificate; empty: the system's CAs
  std::string model;
  std::string api_key;
  int64_t requests = 100;
  int64_t concurrency = 8;
  int64_t min_prompt_bytes = 32;
  int64_t max_prompt_bytes = 128;
  int64_t min_output_tokens = 16;
  int64_t max_output_tokens = 64;
  uint64_t seed = 1;
  // What the prompts look like: kDefault, random letters; kRepetitive, a short random
  // span (8..24 letters) repeated to the prompt's length, so the continuation the model
  // settles into repeats text it has seen (what prompt-lookup drafting copies); its
  // prompts are long unless given (kRepetitivePromptBytes).
  enum class Workload { kDefault, kRepetitive };
  Workload workload = Workload::kDefault;
  // How long a request may wait for its next byte (its first token under load, too);
  // callers pass the router's request_timeout_s so the client never gives up first.
  absl::Duration request_timeout = absl::Seconds(600);
  absl::Duration connect_timeout = absl::Seconds(10);
  bool progress = true;  // a progress bar on stderr
  // Record when each output token arrived (RequestOutcome::token_times): the requests
  // then ask for "logprobs": 0, so that every stream event names its tokens.
  bool record_token_times = false;
  // When set (with record_token_times), counts the tokens of all requests as they
  // arrive (a failure injection watches it); not owned.
  std::atomic<int64_t>* tokens_received = nullptr;
};

// The repetitive workload's prompt lengths in bytes (= tokens) when --min-prompt and
// --max-prompt are not given: long prompts, well inside the tiny models' 4096 positions
// and the router's default max_prompt_tokens (2048).
inline constexpr int64_t kRepetitiveMinPromptBytes = 512;
inline constexpr int64_t kRepetitiveMaxPromptBytes = 1024;

struct RequestOutcome {
  bool ok = false;
  std::string error;  // in words ("read timed out after 600 s", "HTTP 503 ...")
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  absl::Duration ttft;     // until the first token arrived
  absl::Duration latency;  // until the last byte
  std::string id;          // the response's "id" ("cmpl-…")
  std::vector<absl::Time> token_times;  // with LoadOptions::record_token_times
};

struct LoadResult {
  std::vector<RequestOutcome> outcomes;
  absl::Duration wall;
};

LoadResult RunLoad(const LoadOptions& options);

// "default" | "repetitive"; InvalidArgument naming both otherwise.
absl::StatusOr<LoadOptions::Workload> ParseWorkload(absl::string_view name);
const char* WorkloadName(LoadOptions::Workload workload);

}  // namespace lockstep::bench

#endif  // LOCKSTEP_TOOLS_BENCH_LOAD_GENERATOR_H_
