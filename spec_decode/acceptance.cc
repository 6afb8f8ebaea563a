#include "spec_decode/acceptance.h"

#include <algorithm>

namespace lockstep::spec {

Verdict AcceptDrafts(absl::Span<const int32_t> drafts,
                     absl::FunctionRef<int32_t(int)> target_token) {
  const int k = static_cast<int>(drafts.size());
  for (int j = 0;; ++j) {
    const int32_t token = target_token(j);
    if (j == k || token != drafts[j]) return Verdict{j, token};
  }
}

Verdict AcceptDrafts(absl::Span<const int32_t> drafts, absl::Span<const int32_t> sampled) {
  if (sampled.empty()) return Verdict{0, 0};
  const size_t usable = std::min(drafts.size(), sampled.size() - 1);
  return AcceptDrafts(drafts.subspan(0, usable),
                      [&](int j) { return sampled[static_cast<size_t>(j)]; });
}

}  // namespace lockstep::spec
