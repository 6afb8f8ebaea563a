// A minimal host for engine tests: admits requests, prefills them in chunks, decodes
// them with or without speculation, optionally overlapping launches (step N+1 is
// launched before step N is collected), pads idle steps with the dummy, and releases
// finished requests, driving a ModelEngine through Launch/Collect exactly as the
// executor does. It keeps and checks the KV contract of model_engine.h: capacity for
// a step is granted before launch; without overlap, after each collected step the
// positions a step may not write (target: from h + 1 + K, draft: from h + K, a chunk:
// past its end) are checked untouched, and the positions at and beyond the history
// are scribbled with NaN; free blocks are checked to stay untouched. So an engine
// that writes outside its grant, or relies on KV beyond the history, fails.
//
// Thread-compatible; one test thread drives it.
#ifndef LOCKSTEP_RUNTIME_ENGINE_CPU_TESTING_MINI_HOST_H_
#define LOCKSTEP_RUNTIME_ENGINE_CPU_TESTING_MINI_HOST_H_

#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include "absl/status/status.h"
#include "kvcache/kv_types.h"
#include "runtime/engine/cpu/testing/test_models.h"
#include "runtime/engine/model_engine.h"
#include "scheduler/sampling_params.h"
#include "spec_decode/dynamic_k.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::engine::testing {

struct HostRequest {
  int64_t id = 0;
  std::vector<int32_t> prompt;
  sched::SamplingParams sampling;
};

struct HostOptions {
  int chunk_size = 64;        // context tokens per chunk
  int max_batch = 8;          // sequences per step
  int num_draft_tokens = 0;   // K (needs an engine with a drafter)
  // kNgram: drafts without draft KV (the engine's n-gram drafter; no draft pool).
  spec::Method spec_method = spec::Method::kDraftModel;
  bool dynamic = false;       // K per request and step (spec::DynamicK), at most K
  bool overlap = false;       // launch step N+1 before collecting step N
  int32_t eos_token_id = -1;  // stop at this token unless sampling.ignore_eos
  int64_t dummy_id = -1;
};

struct HostOutput {
  std::vector<int32_t> tokens;
  std::vector<std::vector<TokenLogprob>> logprobs;
  int64_t proposed = 0;
  int64_t accepted = 0;
  int64_t steps = 0;
};

class MiniHost {
 public:
  // `draft` may be null (no speculation). Pools must outlive the host.
  MiniHost(ModelEngine* engine, HostPool* target, HostPool* draft, HostOptions options);

  void Add(HostRequest request);
  // All requests finished and released, nothing in flight.
  bool Done() const;
  // Launches one step; pads with the dummy when nothing is schedulable and `pad` is
  // set (an empty batch otherwise).
  absl::Status Launch(bool pad);
  // Collects the oldest launched step.
  absl::Status Collect();
  int in_flight() const { return static_cast<int>(in_flight_.size()); }
  // Launch/Collect until Done (respecting `overlap`).
  absl::Status Run();

  const HostOutput& output(int64_t id) const { return seqs_.at(id).out; }
  bool pools_clean() const { return pools_clean_; }

 private:
  struct Seq {
    HostRequest request;
    uint64_t generation = 0;
    uint64_t draft_generation = 0;
    std::vector<BlockId> blocks;
    std::vector<BlockId> draft_blocks;
    int64_t prefilled = 0;     // prompt tokens launched
    int64_t history = 0;       // known history (collected steps)
    int64_t bound = 0;         // history after every launched step, at most
    int in_flight = 0;         // launched, not collected steps
    int64_t target_limit = 0;  // the launched step may write below these positions
    int64_t draft_limit = 0;
    bool first_token = false;  // the last chunk was collected
    bool finished = false;
    bool released = false;
    HostOutput out;
    spec::DynamicK dynamic_k{0};  // made by Add
    std::deque<int> step_k;  // K of each launched, not collected generation step
  };

  static constexpr int kCheckEvery = 8;

  absl::Status Grow(Seq& seq, int64_t target_tokens, int64_t draft_tokens);
  void CheckPools();
  void Release(Seq& seq, Batch& batch);

  ModelEngine* engine_;
  HostPool* target_;
  HostPool* draft_;
  const HostOptions options_;
  // The options' speculation, and the draft KV the grants are sized for (a draft pool
  // sized on its own, as an unpaired one).
  const spec::SpeculativeConfig speculative_;
  const kv::DraftMode draft_mode_;
  std::map<int64_t, Seq> seqs_;
  std::vector<int64_t> order_;                  // admission order
  std::deque<std::vector<int64_t>> in_flight_;  // per launched step: its sequences
  std::deque<StepId> steps_;
  int64_t next_step_ = 0;
  uint64_t next_generation_ = 1;
  std::vector<BlockId> dummy_blocks_;
  std::vector<BlockId> dummy_draft_blocks_;
  bool pools_clean_ = true;
  int64_t collects_ = 0;
};

}  // namespace lockstep::engine::testing

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_TESTING_MINI_HOST_H_
