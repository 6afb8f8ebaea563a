// File: matcher.h
//
// Grammar-constrained decoding: a GrammarSpec compiled against a vocabulary
// (CompiledGrammar, shared and cached per (spec, vocabulary)), and a per-request Matcher
// that gives the mask of tokens that may come next and advances by the sampled token.
//
//   auto vocab = std::make_shared<const Vocabulary>(Vocabulary{token_bytes, {eos}});
//   GrammarCache cache;
//   ASSIGN_OR_RETURN(auto compiled, cache.Get(spec, vocab));
//   Matcher matcher(compiled);
//   std::vector<uint32_t> mask(MaskWords(*vocab));
//   matcher.FillNextTokenMask(absl::MakeSpan(mask));   // sample among set bits
//   matcher.AcceptToken(token);
//
// A Matcher's state is a pure function of the tokens it accepted, so a request is
// rebuilt exactly by replaying them (migration), and Rollback undoes tokens
// (speculative decoding).
#ifndef LOCKSTEP_GRAMMAR_MATCHER_H_
#define LOCKSTEP_GRAMMAR_MATCHER_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "grammar/grammar_spec.h"
#include "grammar/parser.h"

namespace lockstep::grammar {

// What the engine knows of a vocabulary: each token id's bytes (decoded, byte-level)
// and the ids that end a sequence (EOS). Special tokens that are not text: empty bytes.
struct Vocabulary {
  std::vector<std::string> token_bytes;
  std::vector<int32_t> stop_tokens;
};

// Words of a token mask for `vocabulary`: 32 tokens per word.
inline size_t MaskWords(const Vocabulary& vocabulary) {
  return (vocabulary.token_bytes.size() + 31) / 32;
}

// A grammar compiled for one vocabulary, with its per-vocabulary precomputation.
// Immutable and thread-safe; defined in compiled_grammar.h.
class CompiledGrammar;

// Compiles `spec` for `vocabulary`. A spec that cannot be compiled is InvalidArgument
// naming the problem (the router answers 400).
absl::StatusOr<std::shared_ptr<const CompiledGrammar>> Compile(
    const GrammarSpec& spec, std::shared_ptr<const Vocabulary> vocabulary);

// Whether `spec` compiles (the front end only, no vocabulary): the router's check before
// it sends a request; InvalidArgument naming the problem.
absl::Status CheckGrammarSpec(const GrammarSpec& spec);

// Compiled grammars keyed by (spec, vocabulary identity), the least recently used
// dropped beyond `capacity`. Thread-safe; a compile runs outside the lock (two threads
// asking for the same new spec may both compile it). Failures are not cached.
class GrammarCache {
 public:
  explicit GrammarCache(size_t capacity = 256) : capacity_(capacity) {}
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> Get(
      const GrammarSpec& spec, std::shared_ptr<const Vocabulary> vocabulary);
  size_t size() const;

 private:
  using Key = std::pair<const Vocabulary*, std::pair<int, std::string>>;
  struct Entry {
    std::shared_ptr<const CompiledGrammar> grammar;
    std::list<Key>::iterator lru;
  };
  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::list<Key> lru_ ABSL_GUARDED_BY(mu_);  // front: most recent
  absl::flat_hash_map<Key, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

// The per-request state. Not thread-safe (one owner, the rank's executor thread).
class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const CompiledGrammar> grammar);
  ~Matcher();
  Matcher(Matcher&&) noexcept;
  Matcher& operator=(Matcher&&) noexcept;

  // Bit t of `mask` (32 tokens per word, size (vocab+31)/32) is set when token t may
  // come next. A stop token is allowed only where the grammar may end. After a stop
  // token nothing is allowed.
  void FillNextTokenMask(absl::Span<uint32_t> mask) const;
  // Advances by `token`; false (state unchanged) when the token is not allowed.
  bool AcceptToken(int32_t token);
  // Undoes the last `n` accepted tokens (all of them when fewer were accepted).
  void Rollback(int n);
  bool IsTerminated() const;  // a stop token was accepted
  bool CanTerminate() const;  // the grammar may end here
  bool IsDeadEnd() const;     // nothing (not even a stop token) may come next
  int num_accepted() const { return static_cast<int>(history_.size()) - 1; }
  const Vocabulary& vocabulary() const;

 private:
  struct Step {
    ParseState state;
    bool terminated = false;
  };

  std::shared_ptr<const CompiledGrammar> grammar_;
  // Frames are interned lazily, also while computing masks (hence mutable).
  mutable std::unique_ptr<FrameStore> store_;
  std::vector<Step> history_;  // history_[0]: the start; back(): now
};

}  // namespace lockstep::grammar

#endif  // LOCKSTEP_GRAMMAR_MATCHER_H_
