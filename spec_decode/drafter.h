// Drafter: proposes up to K draft tokens for each sequence of a batch, for the target
// to verify (acceptance.h). Two kinds, one interface; the engine's batch runner
// (runtime/engine/cpu/batch_runner.h) calls Propose once per batch, after acceptance:
//   * a token drafter sees only tokens: NgramDrafter (ngram_drafter.h), prompt lookup,
//     no model and no KV. It gets each proposing sequence's whole token list.
//   * a KV drafter (keeps_kv()) runs a model over its own KV pool: the draft model
//     (runtime/engine/cpu/draft_model_drafter.h), whose passes run inside the engine
//     because they share the batch's forward and its collectives. It gets every
//     sequence of the batch that has draft KV (also those proposing nothing, whose KV
//     must still catch up), with the tokens this step confirmed, and keeps its
//     per-sequence state in a DraftSequenceState the engine holds with the sequence.
//     The MTP module (runtime/engine/cpu/mtp_drafter.h) is a KV drafter that also
//     reads the target's last hidden states of the step (needs_target_hidden()).
// The proposals are verified by the sequence's next step.
//
// Thread-compatible: one engine thread calls it.
#ifndef LOCKSTEP_SPEC_DECODE_DRAFTER_H_
#define LOCKSTEP_SPEC_DECODE_DRAFTER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/ids.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::spec {

// A KV drafter's state of one sequence (e.g. how far its KV is valid), created by
// Drafter::NewState and held by the engine with the sequence's own state, so both end
// together.
class DraftSequenceState {
 public:
  virtual ~DraftSequenceState() = default;
};

struct DraftQuery {
  // tokens[i] is the token at position first_position + i. For a token drafter the
  // whole sequence (first_position 0); for a KV drafter the tokens from where this
  // step started (the chunk, or the step's history) on. With ends_with_sampled the
  // last one is the newest (sampled, not yet in the KV cache); without (a context
  // chunk before the prompt's last) every token is in the target KV, none sampled.
  absl::Span<const int32_t> tokens;
  // Propose at most this many (K of this sequence's step; 0: none).
  int max_drafts = 0;
  int64_t first_position = 0;
  bool ends_with_sampled = true;

  // KV drafters only.
  // The sequence's draft cache (its generation, never 0, and block table) and its
  // grant: the drafter may write the pool only below kv_limit, the rest of what it
  // computes stays in its state.
  uint64_t kv_generation = 0;
  absl::Span<const BlockId> kv_blocks;
  int64_t kv_limit = 0;
  // The draft KV is valid exactly for [0, first_position): what the state says
  // beyond it no longer holds (a new chunk, a seeded sequence).
  bool restart = false;
  // From NewState; null for a context chunk before the prompt's last.
  DraftSequenceState* state = nullptr;

  // Drafters with needs_target_hidden() only: the target's last hidden states (after
  // the last layer, before the final norm) of this step's rows, [hidden_rows,
  // hidden_size] row-major for positions hidden_first_position, ...; valid during
  // Propose.
  const float* target_hidden = nullptr;
  int64_t hidden_first_position = 0;
  int hidden_rows = 0;
};

// What every rank of an instance agreed on for this step before it ran (the
// executor's step vote; runtime/engine/model_engine.h StepAgreement), for a KV drafter
// whose passes exchange rows between ranks: with it, a pass whose rows are bounded by
// the target's (at most one row per sequence) sizes its exchange from the vote instead
// of agreeing its own row count, and a device may replay a graph for it.
struct StepShape {
  bool agreed = false;          // false: no vote (one rank, a test host)
  bool any_context = true;      // some rank's batch has a context chunk
  int64_t max_target_rows = 0;  // the most rows of any rank's target forward
};

class Drafter {
 public:
  virtual ~Drafter() = default;

  // The step's shape, set by the engine before each Propose (default: no vote).
  virtual void SetStepShape(const StepShape& /*shape*/) {}

  virtual Method method() const = 0;

  // A KV drafter (see the top of this file); false: a token drafter.
  virtual bool keeps_kv() const { return false; }

  // A KV drafter that reads the target's hidden states (DraftQuery::target_hidden).
  virtual bool needs_target_hidden() const { return false; }

  // A KV drafter's state for a new sequence; null for a token drafter.
  virtual std::unique_ptr<DraftSequenceState> NewState() const { return nullptr; }

  // Fills `drafts[i]` (cleared first) with at most queries[i].max_drafts proposals for
  // the positions after queries[i].tokens. Fewer, or none, is allowed. `drafts` has
  // one entry per query.
  virtual absl::Status Propose(absl::Span<const DraftQuery> queries,
                               absl::Span<std::vector<int32_t>> drafts) = 0;
};

}  // namespace lockstep::spec

#endif  // LOCKSTEP_SPEC_DECODE_DRAFTER_H_
