#include "tokenizer/added_vocabulary.h"

#include "common/status_macros.h"
#include "fmt/format.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/unicode.h"

namespace lockstep::tok {
namespace {

constexpr std::string_view kWhat = "added_tokens";

// Byte length of the White_Space run that ends at `end` / starts at `start`.
size_t SpaceBefore(std::string_view text, size_t end) {
  size_t start = end;
  while (start > 0) {
    size_t cp_start = start - 1;
    while (cp_start > 0 && (static_cast<uint8_t>(text[cp_start]) & 0xC0) == 0x80) --cp_start;
    size_t next = cp_start;
    if (!IsWhiteSpace(NextCodePoint(text, &next))) break;
    start = cp_start;
  }
  return end - start;
}

size_t SpaceAfter(std::string_view text, size_t start) {
  size_t end = start;
  while (end < text.size()) {
    size_t next = end;
    if (!IsWhiteSpace(NextCodePoint(text, &next))) break;
    end = next;
  }
  return end - start;
}

}  // namespace

void AddedVocabulary::Trie::Insert(std::string_view key, int32_t token) {
  int32_t node = 0;
  first_bytes.set(static_cast<uint8_t>(key[0]));
  for (const char c : key) {
    const uint64_t edge = static_cast<uint64_t>(node) << 8 | static_cast<uint8_t>(c);
    const auto [it, inserted] = edges.try_emplace(edge, static_cast<int32_t>(nodes.size()));
    if (inserted) nodes.emplace_back();
    node = it->second;
  }
  if (nodes[node].token < 0) nodes[node].token = token;  // the first of duplicates wins
}

int32_t AddedVocabulary::Trie::LongestAt(std::string_view text, size_t pos, size_t* length) const {
  if (!first_bytes.test(static_cast<uint8_t>(text[pos]))) return -1;
  int32_t node = 0, best = -1;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto it = edges.find(static_cast<uint64_t>(node) << 8 | static_cast<uint8_t>(text[i]));
    if (it == edges.end()) break;
    node = it->second;
    if (nodes[node].token >= 0) {
      best = nodes[node].token;
      *length = i + 1 - pos;
    }
  }
  return best;
}

absl::StatusOr<AddedVocabulary> AddedVocabulary::FromJson(const nlohmann::json& added_tokens,
                                                          const Normalizer& normalizer) {
  AddedVocabulary vocab;
  if (added_tokens.is_null()) return vocab;
  if (!added_tokens.is_array()) return absl::InvalidArgumentError("added_tokens: not an array");
  for (const nlohmann::json& entry : added_tokens) {
    AddedToken token;
    ASSIGN_OR_RETURN(token.content, StringField(entry, "content", kWhat));
    ASSIGN_OR_RETURN(const int64_t id, IntField(entry, "id", kWhat, -1));
    if (id < 0 || id > kMaxTokenId) {
      return absl::InvalidArgumentError(fmt::format(
          "added_tokens: '{}' needs an id in [0, {}], got {}", token.content, kMaxTokenId, id));
    }
    token.id = static_cast<int32_t>(id);
    ASSIGN_OR_RETURN(token.special, BoolField(entry, "special", kWhat, false));
    ASSIGN_OR_RETURN(token.normalized, BoolField(entry, "normalized", kWhat, !token.special));
    ASSIGN_OR_RETURN(token.lstrip, BoolField(entry, "lstrip", kWhat, false));
    ASSIGN_OR_RETURN(token.rstrip, BoolField(entry, "rstrip", kWhat, false));
    ASSIGN_OR_RETURN(const bool single_word, BoolField(entry, "single_word", kWhat, false));
    if (single_word) {
      return absl::UnimplementedError(
          fmt::format("added_tokens: '{}' is single_word, which is not supported", token.content));
    }
    if (token.content.empty() || !IsValidUtf8(token.content)) {
      return absl::InvalidArgumentError(
          fmt::format("added_tokens: id {} has empty or invalid content", token.id));
    }
    const auto index = static_cast<int32_t>(vocab.tokens_.size());
    vocab.by_id_.try_emplace(token.id, index);
    vocab.by_content_.try_emplace(token.content, token.id);
    if (token.normalized) {
      const std::string spelled = normalizer.Normalize(token.content);
      if (!spelled.empty()) vocab.normalized_.Insert(spelled, index);
    } else {
      vocab.raw_.Insert(token.content, index);
    }
    vocab.tokens_.push_back(std::move(token));
  }
  return vocab;
}

void AddedVocabulary::Split(std::string_view text, bool normalized_tokens,
                            std::vector<Piece>* pieces) const {
  const Trie& trie = normalized_tokens ? normalized_ : raw_;
  size_t copied = 0;  // text[0, copied) is in `pieces`
  size_t pos = 0;
  while (pos < text.size()) {
    size_t length = 0;
    const int32_t index = trie.nodes.size() > 1 ? trie.LongestAt(text, pos, &length) : -1;
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[index];
    size_t start = pos, end = pos + length;
    if (token.lstrip) start = std::max(copied, start - SpaceBefore(text, start));
    if (token.rstrip) end += SpaceAfter(text, end);
    if (copied < start) pieces->push_back({text.substr(copied, start - copied), -1});
    pieces->push_back({text.substr(start, end - start), token.id});
    copied = pos = end;
  }
  if (copied < text.size()) pieces->push_back({text.substr(copied), -1});
}

const AddedToken* AddedVocabulary::FindById(int32_t id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

std::optional<int32_t> AddedVocabulary::FindByContent(std::string_view content) const {
  const auto it = by_content_.find(absl::string_view(content.data(), content.size()));
  if (it == by_content_.end()) return std::nullopt;
  return it->second;
}

}  // namespace lockstep::tok
