// File: position_table.h
//
// What the mask computation precomputes per grammar position (a byte-class element of
// an alternative), as xgrammar does: walking the vocabulary's trie from that position
// alone, a token is
//   * accepted whatever the stack below: some parse stays inside the position's rule
//     through all its bytes (`accepted`, a bitset over the vocabulary);
//   * rejected whatever the stack below: every parse dies inside the rule;
//   * context-dependent: a parse leaves the rule after k of its bytes, before a byte
//     that may follow the rule anywhere in the grammar (or at its end). It is kept as
//     the suffix (bytes k..) under its id in `dependent`, a trie, which the mask walks
//     from the real stack's state after the rule (few distinct suffixes, mostly short).
// Immutable and thread-safe once built.
#ifndef LOCKSTEP_GRAMMAR_POSITION_TABLE_H_
#define LOCKSTEP_GRAMMAR_POSITION_TABLE_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "grammar/parser.h"
#include "grammar/token_trie.h"

namespace lockstep::grammar {

struct PositionTable {
  std::vector<uint32_t> accepted;  // 32 tokens per word
  int32_t num_accepted = 0;
  // When few words of `accepted` are nonzero: those words as (index, bits), so a mask
  // ORs them instead of the whole bitset (most positions accept a handful of tokens).
  bool sparse = false;
  std::vector<std::pair<uint32_t, uint32_t>> accepted_words;
  TokenTrie dependent;
};

// Builds the table of position (rule, alt, pos) against `vocabulary_trie` for a
// vocabulary of `vocab_size` tokens. `follow`: the bytes that may come after `rule`
// (follow_bytes.h); a token that leaves the rule before any other byte is rejected.
PositionTable BuildPositionTable(const Parser& parser, const TokenTrie& vocabulary_trie,
                                 int32_t vocab_size, int32_t rule, int32_t alt, int32_t pos,
                                 const ByteSet& follow);

}  // namespace lockstep::grammar

#endif  // LOCKSTEP_GRAMMAR_POSITION_TABLE_H_
