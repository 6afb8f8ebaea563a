// The "model" of a tokenizer.json of type BPE: a vocabulary and ranked merges. A word
// starts as one symbol per byte (after a ByteLevel pre-tokenizer) or per character
// (otherwise; a character outside the vocabulary becomes its <0xHH> byte tokens when
// `byte_fallback` is set, else the unknown token). Then the lowest-ranked adjacent pair
// is merged, leftmost first, until no pair has a merge — with a priority queue of
// candidate pairs, so a word of n symbols costs O(n log n). `ignore_merges` looks the
// whole word up first. Results for words under 256 bytes are cached.
//
// Thread-safe (the cache is behind a mutex).
#ifndef LOCKSTEP_TOKENIZER_BPE_MODEL_H_
#define LOCKSTEP_TOKENIZER_BPE_MODEL_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"

namespace lockstep::tok {

class BpeModel {
 public:
  // `byte_level`: words arrive as raw bytes, and the vocabulary is spelled in the
  // byte-level alphabet (byte_level.h).
  static absl::StatusOr<std::unique_ptr<BpeModel>> FromJson(const nlohmann::json& model,
                                                            bool byte_level);

  // Appends the ids of `word` (valid UTF-8) to `ids`.
  void Tokenize(std::string_view word, std::vector<int32_t>* ids) const;

  std::optional<int32_t> TokenToId(std::string_view token) const;
  // The vocabulary string of `id`, or nullptr.
  const std::string* IdToToken(int32_t id) const;
  // One past the largest id.
  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }

 private:
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  struct Symbol {
    int32_t id;
    int32_t prev;  // -1 at the start
    int32_t next;  // -1 at the end
    bool alive;
  };

  BpeModel() = default;
  absl::Status LoadVocab(const nlohmann::json& vocab);
  absl::Status LoadMerges(const nlohmann::json& merges);
  static uint64_t PairKey(int32_t left, int32_t right) {
    return static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32 | static_cast<uint32_t>(right);
  }
  void InitialSymbols(std::string_view word, std::vector<Symbol>* symbols) const;
  void MergeAll(std::vector<Symbol>* symbols, std::vector<int32_t>* ids) const;

  absl::flat_hash_map<std::string, int32_t> vocab_;
  std::vector<std::string> tokens_;  // by id; empty for unused ids
  absl::flat_hash_map<uint64_t, Merge> merges_;
  bool byte_level_ = false;
  // Byte level: vocabulary keyed by raw bytes, and the symbol of each byte.
  absl::flat_hash_map<std::string, int32_t> byte_vocab_;
  std::array<int32_t, 256> byte_ids_;  // byte level: the byte's symbol; else <0xHH> or -1
  absl::flat_hash_map<char32_t, int32_t> char_ids_;  // single-character tokens
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;

  static constexpr size_t kMaxCachedWordBytes = 256;
  static constexpr size_t kCacheCapacity = 1 << 16;
  mutable absl::Mutex cache_mutex_;
  mutable absl::flat_hash_map<std::string, std::vector<int32_t>> cache_
      ABSL_GUARDED_BY(cache_mutex_);
};

}  // namespace lockstep::tok

#endif  // LOCKSTEP_TOKENIZER_BPE_MODEL_H_
