// Drafter: proposes up to K draft tokens for each sequence of a batch, for the target
// to verify (acceptance.h). A token drafter sees only tokens: NgramDrafter
// (ngram_drafter.h), prompt lookup, no model and no KV. The draft model
// (Method::kDraftModel) is the other kind: a second transformer whose passes run inside
// the engine on its draft KV pool (runtime/engine/batch_runner.h), because they share
// the batch's forward and its collectives.
// Engines call a token drafter on their own thread, after acceptance, with each
// sequence's tokens so far (prompt and output, ending with the newest token); the
// proposals are verified by the sequence's next step.
//
// Thread-compatible: one engine thread calls it.
#ifndef LOCKSTEP_SPEC_DECODE_DRAFTER_H_
#define LOCKSTEP_SPEC_DECODE_DRAFTER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::spec {

struct DraftQuery {
  // The sequence so far: tokens[i] is the token at position i; the last one is the
  // newest (sampled, not yet in the KV cache).
  absl::Span<const int32_t> tokens;
  // Propose at most this many (K of this sequence's step; 0: none).
  int max_drafts = 0;
};

class Drafter {
 public:
  virtual ~Drafter() = default;

  virtual Method method() const = 0;

  // Fills `drafts[i]` (cleared first) with at most queries[i].max_drafts proposals for
  // the positions after queries[i].tokens. Fewer, or none, is allowed. `drafts` has
  // one entry per query.
  virtual absl::Status Propose(absl::Span<const DraftQuery> queries,
                               absl::Span<std::vector<int32_t>> drafts) = 0;
};

}  // namespace lockstep::spec

#endif  // LOCKSTEP_SPEC_DECODE_DRAFTER_H_
