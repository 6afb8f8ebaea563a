// File: parser.h
//
// The pushdown automaton over bytes that runs a Grammar: its state is a set of parse
// stacks (Earley/GLR-like), each a chain of frames (rule, alternative, position) shared
// through a hash-consing FrameStore, so equal stacks are one id and a state is a sorted
// vector of ids. Only stacks whose next element is a byte class are kept ("tops"); a
// stack that finishes the root rule sets `can_end`. A reference in tail position
// replaces its frame (tail call), so repetitions do not grow the stacks.
//
// Frame id 0 is the bottom: finishing a frame whose parent is 0 ends the root rule, or,
// for a stack started from a single position (Parser::StartAt), leaves that position's
// rule (the "exit" that makes a token depend on the stack below).
//
// Parser is immutable and thread-safe; a FrameStore belongs to one thread.
#ifndef LOCKSTEP_GRAMMAR_PARSER_H_
#define LOCKSTEP_GRAMMAR_PARSER_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "grammar/grammar.h"

namespace lockstep::grammar {

struct Frame {
  int32_t rule = -1, alt = 0, pos = 0, parent = 0;
  bool operator==(const Frame&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const Frame& f) {
    return H::combine(std::move(h), f.rule, f.alt, f.pos, f.parent);
  }
};

// Interns frames; ids are stable and the store only grows. It also remembers, per
// frame, the closure of the frame one position further (what a byte the frame takes
// leads to), so a state advanced again (a trie walk advances one state by each child's
// byte) does not redo the closure.
class FrameStore {
 public:
  FrameStore();
  int32_t Intern(const Frame& frame);
  const Frame& Get(int32_t id) const { return frames_[id]; }
  size_t size() const { return frames_.size(); }
  // Marks for one closure pass: a new epoch clears all marks in O(1).
  void NewEpoch() { ++epoch_; }
  bool Mark(int32_t id);  // true when `id` was not yet marked this epoch

  // The successor closure of frame `id` remembered by SetSuccessor: its tops (sorted,
  // unique) are successor_tops()[begin, end); false when not remembered yet.
  struct Successor {
    int32_t begin = -1, end = -1;
    bool can_end = false;
  };
  const Successor& successor(int32_t id) const { return successors_[id]; }
  void SetSuccessor(int32_t id, const std::vector<int32_t>& tops, bool can_end);
  const std::vector<int32_t>& successor_tops() const { return successor_tops_; }

 private:
  std::vector<Frame> frames_;
  std::vector<uint32_t> marks_;
  std::vector<Successor> successors_;
  std::vector<int32_t> successor_tops_;
  uint32_t epoch_ = 1;
  absl::flat_hash_map<Frame, int32_t> ids_;
};

struct ParseState {
  std::vector<int32_t> tops;  // sorted, unique
  bool can_end = false;       // some stack finished the root (or left the start rule)
  bool Dead() const { return tops.empty() && !can_end; }
  bool operator==(const ParseState&) const = default;
};

class Parser {
 public:
  explicit Parser(const Grammar* grammar) : grammar_(grammar) {}

  // The state before any byte.
  ParseState Start(FrameStore* store) const;
  // A state of the single position (rule, alt, pos) over the bottom frame.
  ParseState StartAt(FrameStore* store, int32_t rule, int32_t alt, int32_t pos) const;
  // The state after finishing the frame `top` (whose next element is a byte class is
  // irrelevant): pops to its parent and advances it.
  ParseState Finish(FrameStore* store, int32_t top) const;
  // Advances `in` by `byte` into `out` (cleared first).
  void Advance(FrameStore* store, const ParseState& in, uint8_t byte, ParseState* out) const;
  // Advances through all of `bytes`; false when the state dies on the way.
  bool AdvanceAll(FrameStore* store, std::string_view bytes, ParseState* state) const;

  const ByteSet& NextBytes(const FrameStore& store, int32_t top) const {
    const Frame& f = store.Get(top);
    return grammar_->rules[f.rule].alternatives[f.alt][f.pos].bytes;
  }
  const Grammar& grammar() const { return *grammar_; }

 private:
  // Adds the closure of frame `id` to `out` (tops unsorted).
  void Close(FrameStore* store, int32_t id, ParseState* out) const;
  // The closure of the frame after `top` (its position + 1), remembered in `store`.
  const FrameStore::Successor& SuccessorOf(FrameStore* store, int32_t top) const;
  static void Normalize(ParseState* state);

  const Grammar* grammar_;
};

}  // namespace lockstep::grammar

#endif  // LOCKSTEP_GRAMMAR_PARSER_H_
