// The prompt-lookup (n-gram) drafter: for n from `ngram_max` down to 1, find the most
// recent earlier occurrence of the sequence's last n tokens in its prompt and output
// so far, and propose the tokens that followed it (up to K, fewer if the sequence ends
// first). The longest n that matches wins; no match, no drafts. It needs no draft
// model and no draft KV: the drafts cost only their verification rows in the target
// forward (and 1 + K tokens of target KV grant).
//
// The search looks back over the last kNgramWindow tokens only (an occurrence must
// start there), so a step costs O(kNgramWindow * ngram_max) comparisons per sequence
// however long the sequence grows.
//
// Thread-compatible; stateless apart from its options.
#ifndef LOCKSTEP_SPEC_DECODE_NGRAM_DRAFTER_H_
#define LOCKSTEP_SPEC_DECODE_NGRAM_DRAFTER_H_

#include <cstdint>
#include <vector>

#include "spec_decode/drafter.h"

namespace lockstep::spec {

// Tokens at the end of a sequence the n-gram drafter searches for a match.
inline constexpr int64_t kNgramWindow = 2048;

class NgramDrafter : public Drafter {
 public:
  // `ngram_max` in [1, kMaxNgram] (clamped).
  explicit NgramDrafter(int ngram_max);

  Method method() const override { return Method::kNgram; }
  absl::Status Propose(absl::Span<const DraftQuery> queries,
                       absl::Span<std::vector<int32_t>> drafts) override;

  // One sequence: appends at most `max_drafts` proposals to `out` (cleared first).
  static void ProposeOne(absl::Span<const int32_t> tokens, int ngram_max, int max_drafts,
                         std::vector<int32_t>* out);

 private:
  const int ngram_max_;
};

}  // namespace lockstep::spec

#endif  // LOCKSTEP_SPEC_DECODE_NGRAM_DRAFTER_H_
