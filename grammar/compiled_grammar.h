// File: compiled_grammar.h
//
// A Grammar bound to a Vocabulary with what the mask computation precomputes once:
// the token trie and which tokens stop. Immutable after Create; shared by every Matcher
// of the grammar (thread-safe).
#ifndef LOCKSTEP_GRAMMAR_COMPILED_GRAMMAR_H_
#define LOCKSTEP_GRAMMAR_COMPILED_GRAMMAR_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/parser.h"
#include "grammar/token_trie.h"

namespace lockstep::grammar {

class CompiledGrammar {
 public:
  static absl::StatusOr<std::shared_ptr<const CompiledGrammar>> Create(
      Grammar grammar, std::shared_ptr<const Vocabulary> vocabulary);

  CompiledGrammar(const CompiledGrammar&) = delete;
  CompiledGrammar& operator=(const CompiledGrammar&) = delete;

  const Grammar& grammar() const { return grammar_; }
  const Parser& parser() const { return parser_; }
  const Vocabulary& vocabulary() const { return *vocabulary_; }
  const TokenTrie& trie() const { return trie_; }
  bool IsStop(int32_t token) const { return is_stop_[token]; }
  int32_t vocab_size() const { return static_cast<int32_t>(is_stop_.size()); }

 private:
  CompiledGrammar(Grammar grammar, std::shared_ptr<const Vocabulary> vocabulary,
                  std::vector<bool> is_stop);

  const Grammar grammar_;
  const Parser parser_;
  const std::shared_ptr<const Vocabulary> vocabulary_;
  const std::vector<bool> is_stop_;
  const TokenTrie trie_;
};

// Fills `mask` (zeroed first) with the tokens allowed after `state`.
void FillTokenMask(const CompiledGrammar& grammar, FrameStore* store, const ParseState& state,
                   absl::Span<uint32_t> mask);

}  // namespace lockstep::grammar

#endif  // LOCKSTEP_GRAMMAR_COMPILED_GRAMMAR_H_
