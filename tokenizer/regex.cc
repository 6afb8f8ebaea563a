#include "tokenizer/regex.h"

#include "common/status_macros.h"

namespace lockstep::tok {
namespace {

using regex_internal::Alternation;
using regex_internal::CharSet;
using regex_internal::Item;
using regex_internal::kUnbounded;
using regex_internal::Program;
using regex_internal::Sequence;

// Backtracking by recursion over items (not characters): a quantified character set
// scans greedily, then gives back one character at a time. What remains to match after
// the current sequence is a linked list of continuations on the C++ stack.
class Matcher {
 public:
  Matcher(const Program& program, std::string_view text) : program_(program), text_(text) {}

  // Whether the whole pattern matches at `pos`; sets `*end`.
  bool MatchAt(size_t pos, size_t* end) { return MatchAlternation(0, pos, nullptr, end); }

 private:
  struct Continuation {
    const Sequence* seq;
    size_t item;  // the next item of `seq` to match
    const Continuation* next;
    // Set while inside an iteration of a quantified group:
    const Item* repeat = nullptr;
    int count = 0;
    size_t iteration_start = 0;
  };

  bool MatchAlternation(int group, size_t pos, const Continuation* k, size_t* end) {
    for (const Sequence& seq : program_.groups[group].branches) {
      if (MatchSequence(seq, 0, pos, k, end)) return true;
    }
    return false;
  }

  bool Continue(const Continuation* k, size_t pos, size_t* end) {
    if (k == nullptr) {
      *end = pos;
      return true;
    }
    if (k->repeat != nullptr) {
      if (pos == k->iteration_start && k->count > k->repeat->min) return false;  // empty loop
      return MatchGroupRepeat(*k->repeat, k->count, pos, *k->seq, k->item, k->next, end);
    }
    return MatchSequence(*k->seq, k->item, pos, k->next, end);
  }

  bool MatchSequence(const Sequence& seq, size_t i, size_t pos, const Continuation* k,
                     size_t* end) {
    if (i == seq.items.size()) return Continue(k, pos, end);
    const Item& item = seq.items[i];
    switch (item.kind) {
      case Item::Kind::kSet:
        return MatchSetRepeat(item, seq, i, pos, k, end);
      case Item::Kind::kGroup: {
        if (item.min == 1 && item.max == 1) {
          const Continuation after{&seq, i + 1, k};
          return MatchAlternation(item.index, pos, &after, end);
        }
        return MatchGroupRepeat(item, 0, pos, seq, i, k, end);
      }
      case Item::Kind::kLookahead:
      case Item::Kind::kNegativeLookahead: {
        size_t ignored;
        const bool found = MatchAlternation(item.index, pos, nullptr, &ignored);
        if (found != (item.kind == Item::Kind::kLookahead)) return false;
        return MatchSequence(seq, i + 1, pos, k, end);
      }
    }
    return false;
  }

  bool MatchSetRepeat(const Item& item, const Sequence& seq, size_t i, size_t pos,
                      const Continuation* k, size_t* end) {
    const CharSet& set = program_.sets[item.index];
    int count = 0;
    size_t p = pos;
    while ((item.max == kUnbounded || count < item.max) && p < text_.size()) {
      size_t next = p;
      if (!set.Contains(NextCodePoint(text_, &next))) break;
      p = next;
      ++count;
    }
    if (count < item.min) return false;
    while (true) {
      if (MatchSequence(seq, i + 1, p, k, end)) return true;
      if (count == item.min) return false;
      --count;  // give back one character
      do {
        --p;
      } while ((static_cast<uint8_t>(text_[p]) & 0xC0) == 0x80);
    }
  }

  // Greedy: one more iteration of the group if allowed, else what follows it.
  bool MatchGroupRepeat(const Item& item, int count, size_t pos, const Sequence& seq, size_t i,
                        const Continuation* k, size_t* end) {
    if (item.max == kUnbounded || count < item.max) {
      const Continuation again{&seq, i, k, &item, count + 1, pos};
      if (MatchAlternation(item.index, pos, &again, end)) return true;
    }
    return count >= item.min && MatchSequence(seq, i + 1, pos, k, end);
  }

  const Program& program_;
  std::string_view text_;
};

}  // namespace

absl::StatusOr<Regex> Regex::Compile(std::string_view pattern) {
  ASSIGN_OR_RETURN(Program program, regex_internal::Parse(pattern));
  return Regex(std::string(pattern), std::move(program));
}

bool Regex::Find(std::string_view text, size_t from, size_t* start, size_t* end) const {
  Matcher matcher(program_, text);
  for (size_t pos = from; pos < text.size(); pos += Utf8Length(static_cast<uint8_t>(text[pos]))) {
    if (matcher.MatchAt(pos, end)) {
      *start = pos;
      return true;
    }
  }
  return false;
}

}  // namespace lockstep::tok
