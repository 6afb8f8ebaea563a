#include "runtime/engine/fake/fake_engine.h"

#include <algorithm>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/hash.h"
#include "spec_decode/acceptance.h"
#include "spec_decode/ngram_drafter.h"

namespace lockstep::engine {
FakeEngine::FakeEngine(const FakeEngineOptions& options)
    : options_(options),
      target_kv_(options.check_kv_contract ? options.target_num_blocks : 0,
                 options.tokens_per_block),
      draft_kv_(options.check_kv_contract ? options.draft_num_blocks : 0,
                options.tokens_per_block) {
  if (options_.threaded) thread_ = std::thread([this] { Loop(); });
}

FakeEngine::~FakeEngine() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

EngineInfo FakeEngine::info() const {
  return {options_.vocab_size, options_.eos_token_id, options_.max_position};
}

int32_t FakeEngine::TargetToken(uint64_t seed, int64_t position) const {
  // Bytes only: never BOS/EOS, so requests end by length or by their stop tokens.
  return static_cast<int32_t>(SplitMix64(seed * 1000003u + static_cast<uint64_t>(position)) % 256);
}

int32_t FakeEngine::DraftToken(uint64_t seed, int64_t position) const {
  const uint64_t h =
      SplitMix64(SplitMix64(seed ^ options_.draft_seed) + static_cast<uint64_t>(position));
  const double u = static_cast<double>(h >> 11) * (1.0 / 9007199254740992.0);
  const int32_t target = TargetToken(seed, position);
  return u < options_.draft_acceptance ? target : (target + 1) % 256;
}

std::vector<int32_t> FakeEngine::ContextDrafts(uint64_t seed, const std::vector<int32_t>& prompt,
                                               int k) const {
  const int64_t end = static_cast<int64_t>(prompt.size());
  std::vector<int32_t> drafts;
  if (options_.spec_method == spec::Method::kNgram) {
    std::vector<int32_t> tokens = prompt;
    tokens.push_back(TargetToken(seed, end));
    spec::NgramDrafter::ProposeOne(tokens, options_.ngram_max, k, &drafts);
  } else {
    for (int i = 0; i < k; ++i) drafts.push_back(DraftToken(seed, end + 1 + i));
  }
  return drafts;
}

int64_t FakeEngine::batches_run() const {
  absl::MutexLock lock(&mu_);
  return batches_run_;
}

absl::Status FakeEngine::CheckCoverage(const kv::BlockRefs& kv, int64_t target_end,
                                       int64_t draft_end, int64_t write_start) const {
  if (!options_.check_kv_contract) return absl::OkStatus();
  const int64_t tpb = options_.tokens_per_block;
  const int64_t target_cap = static_cast<int64_t>(kv.blocks.size()) * tpb;
  if (target_cap < target_end) {
    return absl::InternalError(absl::StrCat("KV contract: request ", kv.id.value(),
                                            " writes target KV up to ", target_end,
                                            " but its block table covers ", target_cap));
  }
  for (BlockId b : kv.blocks) {
    if (b.value() < 0 || b.value() >= options_.target_num_blocks) {
      return absl::InternalError(absl::StrCat("KV contract: request ", kv.id.value(),
                                              " has target block ", b.value(), " out of range"));
    }
  }
  if (draft_end > 0) {
    if (kv.draft_generation == 0) {
      return absl::InternalError(
          absl::StrCat("KV contract: request ", kv.id.value(), " drafts without a draft cache"));
    }
    const int64_t draft_cap = static_cast<int64_t>(kv.draft_blocks.size()) * tpb;
    if (draft_cap < draft_end) {
      return absl::InternalError(absl::StrCat("KV contract: request ", kv.id.value(),
                                              " writes draft KV up to ", draft_end,
                                              " but its draft block table covers ", draft_cap));
    }
    for (BlockId b : kv.draft_blocks) {
      if (b.value() < 0 || b.value() >= options_.draft_num_blocks) {
        return absl::InternalError(absl::StrCat("KV contract: request ", kv.id.value(),
                                                " has draft block ", b.value(), " out of range"));
      }
    }
  }
  (void)write_start;
  return absl::OkStatus();
}

absl::Status FakeEngine::CheckDraftPrefill(const ContextChunk& c) {
  const int64_t prefix = static_cast<int64_t>(c.draft_prefix.size());
  const int64_t end = c.position + static_cast<int64_t>(c.tokens.size());
  if (prefix > c.position) {
    return absl::InternalError(absl::StrCat("KV contract: request ", c.kv.id.value(),
                                            " has a draft prefix of ", prefix,
                                            " tokens before position ", c.position));
  }
  draft_kv_.Write(c.kv.draft_blocks, c.position - prefix, c.draft_prefix);
  draft_kv_.Write(c.kv.draft_blocks, c.position, c.tokens);
  // Every position, not only the last: a stale block can end on the right chain.
  for (int64_t p = end - 1; p >= 0; --p) {
    if (draft_kv_.At(c.kv.draft_blocks, p) != target_kv_.At(c.kv.blocks, p)) {
      return absl::InternalError(absl::StrCat(
          "KV contract: request ", c.kv.id.value(), "'s draft KV at position ", p, " of [0, ", end,
          ") does not hold the tokens its target KV holds (a prefix without its draft KV?)"));
    }
  }
  return absl::OkStatus();
}

absl::Status FakeEngine::CheckStepKv(const GenerationStep& g, const SequenceState& state) const {
  if (!options_.check_kv_contract) return absl::OkStatus();
  const bool draft = options_.spec_method != spec::Method::kNgram && g.kv.draft_generation != 0;
  const char* pool = nullptr;
  int64_t position = 0;
  if (state.fingerprint != 0 && target_kv_.At(g.kv.blocks, state.history - 1) != state.fingerprint) {
    pool = "target";
    position = state.history - 1;
  } else if (draft && state.draft_fingerprint != 0 &&
             draft_kv_.At(g.kv.draft_blocks, state.draft_end - 1) != state.draft_fingerprint) {
    pool = "draft";
    position = state.draft_end - 1;
  }
  if (pool == nullptr) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(
      "KV contract: request ", g.kv.id.value(), "'s ", pool, " KV at position ", position,
      " is not what its previous step left (another sequence wrote its blocks?)"));
}

void FakeEngine::WriteStepKv(const GenerationStep& g, const std::vector<int32_t>& drafts,
                             int accepted, SequenceState& state) {
  if (!options_.check_kv_contract) return;
  const int64_t h = state.history;
  // The target: the last token and the drafts to verify.
  std::vector<int32_t> rows = {state.last_token};
  rows.insert(rows.end(), drafts.begin(), drafts.end());
  target_kv_.Write(g.kv.blocks, h, rows);
  state.fingerprint = target_kv_.At(g.kv.blocks, h + accepted);
  if (options_.spec_method == spec::Method::kNgram || g.kv.draft_generation == 0) return;
  // The draft model catches up on the confirmed tokens, writing below h + K only.
  std::vector<int32_t>& confirmed = state.draft_pending;  // from draft_end on
  confirmed.push_back(state.last_token);
  confirmed.insert(confirmed.end(), drafts.begin(), drafts.begin() + accepted);
  const int64_t end = std::min<int64_t>(h + 1 + accepted, h + g.num_draft_tokens);
  const int64_t n = end - state.draft_end;
  if (n <= 0) return;
  draft_kv_.Write(g.kv.draft_blocks, state.draft_end, absl::MakeConstSpan(confirmed).first(n));
  confirmed.erase(confirmed.begin(), confirmed.begin() + n);
  state.draft_end = end;
  state.draft_fingerprint = draft_kv_.At(g.kv.draft_blocks, end - 1);
}

absl::StatusOr<BatchResult> FakeEngine::Run(const Batch& batch) {
  for (const kv::BlockRefs& ref : batch.released) {
    auto it = states_.find(ref.id);
    if (it != states_.end() && it->second.generation == ref.generation) states_.erase(it);
  }
  const int64_t tpb = options_.tokens_per_block;
  // Blocks written this step, per pool: a block written by one sequence must not be in
  // another sequence's table in the same batch.
  absl::flat_hash_map<int32_t, RequestId> written;
  auto claim_writes = [&](const kv::BlockRefs& kv, int64_t start, int64_t end) -> absl::Status {
    if (!options_.check_kv_contract) return absl::OkStatus();
    for (int64_t b = start / tpb; b * tpb < end && b < static_cast<int64_t>(kv.blocks.size());
         ++b) {
      auto [it, inserted] = written.emplace(kv.blocks[b].value(), kv.id);
      if (!inserted && it->second != kv.id) {
        return absl::InternalError(absl::StrCat("KV contract: block ", kv.blocks[b].value(),
                                                " written by requests ", it->second.value(),
                                                " and ", kv.id.value(), " in one step"));
      }
    }
    return absl::OkStatus();
  };

  const bool ngram = options_.spec_method == spec::Method::kNgram;
  BatchResult result;
  result.step = batch.step;
  for (const ContextChunk& c : batch.context) {
    const int64_t end = c.position + static_cast<int64_t>(c.tokens.size());
    const int k = c.num_draft_tokens;
    // The fake draft model prefills every chunk and writes K proposals after the last.
    const int64_t draft_end =
        !ngram && c.kv.draft_generation != 0 ? end + (c.last_chunk ? k : 0) : 0;
    if (absl::Status s = CheckCoverage(c.kv, end, draft_end, c.position); !s.ok()) return s;
    if (absl::Status s = claim_writes(c.kv, c.position, end); !s.ok()) return s;
    uint64_t fingerprint = 0;
    if (options_.check_kv_contract) {
      fingerprint = target_kv_.Write(c.kv.blocks, c.position, c.tokens);
      if (draft_end > 0) {
        if (absl::Status s = CheckDraftPrefill(c); !s.ok()) return s;
      }
    }
    SequenceResult r;
    r.id = c.kv.id;
    r.generation = c.kv.generation;
    if (c.last_chunk) {
      const uint64_t seed = c.sampling.seed;
      const int32_t first = TargetToken(seed, end);
      r.tokens.push_back(first);
      SequenceState state{c.kv.generation, end, first, fingerprint, {}, {}};
      if (draft_end > 0) {
        state.draft_end = end;
        state.draft_fingerprint = fingerprint;  // CheckDraftPrefill: the same chain
      }
      if (ngram) {
        state.tokens = c.earlier_tokens;
        state.tokens.insert(state.tokens.end(), c.tokens.begin(), c.tokens.end());
        state.tokens.push_back(first);
        spec::NgramDrafter::ProposeOne(state.tokens, options_.ngram_max, k, &state.drafts);
        r.next_drafts = state.drafts;
      } else {
        for (int i = 0; i < k; ++i) r.next_drafts.push_back(DraftToken(seed, end + 1 + i));
      }
      states_[c.kv.id] = std::move(state);
    } else {
      states_.erase(c.kv.id);
    }
    result.sequences.push_back(std::move(r));
  }
  for (const GenerationStep& g : batch.generation) {
    SequenceState state;
    std::vector<int32_t> drafts;
    const uint64_t seed = g.sampling.seed;
    auto it = states_.find(g.kv.id);
    if (g.seed.has_value()) {
      state = SequenceState{g.kv.generation, g.seed->history, g.seed->last_token, 0, {}, {}};
      state.draft_end = g.seed->history;
      drafts = g.seed->draft_tokens;
      if (ngram) {
        state.tokens = g.seed->tokens;
        state.tokens.push_back(g.seed->last_token);
      }
    } else if (it != states_.end() && it->second.generation == g.kv.generation) {
      state = std::move(it->second);
      if (ngram) drafts = std::move(state.drafts);
    } else {
      return absl::InternalError(
          absl::StrCat("request ", g.kv.id.value(), " has no engine state and no seed"));
    }
    const int k = g.num_draft_tokens;
    if (ngram) {
      if (static_cast<int>(drafts.size()) > k) drafts.resize(k);  // this step's K is smaller
    } else if (static_cast<int>(drafts.size()) != k) {
      drafts.clear();
      for (int i = 0; i < k; ++i) drafts.push_back(DraftToken(seed, state.history + 1 + i));
    }
    const int64_t h = state.history;
    if (absl::Status s = CheckCoverage(g.kv, h + 1 + k, !ngram && k > 0 ? h + k : 0, h); !s.ok()) {
      return s;
    }
    if (absl::Status s = claim_writes(g.kv, h, h + 1 + k); !s.ok()) return s;
    if (absl::Status s = CheckStepKv(g, state); !s.ok()) return s;
    SequenceResult r;
    r.id = g.kv.id;
    r.generation = g.kv.generation;
    const spec::Verdict verdict = spec::AcceptDrafts(drafts, [&](int j) {
      r.tokens.push_back(TargetToken(seed, h + 1 + j));
      return r.tokens.back();
    });
    r.num_proposed = static_cast<int>(drafts.size());
    r.num_accepted = verdict.accepted;
    WriteStepKv(g, drafts, verdict.accepted, state);
    state.history = h + 1 + verdict.accepted;
    state.last_token = verdict.bonus;
    state.generation = g.kv.generation;
    if (ngram) {
      state.tokens.insert(state.tokens.end(), r.tokens.begin(), r.tokens.end());
      spec::NgramDrafter::ProposeOne(state.tokens, options_.ngram_max, k, &state.drafts);
    }
    states_[g.kv.id] = std::move(state);
    result.sequences.push_back(std::move(r));
  }
  return result;
}

void FakeEngine::Launch(Batch batch) {
  if (options_.tracker != nullptr) {
    std::vector<BlockWriteTracker::Block> blocks;
    auto add = [&](const kv::BlockRefs& kv) {
      for (BlockId b : kv.blocks) blocks.push_back({0, b.value()});
      for (BlockId b : kv.draft_blocks) blocks.push_back({1, b.value()});
    };
    for (const ContextChunk& c : batch.context) add(c.kv);
    for (const GenerationStep& g : batch.generation) add(g.kv);
    options_.tracker->Launched(batch.step.value(), blocks);
  }
  if (!options_.threaded) {
    absl::StatusOr<BatchResult> result = Run(batch);
    absl::MutexLock lock(&mu_);
    ++batches_run_;
    done_.emplace_back(batch.step, std::move(result));
    return;
  }
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(batch));
}

void FakeEngine::Loop() {
  while (true) {
    Batch batch;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](FakeEngine* e)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(e->mu_) { return e->stop_ || !e->queue_.empty(); },
          this));
      if (stop_) return;
      batch = std::move(queue_.front());
      queue_.pop_front();
    }
    absl::StatusOr<BatchResult> result = Run(batch);
    absl::MutexLock lock(&mu_);
    ++batches_run_;
    done_.emplace_back(batch.step, std::move(result));
  }
}

absl::StatusOr<BatchResult> FakeEngine::Collect(StepId step, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const bool ready = mu_.AwaitWithTimeout(
      absl::Condition(
          +[](FakeEngine* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(e->mu_) { return !e->done_.empty(); },
          this),
      timeout);
  if (!ready) {
    return absl::DeadlineExceededError(
        absl::StrCat("fake engine: step ", step.value(), " not done"));
  }
  auto [done_step, result] = std::move(done_.front());
  done_.pop_front();
  if (options_.tracker != nullptr) options_.tracker->Collected(done_step.value());
  if (done_step != step) {
    return absl::FailedPreconditionError(absl::StrCat("fake engine: collected step ", step.value(),
                                                      " but the oldest is ", done_step.value()));
  }
  return std::move(result);
}

}  // namespace lockstep::engine
