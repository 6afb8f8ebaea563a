// Splitting words at matches (internal to the pre-tokenizer): cut a word into matched
// and unmatched segments, then join them into words as a SplitBehavior says.
#ifndef LOCKSTEP_TOKENIZER_SPLIT_SEGMENTS_H_
#define LOCKSTEP_TOKENIZER_SPLIT_SEGMENTS_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "tokenizer/pre_tokenizer.h"

namespace lockstep::tok {

struct Segment {
  uint32_t start, end;
  bool is_match;
};

// Cuts [start, end) of `text` at `matches` (relative, sorted, disjoint) into segments.
void Segments(uint32_t start, uint32_t end, const std::vector<std::pair<uint32_t, uint32_t>>& m,
              bool invert, std::vector<Segment>* out);

// Applies a split behavior to the segments of one word, appending the pieces.
void Emit(const std::vector<Segment>& segments, SplitBehavior behavior,
          std::vector<std::pair<uint32_t, uint32_t>>* out);

}  // namespace lockstep::tok

#endif  // LOCKSTEP_TOKENIZER_SPLIT_SEGMENTS_H_
