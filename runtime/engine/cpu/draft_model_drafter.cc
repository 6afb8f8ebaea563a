#include "runtime/engine/cpu/draft_model_drafter.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/status_macros.h"
#include "runtime/engine/cpu/sampler.h"

namespace lockstep::engine {
namespace {

// Where the draft KV of one sequence is valid: the pool for [0, draft_end), then the
// spec buffer (K + 1 positions) for [draft_end, draft_end + spec_len).
struct DraftKvState final : spec::DraftSequenceState {
  uint64_t generation = 0;  // the draft cache generation it belongs to
  int64_t draft_end = 0;
  int spec_len = 0;
  std::unique_ptr<SpecBuffer> spec_kv;  // K + 1 positions, where the draft's Forward reads
};

}  // namespace

DraftModelDrafter::DraftModelDrafter(const ForwardModel* draft, KvPoolView pool,
                                     int num_draft_tokens, ThreadPool* threads)
    : draft_(draft), pool_(pool), num_draft_tokens_(num_draft_tokens), threads_(threads) {}

std::unique_ptr<spec::DraftSequenceState> DraftModelDrafter::NewState() const {
  auto state = std::make_unique<DraftKvState>();
  state->spec_kv = draft_->NewSpecBuffer(num_draft_tokens_ + 1);
  return state;
}

absl::Status DraftModelDrafter::Propose(absl::Span<const spec::DraftQuery> queries,
                                        absl::Span<std::vector<int32_t>> drafts) {
  if (drafts.size() != queries.size()) {
    return absl::InvalidArgumentError(absl::StrCat("draft model drafter: ", queries.size(),
                                                   " queries but ", drafts.size(), " outputs"));
  }
  arena_.Reset();
  const bool collectives = draft_->collectives_per_forward() > 0;
  const int vocab = draft_->config().vocab_size;
  const int spec_tokens = num_draft_tokens_ + 1;
  members_.clear();
  seqs_.clear();
  for (size_t q = 0; q < queries.size(); ++q) {
    drafts[q].clear();
    const spec::DraftQuery& query = queries[q];
    if (query.kv_generation == 0 || query.tokens.empty()) continue;  // no draft KV
    auto* state = static_cast<DraftKvState*>(query.state);
    const int64_t start = query.first_position;
    Member& m = members_.emplace_back();
    m.query = static_cast<int>(q);
    m.next_start =
        start + static_cast<int64_t>(query.tokens.size()) - (query.ends_with_sampled ? 1 : 0);
    m.new_end = std::min(m.next_start, query.kv_limit);
    m.propose = query.ends_with_sampled ? std::clamp(query.max_drafts, 0, num_draft_tokens_) : 0;
    int64_t draft_end = start;
    int spec_len = 0;
    if (state != nullptr && !query.restart && state->generation == query.kv_generation) {
      draft_end = state->draft_end;
      spec_len = state->spec_len;
    }
    // Confirmed positions whose K/V wait in the spec buffer move into the pool.
    const int64_t copy_end = std::min(draft_end + spec_len, m.new_end);
    if (copy_end > draft_end) {
      draft_->CopyKv(pool_,
                     SequenceKv{query.kv_blocks, draft_end, state->spec_kv->data(), spec_tokens},
                     SequenceKv{query.kv_blocks}, draft_end, copy_end);
    }
    m.pool_valid = std::max(copy_end, draft_end);
    // Rows at or beyond new_end go to the spec buffer.
    seqs_.push_back(SequenceKv{query.kv_blocks, m.new_end,
                               state == nullptr ? nullptr : state->spec_kv->data(), spec_tokens});
  }
  const int num_seqs = static_cast<int>(seqs_.size());
  for (int pass = 0; pass < num_draft_tokens_; ++pass) {
    rows_.clear();
    logit_rows_.clear();
    for (int s = 0; s < num_seqs; ++s) {
      const Member& m = members_[s];
      const spec::DraftQuery& query = queries[m.query];
      if (pass == 0) {
        // Catch up on the confirmed tokens the draft has not seen, then the first proposal.
        for (int64_t p = m.pool_valid; p < m.next_start; ++p) {
          LOCKSTEP_DCHECK(p >= query.first_position) << "draft K/V missing below the step";
          rows_.push_back({query.tokens[p - query.first_position], p, s});
        }
        if (m.propose > 0) {
          logit_rows_.push_back(static_cast<int32_t>(rows_.size()));
          rows_.push_back({query.tokens.back(), m.next_start, s});
        }
      } else if (pass < m.propose) {
        logit_rows_.push_back(static_cast<int32_t>(rows_.size()));
        rows_.push_back({drafts[m.query][pass - 1], m.next_start + pass, s});
      }
    }
    if (rows_.empty() && !collectives) continue;
    ASSIGN_OR_RETURN(
        const float* logits,
        draft_->Forward(
            {rows_, seqs_, logit_rows_, {static_cast<int64_t>(rows_.size()), pass == 0, false}},
            pool_, arena_, threads_));
    int next_logit = 0;
    for (int s = 0; s < num_seqs; ++s) {
      const Member& m = members_[s];
      if (pass >= m.propose) continue;
      drafts[m.query].push_back(ArgMax(logits + static_cast<size_t>(next_logit++) * vocab, vocab));
    }
  }
  for (const Member& m : members_) {
    const spec::DraftQuery& query = queries[m.query];
    auto* state = static_cast<DraftKvState*>(query.state);
    if (state == nullptr) continue;  // a context chunk before the prompt's last
    state->generation = query.kv_generation;
    state->draft_end = m.new_end;
    state->spec_len = static_cast<int>(m.next_start - m.new_end) + m.propose;
  }
  return absl::OkStatus();
}

}  // namespace lockstep::engine
