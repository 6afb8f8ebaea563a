#include "tokenizer/bpe_model.h"

#include <algorithm>

#include "common/status_macros.h"
#include "fmt/format.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/unicode.h"

namespace lockstep::tok {
namespace {

constexpr std::string_view kWhat = "model BPE";

// Debian's Abseil has its own string_view type, which heterogeneous lookup needs.
absl::string_view AsAbsl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// A merge candidate: merging `left` at `pos` with the symbol after it (`right`).
struct Candidate {
  int32_t rank;
  int32_t pos;
  int32_t left;
  int32_t right;
  int32_t new_id;
};

// Heap order: lowest rank first, then leftmost.
bool After(const Candidate& a, const Candidate& b) {
  return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
}

}  // namespace

absl::StatusOr<std::unique_ptr<BpeModel>> BpeModel::FromJson(const nlohmann::json& model,
                                                             bool byte_level) {
  auto bpe = std::unique_ptr<BpeModel>(new BpeModel);
  bpe->byte_level_ = byte_level;
  if (const auto dropout = model.find("dropout");
      dropout != model.end() && !dropout->is_null() &&
      !(dropout->is_number() && dropout->get<double>() == 0.0)) {
    return absl::UnimplementedError("model BPE: 'dropout' is not supported");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    ASSIGN_OR_RETURN(const std::string value, StringField(model, key, kWhat, false));
    if (!value.empty()) {
      return absl::UnimplementedError(fmt::format("model BPE: '{}' is not supported", key));
    }
  }
  ASSIGN_OR_RETURN(bpe->fuse_unk_, BoolField(model, "fuse_unk", kWhat, false));
  ASSIGN_OR_RETURN(bpe->byte_fallback_, BoolField(model, "byte_fallback", kWhat, false));
  ASSIGN_OR_RETURN(bpe->ignore_merges_, BoolField(model, "ignore_merges", kWhat, false));
  const auto vocab = model.find("vocab");
  if (vocab == model.end() || !vocab->is_object()) {
    return absl::InvalidArgumentError("model BPE: 'vocab' must be an object");
  }
  RETURN_IF_ERROR(bpe->LoadVocab(*vocab));
  const auto merges = model.find("merges");
  if (merges == model.end() || !merges->is_array()) {
    return absl::InvalidArgumentError("model BPE: 'merges' must be an array");
  }
  RETURN_IF_ERROR(bpe->LoadMerges(*merges));
  ASSIGN_OR_RETURN(const std::string unk, StringField(model, "unk_token", kWhat, false));
  if (!unk.empty()) {
    const auto it = bpe->vocab_.find(unk);
    if (it == bpe->vocab_.end()) {
      return absl::InvalidArgumentError(
          fmt::format("model BPE: unk_token '{}' is not in the vocabulary", unk));
    }
    bpe->unk_id_ = it->second;
  }
  return bpe;
}

absl::Status BpeModel::LoadVocab(const nlohmann::json& vocab) {
  vocab_.reserve(vocab.size());
  for (const auto& [token, id_json] : vocab.items()) {
    if (!id_json.is_number_integer() || id_json.get<int64_t>() < 0 ||
        id_json.get<int64_t>() > kMaxTokenId) {
      return absl::InvalidArgumentError(fmt::format(
          "model BPE: vocab entry '{}' needs an id in [0, {}], got {}", token, kMaxTokenId,
          id_json.dump()));
    }
    const auto id = static_cast<int32_t>(id_json.get<int64_t>());
    vocab_[token] = id;
    if (static_cast<size_t>(id) >= tokens_.size()) tokens_.resize(id + 1);
    tokens_[id] = token;
  }
  byte_ids_.fill(-1);
  if (byte_level_) {
    byte_vocab_.reserve(vocab_.size());
    std::string bytes;
    for (const auto& [token, id] : vocab_) {
      bytes.clear();
      if (AppendByteLevelBytes(token, &bytes)) byte_vocab_[bytes] = id;
    }
    for (int b = 0; b < 256; ++b) {
      const auto it = byte_vocab_.find(std::string(1, static_cast<char>(b)));
      if (it == byte_vocab_.end()) {
        return absl::InvalidArgumentError(fmt::format(
            "model BPE: the byte-level vocabulary lacks the token of byte 0x{:02X}", b));
      }
      byte_ids_[b] = it->second;
    }
    return absl::OkStatus();
  }
  for (const auto& [token, id] : vocab_) {
    size_t pos = 0;
    if (!token.empty() && IsValidUtf8(token)) {
      const char32_t cp = NextCodePoint(token, &pos);
      if (pos == token.size()) char_ids_[cp] = id;
    }
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = vocab_.find(fmt::format("<0x{:02X}>", b));
    if (it != vocab_.end()) byte_ids_[b] = it->second;
  }
  return absl::OkStatus();
}

absl::Status BpeModel::LoadMerges(const nlohmann::json& merges) {
  merges_.reserve(merges.size());
  int32_t rank = 0;
  for (const nlohmann::json& merge : merges) {
    std::string left, right;
    if (merge.is_string()) {
      const std::string& text = merge.get_ref<const std::string&>();
      const size_t space = text.find(' ');
      if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
        return absl::InvalidArgumentError(
            fmt::format("model BPE: merge '{}' is not two tokens separated by a space", text));
      }
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    } else {
      return absl::InvalidArgumentError(fmt::format("model BPE: bad merge {}", merge.dump()));
    }
    const auto l = vocab_.find(left), r = vocab_.find(right), m = vocab_.find(left + right);
    if (l == vocab_.end() || r == vocab_.end() || m == vocab_.end()) {
      return absl::InvalidArgumentError(fmt::format(
          "model BPE: merge '{} {}' uses or makes a token outside the vocabulary", left, right));
    }
    // A repeated pair keeps its first (best) rank.
    merges_.try_emplace(PairKey(l->second, r->second), Merge{rank, m->second});
    ++rank;
  }
  return absl::OkStatus();
}

std::optional<int32_t> BpeModel::TokenToId(std::string_view token) const {
  const auto it = vocab_.find(AsAbsl(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::IdToToken(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokens_.size() || tokens_[id].empty()) return nullptr;
  return &tokens_[id];
}

void BpeModel::Tokenize(std::string_view word, std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    const auto& whole = byte_level_ ? byte_vocab_ : vocab_;
    if (const auto it = whole.find(AsAbsl(word)); it != whole.end()) {
      ids->push_back(it->second);
      return;
    }
  }
  const bool cacheable = word.size() < kMaxCachedWordBytes;
  if (cacheable) {
    absl::ReaderMutexLock lock(&cache_mutex_);
    if (const auto it = cache_.find(AsAbsl(word)); it != cache_.end()) {
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  thread_local std::vector<Symbol> symbols;
  InitialSymbols(word, &symbols);
  const size_t first = ids->size();
  MergeAll(&symbols, ids);
  if (cacheable) {
    absl::MutexLock lock(&cache_mutex_);
    if (cache_.size() < kCacheCapacity) {
      cache_.try_emplace(std::string(word), ids->begin() + first, ids->end());
    }
  }
}

void BpeModel::InitialSymbols(std::string_view word, std::vector<Symbol>* symbols) const {
  symbols->clear();
  const auto add = [symbols](int32_t id) {
    const auto n = static_cast<int32_t>(symbols->size());
    symbols->push_back(Symbol{id, n - 1, -1, true});
  };
  if (byte_level_) {
    for (const char c : word) add(byte_ids_[static_cast<uint8_t>(c)]);
  } else {
    bool last_was_unk = false;
    for (size_t i = 0; i < word.size();) {
      const size_t start = i;
      const char32_t cp = NextCodePoint(word, &i);
      if (const auto it = char_ids_.find(cp); it != char_ids_.end()) {
        add(it->second);
        last_was_unk = false;
        continue;
      }
      if (byte_fallback_ && std::all_of(word.begin() + start, word.begin() + i, [&](char c) {
            return byte_ids_[static_cast<uint8_t>(c)] >= 0;
          })) {
        for (size_t k = start; k < i; ++k) add(byte_ids_[static_cast<uint8_t>(word[k])]);
        last_was_unk = false;
        continue;
      }
      if (!unk_id_) continue;  // as in Hugging Face: without an unknown token, dropped
      if (!(fuse_unk_ && last_was_unk)) add(*unk_id_);
      last_was_unk = true;
    }
  }
  for (size_t i = 0; i + 1 < symbols->size(); ++i) (*symbols)[i].next = static_cast<int32_t>(i + 1);
}

void BpeModel::MergeAll(std::vector<Symbol>* symbols_ptr, std::vector<int32_t>* ids) const {
  std::vector<Symbol>& symbols = *symbols_ptr;
  thread_local std::vector<Candidate> heap;
  heap.clear();
  const auto push = [&](int32_t pos) {
    const int32_t next = symbols[pos].next;
    if (next < 0) return;
    const auto it = merges_.find(PairKey(symbols[pos].id, symbols[next].id));
    if (it == merges_.end()) return;
    heap.push_back({it->second.rank, pos, symbols[pos].id, symbols[next].id, it->second.new_id});
    std::push_heap(heap.begin(), heap.end(), After);
  };
  for (size_t i = 0; i + 1 < symbols.size(); ++i) push(static_cast<int32_t>(i));
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), After);
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& left = symbols[c.pos];
    // Skip candidates whose pair has changed since they were queued.
    if (!left.alive || left.id != c.left || left.next < 0 || symbols[left.next].id != c.right) {
      continue;
    }
    Symbol& right = symbols[left.next];
    right.alive = false;
    left.id = c.new_id;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.pos;
    if (left.prev >= 0) push(left.prev);
    push(c.pos);
  }
  for (int32_t i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) {
    ids->push_back(symbols[i].id);
  }
}

}  // namespace lockstep::tok
