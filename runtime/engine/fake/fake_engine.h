// FakeEngine: a ModelEngine whose tokens are a pure function of (request seed,
// position), with a fake draft that agrees with the target at a seeded, configurable
// rate, so acceptance is predictable. It runs batches on its own thread (like a GPU,
// so the host overlaps) or inline, and it checks the KV contract of model_engine.h:
// every block table must cover what the step writes, block ids must be in range, and
// no block written by one sequence may appear in another sequence of the same batch.
// It also models what the pools hold (fake_kv_content.h): a context chunk's draft KV
// (the fake draft model prefills every chunk, after the chunk's draft prefix) must hold
// the same token chain as its target KV at every position, so a prefix reused without
// its draft KV fails; and a generation step must find the target KV the sequence's
// previous step left (nobody wrote its blocks in between). A violation fails the batch
// (Collect returns Internal naming the request).
//
// Thread safety: Launch and Collect from one thread (the executor's).
#ifndef LOCKSTEP_RUNTIME_ENGINE_FAKE_FAKE_ENGINE_H_
#define LOCKSTEP_RUNTIME_ENGINE_FAKE_FAKE_ENGINE_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "runtime/engine/fake/fake_kv_content.h"
#include "runtime/engine/model_engine.h"
#include "runtime/testing/block_write_tracker.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::engine {

struct FakeEngineOptions {
  int32_t vocab_size = 258;
  // Never produced by the token function: requests end by length (or stop tokens).
  int32_t eos_token_id = 257;
  int64_t max_position = int64_t{1} << 30;
  // Who drafts: kDraftModel is a fake draft model (below) with draft KV; kNgram is the
  // real n-gram drafter over the sequence's tokens, without draft KV.
  spec::Method spec_method = spec::Method::kDraftModel;
  int32_t ngram_max = 3;
  // Probability that a fake draft-model token equals the target token at its position.
  double draft_acceptance = 0.6;
  uint64_t draft_seed = 0;
  // Run batches on a thread of their own (true) or during Launch (false).
  bool threaded = true;
  // Pools, to check the block tables (0 blocks: no such pool).
  int32_t tokens_per_block = 16;
  int32_t target_num_blocks = 0;
  int32_t draft_num_blocks = 0;
  // Check the KV contract on every batch (off: as close to zero cost as the interface
  // allows, for host-overhead benchmarks).
  bool check_kv_contract = true;
  // Records the blocks of every batch until it is collected (not owned; may be null).
  BlockWriteTracker* tracker = nullptr;
};

class FakeEngine : public ModelEngine {
 public:
  explicit FakeEngine(const FakeEngineOptions& options);
  ~FakeEngine() override;

  EngineInfo info() const override;
  void Launch(Batch batch) override;
  absl::StatusOr<BatchResult> Collect(StepId step, absl::Duration timeout) override;

  // The target token at `position` of a sequence with sampling seed `seed`.
  int32_t TargetToken(uint64_t seed, int64_t position) const;
  // The draft token proposed for `position`.
  int32_t DraftToken(uint64_t seed, int64_t position) const;
  // The K drafts a context leg hands over after the last chunk of `prompt` (the fake
  // draft model's, or the n-gram drafter's over the prompt and the first token).
  std::vector<int32_t> ContextDrafts(uint64_t seed, const std::vector<int32_t>& prompt,
                                     int k) const;

  // Batches run so far.
  int64_t batches_run() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct SequenceState {
    uint64_t generation = 0;
    int64_t history = 0;
    int32_t last_token = 0;
    // The target KV's fingerprint at history - 1 as this sequence left it (0: unknown,
    // e.g. KV that arrived by transfer).
    uint64_t fingerprint = 0;
    // The fake draft model's KV: the pool holds [0, draft_end) (fingerprint at
    // draft_end - 1, 0: unknown); the confirmed tokens at [draft_end, history) wait for
    // a step that may write there (model_engine.h: at most one).
    int64_t draft_end = 0;
    uint64_t draft_fingerprint = 0;
    std::vector<int32_t> draft_pending;
    // kNgram only: the tokens at [0, history] and the drafts for the next step.
    std::vector<int32_t> tokens;
    std::vector<int32_t> drafts;
  };

  absl::StatusOr<BatchResult> Run(const Batch& batch);
  // The fake draft model prefills chunk `c` after its draft prefix (its target KV is
  // written); then its draft KV must hold the target's chain at every position up to the
  // chunk's end.
  absl::Status CheckDraftPrefill(const ContextChunk& c);
  // A generation step of `g` from `state` verifying `drafts`: checks that the pools
  // hold what the sequence's previous step left. Then (Write) records its KV: the
  // target rows, and the draft model's catch-up on the confirmed tokens below h + K.
  absl::Status CheckStepKv(const GenerationStep& g, const SequenceState& state) const;
  void WriteStepKv(const GenerationStep& g, const std::vector<int32_t>& drafts, int accepted,
                   SequenceState& state);
  absl::Status CheckCoverage(const kv::BlockRefs& kv, int64_t target_end, int64_t draft_end,
                             int64_t write_start) const;
  void Loop();

  const FakeEngineOptions options_;
  // Engine-thread state (or executor thread when not threaded).
  absl::flat_hash_map<RequestId, SequenceState> states_;
  FakeKvContent target_kv_;
  FakeKvContent draft_kv_;

  mutable absl::Mutex mu_;
  std::deque<Batch> queue_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<StepId, absl::StatusOr<BatchResult>>> done_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int64_t batches_run_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_FAKE_FAKE_ENGINE_H_
