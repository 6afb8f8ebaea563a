#include "grammar/parser.h"

#include <algorithm>

namespace lockstep::grammar {

FrameStore::FrameStore() {
  frames_.push_back(Frame{});  // id 0: the bottom
  marks_.push_back(0);
  successors_.emplace_back();
}

int32_t FrameStore::Intern(const Frame& frame) {
  auto [it, inserted] = ids_.try_emplace(frame, static_cast<int32_t>(frames_.size()));
  if (inserted) {
    frames_.push_back(frame);
    marks_.push_back(0);
    successors_.emplace_back();
  }
  return it->second;
}

void FrameStore::SetSuccessor(int32_t id, const std::vector<int32_t>& tops, bool can_end) {
  Successor& s = successors_[id];
  s.begin = static_cast<int32_t>(successor_tops_.size());
  successor_tops_.insert(successor_tops_.end(), tops.begin(), tops.end());
  s.end = static_cast<int32_t>(successor_tops_.size());
  s.can_end = can_end;
}

bool FrameStore::Mark(int32_t id) {
  if (marks_[id] == epoch_) return false;
  marks_[id] = epoch_;
  return true;
}

void Parser::Close(FrameStore* store, int32_t id, ParseState* out) const {
  if (!store->Mark(id)) return;
  const Frame f = store->Get(id);
  const auto& alt = grammar_->rules[f.rule].alternatives[f.alt];
  if (f.pos == static_cast<int32_t>(alt.size())) {
    if (f.parent == 0) {
      out->can_end = true;
      return;
    }
    const Frame p = store->Get(f.parent);
    Close(store, store->Intern({p.rule, p.alt, p.pos + 1, p.parent}), out);
    return;
  }
  const Element& e = alt[f.pos];
  if (e.rule < 0) {
    out->tops.push_back(id);
    return;
  }
  const int32_t child_parent = f.pos + 1 == static_cast<int32_t>(alt.size()) ? f.parent : id;
  const int32_t n = static_cast<int32_t>(grammar_->rules[e.rule].alternatives.size());
  for (int32_t a = 0; a < n; ++a) Close(store, store->Intern({e.rule, a, 0, child_parent}), out);
}

void Parser::Normalize(ParseState* state) {
  std::sort(state->tops.begin(), state->tops.end());
  state->tops.erase(std::unique(state->tops.begin(), state->tops.end()), state->tops.end());
}

ParseState Parser::Start(FrameStore* store) const {
  ParseState state;
  store->NewEpoch();
  const int32_t n = static_cast<int32_t>(grammar_->rules[grammar_->root].alternatives.size());
  for (int32_t a = 0; a < n; ++a) Close(store, store->Intern({grammar_->root, a, 0, 0}), &state);
  Normalize(&state);
  return state;
}

ParseState Parser::StartAt(FrameStore* store, int32_t rule, int32_t alt, int32_t pos) const {
  ParseState state;
  store->NewEpoch();
  Close(store, store->Intern({rule, alt, pos, 0}), &state);
  Normalize(&state);
  return state;
}

ParseState Parser::Finish(FrameStore* store, int32_t top) const {
  ParseState state;
  store->NewEpoch();
  const Frame f = store->Get(top);
  if (f.parent == 0) {
    state.can_end = true;
  } else {
    const Frame p = store->Get(f.parent);
    Close(store, store->Intern({p.rule, p.alt, p.pos + 1, p.parent}), &state);
  }
  Normalize(&state);
  return state;
}

const FrameStore::Successor& Parser::SuccessorOf(FrameStore* store, int32_t top) const {
  if (store->successor(top).begin >= 0) return store->successor(top);
  // Its own closure pass: the union over several tops equals one shared pass's set.
  ParseState next;
  store->NewEpoch();
  const Frame f = store->Get(top);
  Close(store, store->Intern({f.rule, f.alt, f.pos + 1, f.parent}), &next);
  Normalize(&next);
  store->SetSuccessor(top, next.tops, next.can_end);
  return store->successor(top);
}

void Parser::Advance(FrameStore* store, const ParseState& in, uint8_t byte, ParseState* out) const {
  out->tops.clear();
  out->can_end = false;
  int taken = 0;
  for (int32_t top : in.tops) {
    const Frame& f = store->Get(top);
    if (!grammar_->rules[f.rule].alternatives[f.alt][f.pos].bytes.Contains(byte)) continue;
    const FrameStore::Successor s = SuccessorOf(store, top);
    const int32_t* tops = store->successor_tops().data();
    out->tops.insert(out->tops.end(), tops + s.begin, tops + s.end);
    out->can_end |= s.can_end;
    ++taken;
  }
  if (taken > 1) Normalize(out);  // one successor's tops are sorted and unique already
}

bool Parser::AdvanceAll(FrameStore* store, std::string_view bytes, ParseState* state) const {
  ParseState next;
  for (char c : bytes) {
    Advance(store, *state, static_cast<uint8_t>(c), &next);
    std::swap(*state, next);
    if (state->Dead()) return false;
  }
  return !state->Dead();
}

}  // namespace lockstep::grammar
