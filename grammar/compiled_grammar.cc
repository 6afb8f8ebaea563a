#include "grammar/compiled_grammar.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grammar/follow_bytes.h"

namespace lockstep::grammar {

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const Vocabulary> vocabulary,
                                 std::vector<bool> is_stop)
    : grammar_(std::move(grammar)),
      parser_(&grammar_),
      vocabulary_(std::move(vocabulary)),
      is_stop_(std::move(is_stop)),
      trie_(vocabulary_->token_bytes, is_stop_),
      follow_(FollowBytes(grammar_)) {
  int32_t next = 0;
  position_base_.resize(grammar_.rules.size());
  for (size_t r = 0; r < grammar_.rules.size(); ++r) {
    for (const auto& alt : grammar_.rules[r].alternatives) {
      position_base_[r].push_back(next);
      next += static_cast<int32_t>(alt.size());
    }
  }
  tables_ = std::vector<std::atomic<const PositionTable*>>(next);
  for (auto& t : tables_) t.store(nullptr, std::memory_order_relaxed);
}

CompiledGrammar::~CompiledGrammar() {
  for (auto& t : tables_) delete t.load(std::memory_order_relaxed);
}

absl::StatusOr<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::Create(
    Grammar grammar, std::shared_ptr<const Vocabulary> vocabulary) {
  if (vocabulary == nullptr) return absl::InvalidArgumentError("no vocabulary");
  const int32_t n = static_cast<int32_t>(vocabulary->token_bytes.size());
  std::vector<bool> is_stop(n, false);
  for (int32_t t : vocabulary->stop_tokens) {
    if (t < 0 || t >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat("stop token ", t, " is outside the vocabulary of ", n));
    }
    is_stop[t] = true;
  }
  return std::shared_ptr<const CompiledGrammar>(
      new CompiledGrammar(std::move(grammar), std::move(vocabulary), std::move(is_stop)));
}

const PositionTable& CompiledGrammar::Table(const Frame& f) const {
  std::atomic<const PositionTable*>& slot = tables_[position_base_[f.rule][f.alt] + f.pos];
  const PositionTable* table = slot.load(std::memory_order_acquire);
  if (table != nullptr) return *table;
  auto built = std::make_unique<PositionTable>(
      BuildPositionTable(parser_, trie_, vocab_size(), f.rule, f.alt, f.pos, follow_[f.rule]));
  const PositionTable* expected = nullptr;
  if (slot.compare_exchange_strong(expected, built.get(), std::memory_order_acq_rel)) {
    return *built.release();
  }
  return *expected;  // another thread published first
}

void CompiledGrammar::BuildAllTables() const {
  for (size_t r = 0; r < grammar_.rules.size(); ++r) {
    for (size_t a = 0; a < grammar_.rules[r].alternatives.size(); ++a) {
      const auto& alt = grammar_.rules[r].alternatives[a];
      for (size_t p = 0; p < alt.size(); ++p) {
        if (alt[p].rule < 0) {
          Table(
              Frame{static_cast<int32_t>(r), static_cast<int32_t>(a), static_cast<int32_t>(p), 0});
        }
      }
    }
  }
}

namespace {

// Walks `trie` from `state`, setting the bits of ids at nodes the parser survives.
void WalkTrie(const CompiledGrammar& g, FrameStore* store, const ParseState& state,
              const TokenTrie& trie, std::vector<ParseState>* states, absl::Span<uint32_t> mask) {
  const auto& nodes = trie.nodes();
  const auto& ids = trie.token_ids();
  auto set_tokens = [&](const TokenTrie::Node& node) {
    for (int32_t k = node.tokens_begin; k < node.tokens_end; ++k) {
      mask[ids[k] >> 5] |= uint32_t{1} << (ids[k] & 31);
    }
  };
  set_tokens(nodes[0]);  // empty strings: the state itself is alive
  if (state.tops.empty()) return;
  if (states->empty()) states->resize(1);
  (*states)[0] = state;
  const int32_t n = static_cast<int32_t>(nodes.size());
  for (int32_t i = 1; i < n;) {
    const TokenTrie::Node& node = nodes[i];
    if (static_cast<int32_t>(states->size()) <= node.depth) states->resize(node.depth + 1);
    ParseState& next = (*states)[node.depth];
    g.parser().Advance(store, (*states)[node.depth - 1], node.byte, &next);
    if (next.Dead()) {
      i = node.subtree_end;
      continue;
    }
    set_tokens(node);
    ++i;
  }
}

void SetStops(const CompiledGrammar& g, const ParseState& state, absl::Span<uint32_t> mask) {
  if (!state.can_end) return;
  for (int32_t t : g.vocabulary().stop_tokens) mask[t >> 5] |= uint32_t{1} << (t & 31);
}

}  // namespace

void FillTokenMask(const CompiledGrammar& g, FrameStore* store, const ParseState& state,
                   absl::Span<uint32_t> mask) {
  const std::string key = MaskCache::Key(*store, state);
  if (g.mask_cache().Lookup(key, mask)) return;
  FillTokenMaskFromTables(g, store, state, mask);
  g.mask_cache().Insert(key, mask);
}

namespace {

// mask[w] |= the OR of `tables`' word w, over all words in one pass (a 16 KB bitset per
// table at 128k tokens), four words at a time.
void OrDenseTables(absl::Span<const uint32_t* const> tables, absl::Span<uint32_t> mask) {
  using Block = uint32_t __attribute__((vector_size(16)));
  constexpr size_t kWords = sizeof(Block) / sizeof(uint32_t);
  uint32_t* m = mask.data();
  const size_t words = mask.size();
  size_t w = 0;
  for (; w + kWords <= words; w += kWords) {
    Block acc;
    std::memcpy(&acc, m + w, sizeof(acc));
    for (const uint32_t* a : tables) {
      Block b;
      std::memcpy(&b, a + w, sizeof(b));
      acc |= b;
    }
    std::memcpy(m + w, &acc, sizeof(acc));
  }
  for (; w < words; ++w) {
    for (const uint32_t* a : tables) m[w] |= a[w];
  }
}

}  // namespace

void FillTokenMaskFromTables(const CompiledGrammar& g, FrameStore* store, const ParseState& state,
                             absl::Span<uint32_t> mask) {
  std::fill(mask.begin(), mask.end(), 0u);
  SetStops(g, state, mask);
  std::vector<ParseState> scratch;
  // The dense accepted sets are ORed together in one pass at the end (same bits).
  std::vector<const uint32_t*> dense;
  for (int32_t top : state.tops) {
    const PositionTable& table = g.Table(store->Get(top));
    if (table.sparse) {
      for (const auto& [w, bits] : table.accepted_words) mask[w] |= bits;
    } else if (table.num_accepted > 0) {
      dense.push_back(table.accepted.data());
    }
    if (table.dependent.empty()) continue;
    ParseState after = g.parser().Finish(store, top);
    if (after.Dead()) continue;
    WalkTrie(g, store, after, table.dependent, &scratch, mask);
  }
  if (!dense.empty()) OrDenseTables(dense, mask);
}

void FillTokenMaskByWalk(const CompiledGrammar& g, FrameStore* store, const ParseState& state,
                         absl::Span<uint32_t> mask) {
  std::fill(mask.begin(), mask.end(), 0u);
  SetStops(g, state, mask);
  std::vector<ParseState> scratch;
  WalkTrie(g, store, state, g.trie(), &scratch, mask);
}

}  // namespace lockstep::grammar
