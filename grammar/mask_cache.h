// File: mask_cache.h
//
// Whole token masks of a CompiledGrammar, keyed by the parse state they were computed
// for, so a state that recurs (every token inside an unbounded string; every request of
// a cached schema passing the same positions) costs a lookup and a copy instead of
// the position tables' walk. The key spells each stack of the state as its frames'
// (rule, alt, pos) down to the bottom, sorted, so states of different FrameStores (one
// per request) share entries; a mask is a pure function of that key.
//
// A mask is stored as the words that differ from its most common fill (all zeros or all
// ones), so the many narrow masks of a schema's structure cost a few bytes each; a mask
// where more than half of the words differ is stored whole (smaller, and a copy). Entries
// beyond `capacity_bytes` are dropped, least recently used first.
//
// Thread-safe (one mutex; the key and the mask's expansion run outside it).
#ifndef LOCKSTEP_GRAMMAR_MASK_CACHE_H_
#define LOCKSTEP_GRAMMAR_MASK_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "grammar/parser.h"

namespace lockstep::grammar {

class MaskCache {
 public:
  explicit MaskCache(size_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}

  // The key of `state`, independent of `store`'s frame ids.
  static std::string Key(const FrameStore& store, const ParseState& state);

  // Writes the mask cached under `key` into `mask`; false when there is none.
  bool Lookup(const std::string& key, absl::Span<uint32_t> mask);
  void Insert(const std::string& key, absl::Span<const uint32_t> mask);

  size_t size() const;
  size_t bytes() const;

 private:
  // Either the words that differ from `fill`, or (when that would be larger) the whole
  // mask in `raw`, copied in one go.
  struct Packed {
    uint32_t fill = 0;                                 // 0 or ~0
    std::vector<std::pair<uint32_t, uint32_t>> words;  // (index, value) that differ
    std::vector<uint32_t> raw;                         // the whole mask, or empty
    size_t Bytes() const {
      return sizeof(Packed) + words.size() * sizeof(words[0]) + raw.size() * sizeof(raw[0]);
    }
  };
  struct Entry {
    std::shared_ptr<const Packed> packed;
    std::list<std::string>::iterator lru;
  };

  const size_t capacity_bytes_;
  mutable absl::Mutex mu_;
  std::list<std::string> lru_ ABSL_GUARDED_BY(mu_);  // front: most recent
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace lockstep::grammar

#endif  // LOCKSTEP_GRAMMAR_MASK_CACHE_H_
