#include "tokenizer/split_segments.h"

#include <algorithm>

namespace lockstep::tok {

// Cuts [start, end) of `text` at `matches` (relative, sorted, disjoint) into segments.
void Segments(uint32_t start, uint32_t end, const std::vector<std::pair<uint32_t, uint32_t>>& m,
              bool invert, std::vector<Segment>* out) {
  out->clear();
  uint32_t prev = start;
  for (const auto& [s, e] : m) {
    if (prev < start + s) out->push_back({prev, start + s, invert});
    out->push_back({start + s, start + e, !invert});
    prev = start + e;
  }
  if (prev < end) out->push_back({prev, end, invert});
}

// Applies a split behavior to the segments of one word, appending the pieces.
void Emit(const std::vector<Segment>& segments, SplitBehavior behavior,
          std::vector<std::pair<uint32_t, uint32_t>>* out) {
  using enum SplitBehavior;
  const size_t first = out->size();
  bool previous_match = false;
  switch (behavior) {
    case kRemoved:
    case kIsolated:
      for (const Segment& s : segments) {
        if (behavior == kIsolated || !s.is_match) out->emplace_back(s.start, s.end);
      }
      break;
    case kContiguous:
    case kMergedWithPrevious:
      for (const Segment& s : segments) {
        const bool merge =
            behavior == kContiguous ? s.is_match == previous_match : s.is_match && !previous_match;
        if (merge && out->size() > first) {
          out->back().second = s.end;
        } else {
          out->emplace_back(s.start, s.end);
        }
        previous_match = s.is_match;
      }
      break;
    case kMergedWithNext:
      for (size_t i = segments.size(); i-- > 0;) {
        const Segment& s = segments[i];
        if (s.is_match && !previous_match && out->size() > first) {
          out->back().first = s.start;
        } else {
          out->emplace_back(s.start, s.end);
        }
        previous_match = s.is_match;
      }
      std::reverse(out->begin() + first, out->end());
      break;
  }
}

}  // namespace lockstep::tok
