// File: compiled_grammar.h
//
// A Grammar bound to a Vocabulary with what the mask computation precomputes: the token
// trie, which tokens stop, per grammar position a PositionTable (built on first use,
// then shared), and the masks already computed per parse state (mask_cache.h).
// Immutable from the outside and thread-safe: a table is built outside any lock and
// published once with an atomic compare-and-swap; the mask cache has its own lock.
#ifndef LOCKSTEP_GRAMMAR_COMPILED_GRAMMAR_H_
#define LOCKSTEP_GRAMMAR_COMPILED_GRAMMAR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "grammar/grammar.h"
#include "grammar/mask_cache.h"
#include "grammar/matcher.h"
#include "grammar/parser.h"
#include "grammar/position_table.h"
#include "grammar/token_trie.h"

namespace lockstep::grammar {

class CompiledGrammar {
 public:
  static absl::StatusOr<std::shared_ptr<const CompiledGrammar>> Create(
      Grammar grammar, std::shared_ptr<const Vocabulary> vocabulary);
  ~CompiledGrammar();

  CompiledGrammar(const CompiledGrammar&) = delete;
  CompiledGrammar& operator=(const CompiledGrammar&) = delete;

  const Grammar& grammar() const { return grammar_; }
  const Parser& parser() const { return parser_; }
  const Vocabulary& vocabulary() const { return *vocabulary_; }
  const TokenTrie& trie() const { return trie_; }
  bool IsStop(int32_t token) const { return is_stop_[token]; }
  int32_t vocab_size() const { return static_cast<int32_t>(is_stop_.size()); }

  // The table of the position of frame `f` (built now if first asked).
  const PositionTable& Table(const Frame& f) const;
  // Builds every position's table now (benchmarks; Compile leaves them lazy).
  void BuildAllTables() const;
  // The masks computed so far, per parse state (FillTokenMask fills and reads it).
  MaskCache& mask_cache() const { return mask_cache_; }

  // The most bytes of cached masks per compiled grammar (a 128k-vocabulary mask packs
  // to a few bytes for a narrow state, at most 16 KB; a GrammarCache of 256 grammars
  // holds at most 1 GiB of them). The benchmark's schema used 1.9 MB for 40 outputs.
  static constexpr size_t kMaskCacheBytes = size_t{4} << 20;

 private:
  CompiledGrammar(Grammar grammar, std::shared_ptr<const Vocabulary> vocabulary,
                  std::vector<bool> is_stop);

  const Grammar grammar_;
  const Parser parser_;
  const std::shared_ptr<const Vocabulary> vocabulary_;
  const std::vector<bool> is_stop_;
  const TokenTrie trie_;
  const std::vector<ByteSet> follow_;  // [rule]: follow_bytes.h
  std::vector<std::vector<int32_t>> position_base_;  // [rule][alt]: index of pos 0
  mutable std::vector<std::atomic<const PositionTable*>> tables_;
  mutable MaskCache mask_cache_{kMaskCacheBytes};
};

// Fills `mask` (zeroed first) with the tokens allowed after `state`: from the mask
// cache when the state was seen before, else from the position tables (then cached).
void FillTokenMask(const CompiledGrammar& grammar, FrameStore* store, const ParseState& state,
                   absl::Span<uint32_t> mask);
// The same from the position tables alone (no cache).
void FillTokenMaskFromTables(const CompiledGrammar& grammar, FrameStore* store,
                             const ParseState& state, absl::Span<uint32_t> mask);
// The same by walking every token through the parser (the reference and the baseline).
void FillTokenMaskByWalk(const CompiledGrammar& grammar, FrameStore* store, const ParseState& state,
                         absl::Span<uint32_t> mask);

}  // namespace lockstep::grammar

#endif  // LOCKSTEP_GRAMMAR_COMPILED_GRAMMAR_H_
