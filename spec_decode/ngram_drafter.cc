#include "spec_decode/ngram_drafter.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace lockstep::spec {

NgramDrafter::NgramDrafter(int ngram_max) : ngram_max_(std::clamp(ngram_max, 1, kMaxNgram)) {}

void NgramDrafter::ProposeOne(absl::Span<const int32_t> tokens, int ngram_max, int max_drafts,
                              std::vector<int32_t>* out) {
  out->clear();
  const int64_t len = static_cast<int64_t>(tokens.size());
  if (max_drafts <= 0 || len < 2) return;
  const int64_t first = std::max<int64_t>(0, len - kNgramWindow);  // earliest start searched
  for (int64_t n = std::min<int64_t>(ngram_max, len - 1); n >= 1; --n) {
    const int32_t* suffix = tokens.data() + (len - n);
    // Most recent first, the suffix itself excluded (an occurrence may overlap it);
    // every occurrence leaves at least one token to copy.
    for (int64_t start = len - n - 1; start >= first; --start) {
      if (!std::equal(suffix, suffix + n, tokens.data() + start)) continue;
      const int64_t from = start + n;
      const int64_t to = std::min(len, from + max_drafts);
      out->assign(tokens.begin() + from, tokens.begin() + to);
      return;
    }
  }
}

absl::Status NgramDrafter::Propose(absl::Span<const DraftQuery> queries,
                                   absl::Span<std::vector<int32_t>> drafts) {
  if (drafts.size() != queries.size()) {
    return absl::InvalidArgumentError(absl::StrCat("n-gram drafter: ", queries.size(),
                                                   " queries but ", drafts.size(), " outputs"));
  }
  for (size_t i = 0; i < queries.size(); ++i) {
    ProposeOne(queries[i].tokens, ngram_max_, queries[i].max_drafts, &drafts[i]);
  }
  return absl::OkStatus();
}

}  // namespace lockstep::spec
