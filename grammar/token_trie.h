// File: token_trie.h
//
// Byte strings with token ids (a vocabulary's tokens, or the token suffixes a position
// table keeps) as a trie laid out in depth-first order, so a walk that rejects a node
// skips its whole subtree by jumping to `subtree_end`. Immutable and thread-safe.
#ifndef LOCKSTEP_GRAMMAR_TOKEN_TRIE_H_
#define LOCKSTEP_GRAMMAR_TOKEN_TRIE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace lockstep::grammar {

class TokenTrie {
 public:
  struct Node {
    uint8_t byte = 0;
    int32_t depth = 0;                         // bytes from the root (1 for the first byte)
    int32_t subtree_end = 0;                   // index of the first node after this subtree
    int32_t tokens_begin = 0, tokens_end = 0;  // ids ending here: token_ids()[begin, end)
  };

  TokenTrie() : TokenTrie(std::vector<std::pair<std::string, int32_t>>{}) {}
  // A vocabulary: tokens whose id is in `excluded` (stop tokens) or whose bytes are empty
  // are left out.
  TokenTrie(const std::vector<std::string>& token_bytes, const std::vector<bool>& excluded);
  // Any (bytes, id) entries; an empty string's id sits at the root.
  explicit TokenTrie(std::vector<std::pair<std::string, int32_t>> entries);

  // Node 0 is the root (no byte); nodes 1.. in depth-first order.
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int32_t>& token_ids() const { return token_ids_; }
  bool empty() const { return token_ids_.empty(); }

 private:
  void Build(const std::vector<std::pair<const std::string*, int32_t>>& sorted);

  std::vector<Node> nodes_;
  std::vector<int32_t> token_ids_;
};

}  // namespace lockstep::grammar

#endif  // LOCKSTEP_GRAMMAR_TOKEN_TRIE_H_
