#include "grammar/matcher.h"

#include <algorithm>
#include <utility>

#include "grammar/compiled_grammar.h"

namespace lockstep::grammar {

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)), store_(std::make_unique<FrameStore>()) {
  history_.push_back({grammar_->parser().Start(store_.get()), false});
}

Matcher::~Matcher() = default;
Matcher::Matcher(Matcher&&) noexcept = default;
Matcher& Matcher::operator=(Matcher&&) noexcept = default;

void Matcher::FillNextTokenMask(absl::Span<uint32_t> mask) const {
  const Step& now = history_.back();
  if (now.terminated) {
    std::fill(mask.begin(), mask.end(), 0u);
    return;
  }
  FillTokenMask(*grammar_, store_.get(), now.state, mask);
}

bool Matcher::AcceptToken(int32_t token) {
  const Step& now = history_.back();
  if (now.terminated || token < 0 || token >= grammar_->vocab_size()) return false;
  if (grammar_->IsStop(token)) {
    if (!now.state.can_end) return false;
    history_.push_back({ParseState{}, true});
    return true;
  }
  const std::string& bytes = grammar_->vocabulary().token_bytes[token];
  if (bytes.empty()) return false;
  ParseState state = now.state;
  if (!grammar_->parser().AdvanceAll(store_.get(), bytes, &state)) return false;
  history_.push_back({std::move(state), false});
  return true;
}

void Matcher::Rollback(int n) {
  n = std::clamp(n, 0, num_accepted());
  history_.resize(history_.size() - n);
}

bool Matcher::IsTerminated() const { return history_.back().terminated; }

const Vocabulary& Matcher::vocabulary() const { return grammar_->vocabulary(); }

bool Matcher::CanTerminate() const {
  return !history_.back().terminated && history_.back().state.can_end;
}

bool Matcher::IsDeadEnd() const {
  const Step& now = history_.back();
  if (now.terminated) return false;
  if (now.state.can_end && !grammar_->vocabulary().stop_tokens.empty()) return false;
  std::vector<uint32_t> mask(MaskWords(grammar_->vocabulary()));
  FillNextTokenMask(absl::MakeSpan(mask));
  return std::all_of(mask.begin(), mask.end(), [](uint32_t w) { return w == 0; });
}

absl::StatusOr<std::shared_ptr<const CompiledGrammar>> GrammarCache::Get(
    const GrammarSpec& spec, std::shared_ptr<const Vocabulary> vocabulary) {
  Key key{vocabulary.get(), {static_cast<int>(spec.kind), spec.text}};
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      return it->second.grammar;
    }
  }
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> compiled = Compile(spec, vocabulary);
  if (!compiled.ok()) return compiled.status();
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it != entries_.end()) return it->second.grammar;
  lru_.push_front(key);
  entries_.emplace(key, Entry{*compiled, lru_.begin()});
  while (entries_.size() > capacity_) {
    entries_.erase(lru_.back());
    lru_.pop_back();
  }
  return *compiled;
}

size_t GrammarCache::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace lockstep::grammar
