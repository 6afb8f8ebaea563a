// The "added_tokens" of a tokenizer.json: special and added tokens, matched in the text
// before anything else so they are never split. Tokens with `normalized: false` are
// found in the raw text; the others in each normalized piece between those. Matching
// is leftmost-longest (as Hugging Face's Aho-Corasick); `lstrip`/`rstrip` tokens also
// take the white space before/after them. `single_word` tokens fail FromJson.
//
// Immutable after construction; thread-safe.
#ifndef LOCKSTEP_TOKENIZER_ADDED_VOCABULARY_H_
#define LOCKSTEP_TOKENIZER_ADDED_VOCABULARY_H_

#include <bitset>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tokenizer/normalizer.h"

namespace lockstep::tok {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool normalized = true;
  bool lstrip = false;
  bool rstrip = false;
};

class AddedVocabulary {
 public:
  // A slice of the text: an added token (id >= 0) or text between tokens (id == -1).
  struct Piece {
    std::string_view text;
    int32_t id;
  };

  // `normalizer` spells the `normalized: true` tokens as they appear after normalizing.
  static absl::StatusOr<AddedVocabulary> FromJson(const nlohmann::json& added_tokens,
                                                  const Normalizer& normalizer);

  // Cuts `text` at the matches of the raw-text tokens (`normalized_tokens` false) or of
  // the normalized tokens (true); appends non-empty pieces to `pieces`.
  void Split(std::string_view text, bool normalized_tokens, std::vector<Piece>* pieces) const;

  const AddedToken* FindById(int32_t id) const;
  std::optional<int32_t> FindByContent(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  // A byte trie of one set of tokens.
  struct Trie {
    struct Node {
      int32_t token = -1;  // index into tokens_ if a token ends here
    };
    std::vector<Node> nodes{Node{}};
    absl::flat_hash_map<uint64_t, int32_t> edges;  // (node << 8 | byte) -> child
    std::bitset<256> first_bytes;

    void Insert(std::string_view key, int32_t token);
    // The longest token starting at `text[pos]`: its index and length; -1 if none.
    int32_t LongestAt(std::string_view text, size_t pos, size_t* length) const;
  };

  std::vector<AddedToken> tokens_;
  absl::flat_hash_map<int32_t, int32_t> by_id_;  // id -> index into tokens_
  absl::flat_hash_map<std::string, int32_t> by_content_;
  Trie raw_;
  Trie normalized_;
};

}  // namespace lockstep::tok

#endif  // LOCKSTEP_TOKENIZER_ADDED_VOCABULARY_H_
