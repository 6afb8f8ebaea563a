#include "grammar/compiled_grammar.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace lockstep::grammar {

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const Vocabulary> vocabulary,
                                 std::vector<bool> is_stop)
    : grammar_(std::move(grammar)),
      parser_(&grammar_),
      vocabulary_(std::move(vocabulary)),
      is_stop_(std::move(is_stop)),
      trie_(vocabulary_->token_bytes, is_stop_) {}

absl::StatusOr<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::Create(
    Grammar grammar, std::shared_ptr<const Vocabulary> vocabulary) {
  if (vocabulary == nullptr) return absl::InvalidArgumentError("no vocabulary");
  const int32_t n = static_cast<int32_t>(vocabulary->token_bytes.size());
  std::vector<bool> is_stop(n, false);
  for (int32_t t : vocabulary->stop_tokens) {
    if (t < 0 || t >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat("stop token ", t, " is outside the vocabulary of ", n));
    }
    is_stop[t] = true;
  }
  return std::shared_ptr<const CompiledGrammar>(
      new CompiledGrammar(std::move(grammar), std::move(vocabulary), std::move(is_stop)));
}

void FillTokenMask(const CompiledGrammar& g, FrameStore* store, const ParseState& state,
                   absl::Span<uint32_t> mask) {
  std::fill(mask.begin(), mask.end(), 0u);
  auto set = [&](int32_t t) { mask[t >> 5] |= uint32_t{1} << (t & 31); };
  if (state.can_end) {
    for (int32_t t : g.vocabulary().stop_tokens) set(t);
  }
  if (state.tops.empty()) return;
  const auto& nodes = g.trie().nodes();
  const auto& ids = g.trie().token_ids();
  std::vector<ParseState> states(1, state);
  const int32_t n = static_cast<int32_t>(nodes.size());
  for (int32_t i = 1; i < n;) {
    const TokenTrie::Node& node = nodes[i];
    if (static_cast<int32_t>(states.size()) <= node.depth) states.resize(node.depth + 1);
    const ParseState& from = states[node.depth - 1];
    g.parser().Advance(store, from, node.byte, &states[node.depth]);
    if (states[node.depth].Dead()) {
      i = node.subtree_end;
      continue;
    }
    for (int32_t k = node.tokens_begin; k < node.tokens_end; ++k) set(ids[k]);
    ++i;
  }
}

}  // namespace lockstep::grammar
