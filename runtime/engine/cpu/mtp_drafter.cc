#include "runtime/engine/cpu/mtp_drafter.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/status_macros.h"
#include "runtime/engine/cpu/sampler.h"

namespace lockstep::engine {
namespace {

// Where the MTP KV of one sequence is valid: the pool for [0, draft_end), then the
// spec buffer (K + 1 positions from draft_end) for [draft_end, draft_end + spec_len),
// rows of confirmed tokens computed from the target's hidden states only.
struct MtpKvState final : spec::DraftSequenceState {
  uint64_t generation = 0;
  int64_t draft_end = 0;
  int spec_len = 0;
  std::unique_ptr<SpecBuffer> spec_kv;
};

}  // namespace

MtpDrafter::MtpDrafter(const MtpModel* module, KvPoolView pool, int num_draft_tokens,
                       ThreadPool* threads)
    : module_(module),
      pool_(pool),
      num_draft_tokens_(num_draft_tokens),
      threads_(threads),
      zeros_(module->hidden_size(), 0.0f) {}

std::unique_ptr<spec::DraftSequenceState> MtpDrafter::NewState() const {
  auto state = std::make_unique<MtpKvState>();
  state->spec_kv = module_->layer().NewSpecBuffer(num_draft_tokens_ + 1);
  return state;
}

const float* MtpDrafter::HiddenOf(const spec::DraftQuery& query, int64_t position) const {
  const int64_t row = position - query.hidden_first_position;
  if (query.target_hidden != nullptr && row >= 0 && row < query.hidden_rows) {
    return query.target_hidden + static_cast<size_t>(row) * module_->hidden_size();
  }
  const auto it = pending_.find(query.kv_generation);
  if (it != pending_.end() && it->second.position == position) return it->second.hidden.data();
  return zeros_.data();
}

void MtpDrafter::KeepPending(const spec::DraftQuery& query, int64_t position) {
  const int64_t row = position - query.hidden_first_position;
  if (query.target_hidden == nullptr || row < 0 || row >= query.hidden_rows) return;
  const float* hidden = query.target_hidden + static_cast<size_t>(row) * module_->hidden_size();
  Pending& pending = pending_[query.kv_generation];
  pending.position = position;
  pending.hidden.assign(hidden, hidden + module_->hidden_size());
  pending_order_.push_back(query.kv_generation);
  while (static_cast<int>(pending_.size()) > kMaxPendingChunks) {
    pending_.erase(pending_order_.front());
    pending_order_.pop_front();
  }
  // Entries erased by use leave their names behind; keep the queue bounded too.
  if (pending_order_.size() > 2 * static_cast<size_t>(kMaxPendingChunks)) {
    std::deque<uint64_t> live;
    for (uint64_t g : pending_order_) {
      if (pending_.contains(g)) live.push_back(g);
    }
    pending_order_.swap(live);
  }
}

absl::Status MtpDrafter::Propose(absl::Span<const spec::DraftQuery> queries,
                                 absl::Span<std::vector<int32_t>> drafts) {
  if (drafts.size() != queries.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("MTP drafter: ", queries.size(), " queries but ", drafts.size(), " outputs"));
  }
  arena_.Reset();
  const bool collectives = module_->collectives_per_forward() > 0;
  const int vocab = module_->vocab_size();
  const int hidden = module_->hidden_size();
  const int spec_tokens = num_draft_tokens_ + 1;
  members_.clear();
  seqs_.clear();
  for (size_t q = 0; q < queries.size(); ++q) {
    drafts[q].clear();
    const spec::DraftQuery& query = queries[q];
    if (query.kv_generation == 0 || query.tokens.empty()) continue;  // no draft KV
    auto* state = static_cast<MtpKvState*>(query.state);
    const int64_t start = query.first_position;
    Member& m = members_.emplace_back();
    m.query = static_cast<int>(q);
    m.next_start =
        start + static_cast<int64_t>(query.tokens.size()) - (query.ends_with_sampled ? 1 : 0);
    // Rows up to the newest token (a chunk before the prompt's last: its last token).
    m.row_end = query.ends_with_sampled ? m.next_start + 1 : m.next_start;
    // The newest token's row, at the new history, stays out of the pool (the host may
    // shrink it there).
    m.new_end = std::min(m.next_start, query.kv_limit);
    m.propose = query.ends_with_sampled ? std::clamp(query.max_drafts, 0, num_draft_tokens_) : 0;
    // The MTP KV is valid below `start` (a chunk, a seed), or as the state says.
    int64_t valid = start;
    if (state != nullptr && !query.restart && state->generation == query.kv_generation) {
      // Held rows below new_end move into the pool, the others to the spec buffer's new
      // base (new_end >= draft_end: forward, in place).
      const SequenceKv held{query.kv_blocks, state->draft_end, state->spec_kv->data(),
                            spec_tokens};
      const int64_t held_end = state->draft_end + state->spec_len;
      const int64_t copy_end = std::min(held_end, m.new_end);
      if (copy_end > state->draft_end) {
        module_->layer().CopyKv(pool_, held, SequenceKv{query.kv_blocks}, state->draft_end,
                                copy_end);
      }
      if (held_end > m.new_end && m.new_end > state->draft_end) {
        module_->layer().CopyKv(
            pool_, held,
            SequenceKv{query.kv_blocks, m.new_end, state->spec_kv->data(), spec_tokens},
            m.new_end, held_end);
      }
      valid = std::max(held_end, state->draft_end);
    }
    m.first_row = std::max(valid, start);
    seqs_.push_back(SequenceKv{query.kv_blocks, m.new_end,
                               state == nullptr ? nullptr : state->spec_kv->data(), spec_tokens});
  }
  const int num_seqs = static_cast<int>(seqs_.size());
  const float* previous_out = nullptr;  // the last pass's output hidden states
  inputs_.clear();
  for (int pass = 0; pass < num_draft_tokens_; ++pass) {
    rows_.clear();
    logit_rows_.clear();
    inputs_.clear();
    for (int s = 0; s < num_seqs; ++s) {
      Member& m = members_[s];
      const spec::DraftQuery& query = queries[m.query];
      if (pass == 0) {
        for (int64_t p = m.first_row; p < m.row_end; ++p) {
          if (p + 1 == m.row_end && m.propose > 0) {
            logit_rows_.push_back(static_cast<int32_t>(rows_.size()));
          }
          inputs_.push_back(HiddenOf(query, p - 1));
          rows_.push_back({query.tokens[p - query.first_position], p, s});
        }
        m.last_row = m.propose > 0 ? static_cast<int>(rows_.size()) - 1 : -1;
      } else if (pass < m.propose) {
        logit_rows_.push_back(static_cast<int32_t>(rows_.size()));
        inputs_.push_back(previous_out + static_cast<size_t>(m.last_row) * hidden);
        m.last_row = static_cast<int>(rows_.size());
        rows_.push_back({drafts[m.query][pass - 1], m.next_start + pass, s});
      }
    }
    if (rows_.empty() && !collectives) continue;
    const size_t num_rows = rows_.size() + 1;  // never a zero-size allocation
    float* in = arena_.Alloc<float>(num_rows * hidden);
    float* out = arena_.Alloc<float>(num_rows * hidden);
    for (size_t i = 0; i < inputs_.size(); ++i) {
      std::memcpy(in + i * hidden, inputs_[i], hidden * sizeof(float));
    }
    // A pass of one row per sequence is decode-shaped (a device may replay a graph).
    bool context = false;
    for (int s = 0; pass == 0 && s < num_seqs; ++s) {
      context = context || members_[s].row_end - members_[s].first_row > 1;
    }
    StepAgreement agreement{static_cast<int64_t>(rows_.size()), context, false};
    if (pass > 0 && shape_.agreed && !shape_.any_context) {
      // At most one row per sequence with draft KV, each of which has at least one
      // target row on this rank: within the vote's bound on every rank.
      agreement = {shape_.max_target_rows, false, true};
    }
    ASSIGN_OR_RETURN(const float* logits,
                     module_->Forward({rows_, seqs_, logit_rows_, agreement}, in, out, pool_,
                                      arena_, threads_));
    previous_out = out;
    int next_logit = 0;
    for (int s = 0; s < num_seqs; ++s) {
      const Member& m = members_[s];
      if (pass >= m.propose) continue;
      drafts[m.query].push_back(ArgMax(logits + static_cast<size_t>(next_logit++) * vocab, vocab));
    }
  }
  for (const Member& m : members_) {
    const spec::DraftQuery& query = queries[m.query];
    auto it = pending_.find(query.kv_generation);
    if (it != pending_.end() && it->second.position < m.row_end) pending_.erase(it);  // used
    auto* state = static_cast<MtpKvState*>(query.state);
    if (state == nullptr) {  // a context chunk before the prompt's last
      KeepPending(query, m.row_end - 1);
      continue;
    }
    state->generation = query.kv_generation;
    state->draft_end = m.new_end;
    state->spec_len = static_cast<int>(m.row_end - m.new_end);
  }
  return absl::OkStatus();
}

}  // namespace lockstep::engine
