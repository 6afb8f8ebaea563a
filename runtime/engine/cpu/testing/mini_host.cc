#include "runtime/engine/cpu/testing/mini_host.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/check.h"
#include "common/status_macros.h"
#include "spec_decode/budget.h"

namespace lockstep::engine::testing {
namespace {

spec::SpeculativeConfig SpeculativeOf(const HostOptions& o) {
  spec::SpeculativeConfig s;
  if (o.num_draft_tokens > 0) {
    s.method = o.spec_method;
    s.num_draft_tokens = o.num_draft_tokens;
    s.dynamic = o.dynamic;
  }
  LOCKSTEP_CHECK_OK(s.Validate());
  return s;
}

}  // namespace

MiniHost::MiniHost(ModelEngine* engine, HostPool* target, HostPool* draft, HostOptions options)
    : engine_(engine),
      target_(target),
      draft_(draft),
      options_(options),
      speculative_(SpeculativeOf(options)),
      draft_mode_(draft != nullptr ? kv::DraftMode::kUnpaired : kv::DraftMode::kNone) {
  const spec::Grant dummy =
      spec::GenerationGrant(speculative_.StepDraftTokens(nullptr), draft_mode_);
  LOCKSTEP_CHECK_OK(target_->Cover(dummy_blocks_, dummy.target_tokens));
  if (draft_ != nullptr) LOCKSTEP_CHECK_OK(draft_->Cover(dummy_draft_blocks_, dummy.draft_tokens));
}

void MiniHost::Add(HostRequest request) {
  const int64_t id = request.id;
  Seq& seq = seqs_[id];
  seq.request = std::move(request);
  seq.generation = next_generation_++;
  seq.draft_generation = draft_ != nullptr ? next_generation_++ : 0;
  seq.dynamic_k = speculative_.MakeDynamicK();
  order_.push_back(id);
}

bool MiniHost::Done() const {
  if (!in_flight_.empty()) return false;
  for (const auto& [id, seq] : seqs_) {
    if (!seq.released) return false;
  }
  return true;
}

absl::Status MiniHost::Grow(Seq& seq, int64_t target_tokens, int64_t draft_tokens) {
  RETURN_IF_ERROR(target_->Cover(seq.blocks, target_tokens));
  if (seq.draft_generation != 0) RETURN_IF_ERROR(draft_->Cover(seq.draft_blocks, draft_tokens));
  return absl::OkStatus();
}

void MiniHost::Release(Seq& seq, Batch& batch) {
  batch.released.push_back(kv::BlockRefs{RequestId(seq.request.id), seq.generation, seq.blocks,
                                         seq.draft_generation, seq.draft_blocks});
  for (BlockId block : seq.blocks) target_->Free(block);
  for (BlockId block : seq.draft_blocks) draft_->Free(block);
  seq.blocks.clear();
  seq.draft_blocks.clear();
  seq.released = true;
}

absl::Status MiniHost::Launch(bool pad) {
  Batch batch;
  batch.step = StepId(next_step_++);
  const bool draft_kv = options_.spec_method == spec::Method::kDraftModel ||
                        options_.spec_method == spec::Method::kMtp;
  std::vector<int64_t> ids;
  for (int64_t id : order_) {
    Seq& seq = seqs_[id];
    if (seq.finished && seq.in_flight == 0 && !seq.released) Release(seq, batch);
  }
  for (int64_t id : order_) {
    if (static_cast<int>(ids.size()) == options_.max_batch) break;
    Seq& seq = seqs_[id];
    if (seq.finished || seq.released) continue;
    if (seq.in_flight > (options_.overlap ? 1 : 0)) continue;
    const int64_t prompt = static_cast<int64_t>(seq.request.prompt.size());
    const kv::BlockRefs kv{RequestId(id), seq.generation, {}, seq.draft_generation, {}};
    const int k = speculative_.StepDraftTokens(&seq.dynamic_k);
    if (seq.prefilled < prompt) {
      const int64_t n = std::min<int64_t>(options_.chunk_size, prompt - seq.prefilled);
      const bool last = seq.prefilled + n == prompt;
      const spec::Grant grant = spec::ContextGrant(n, last, k, draft_mode_);
      RETURN_IF_ERROR(
          Grow(seq, seq.prefilled + grant.target_tokens, seq.prefilled + grant.draft_tokens));
      // The n-gram drafter, the penalties and min_tokens see the whole sequence.
      if (last && (!draft_kv || seq.request.sampling.UsesHistory())) {
        batch.context.emplace_back().earlier_tokens.assign(
            seq.request.prompt.begin(), seq.request.prompt.begin() + seq.prefilled);
      } else {
        batch.context.emplace_back();
      }
      ContextChunk& chunk = batch.context.back();
      chunk.kv = kv;
      chunk.tokens.assign(seq.request.prompt.begin() + seq.prefilled,
                          seq.request.prompt.begin() + seq.prefilled + n);
      chunk.position = seq.prefilled;
      chunk.last_chunk = last;
      chunk.sampling = seq.request.sampling;
      chunk.num_draft_tokens = grant.num_draft_tokens;
      seq.target_limit = seq.draft_limit = seq.prefilled + n;
      seq.prefilled += n;
      if (last) seq.history = seq.bound = prompt;
    } else {
      const spec::Grant grant = spec::GenerationGrant(k, draft_mode_);
      RETURN_IF_ERROR(Grow(seq, seq.bound + grant.target_tokens, seq.bound + grant.draft_tokens));
      GenerationStep& step = batch.generation.emplace_back();
      step.kv = kv;
      step.num_draft_tokens = grant.num_draft_tokens;
      step.sampling = seq.request.sampling;
      seq.target_limit = seq.bound + 1 + k;
      seq.draft_limit = seq.bound + k;
      seq.bound += 1 + k;
      seq.step_k.push_back(k);
    }
    ++seq.in_flight;
    ids.push_back(id);
  }
  // Block tables as granted for this step.
  for (ContextChunk& chunk : batch.context) {
    chunk.kv.blocks = seqs_[chunk.kv.id.value()].blocks;
    chunk.kv.draft_blocks = seqs_[chunk.kv.id.value()].draft_blocks;
  }
  for (GenerationStep& step : batch.generation) {
    step.kv.blocks = seqs_[step.kv.id.value()].blocks;
    step.kv.draft_blocks = seqs_[step.kv.id.value()].draft_blocks;
  }
  if (ids.empty() && pad) {
    GenerationStep& step = batch.generation.emplace_back();
    step.kv = kv::BlockRefs{RequestId(options_.dummy_id), next_generation_++, dummy_blocks_,
                            draft_ != nullptr ? next_generation_++ : 0, dummy_draft_blocks_};
    step.seed = SequenceSeed{0, 0, {}, {}};
    step.num_draft_tokens = speculative_.StepDraftTokens(nullptr);
    step.is_dummy = true;
  }
  steps_.push_back(batch.step);
  in_flight_.push_back(std::move(ids));
  engine_->Launch(std::move(batch));
  return absl::OkStatus();
}

absl::Status MiniHost::Collect() {
  const StepId step = steps_.front();
  steps_.pop_front();
  in_flight_.pop_front();
  ASSIGN_OR_RETURN(BatchResult result, engine_->Collect(step, absl::Seconds(60)));
  if (result.step != step) return absl::InternalError("engine returned another step");
  for (const SequenceResult& res : result.sequences) {
    if (!res.status.ok()) return res.status;  // a refused sequence: the host failed
    if (res.id.value() == options_.dummy_id) continue;
    Seq& seq = seqs_.at(res.id.value());
    --seq.in_flight;
    if (!options_.overlap) {
      pools_clean_ =
          pools_clean_ && target_->Untouched(seq.blocks, seq.target_limit, INT64_MAX) &&
          (draft_ == nullptr || draft_->Untouched(seq.draft_blocks, seq.draft_limit, INT64_MAX));
    }
    if (res.tokens.empty()) continue;  // a context chunk before the last
    ++seq.out.steps;
    if (seq.first_token) {  // a generation step
      const int k = seq.step_k.front();
      seq.step_k.pop_front();
      if (res.num_proposed > k || res.num_accepted > res.num_proposed) {
        return absl::InternalError(absl::StrCat("request ", res.id.value(), ": ",
                                                res.num_accepted, " of ", res.num_proposed,
                                                " drafts accepted in a step with K=", k));
      }
      seq.history += static_cast<int64_t>(res.tokens.size());
      seq.bound -= (1 + k) - static_cast<int64_t>(res.tokens.size());
      seq.out.proposed += res.num_proposed;
      seq.out.accepted += res.num_accepted;
      seq.dynamic_k.Observe(res.num_proposed, res.num_accepted);
    }
    seq.first_token = true;
    for (size_t i = 0; i < res.tokens.size() && !seq.finished; ++i) {
      seq.out.tokens.push_back(res.tokens[i]);
      if (!res.logprobs.empty()) seq.out.logprobs.push_back(res.logprobs[i]);
      const sched::SamplingParams& sampling = seq.request.sampling;
      seq.finished = static_cast<int32_t>(seq.out.tokens.size()) >= sampling.max_tokens ||
                     (!sampling.ignore_eos && res.tokens[i] == options_.eos_token_id);
    }
  }
  // Nothing may rely on KV at or beyond the history: poison it (without overlap,
  // where no step of the sequence is in flight).
  for (auto& [id, seq] : seqs_) {
    if (seq.released || seq.in_flight > 0 || !seq.first_token) continue;
    target_->Scribble(seq.blocks, seq.history, INT64_MAX);
    if (draft_ != nullptr) draft_->Scribble(seq.draft_blocks, seq.history, INT64_MAX);
  }
  // Checking every free block is costly: do it every few steps and when done (a write
  // into a free block stays until the block is handed out again).
  if (++collects_ % kCheckEvery == 0 || Done()) CheckPools();
  return absl::OkStatus();
}

void MiniHost::CheckPools() {
  pools_clean_ = pools_clean_ && target_->FreeBlocksUntouched() &&
                 (draft_ == nullptr || draft_->FreeBlocksUntouched());
}

absl::Status MiniHost::Run() {
  for (int launches = 0;; ++launches) {
    if (launches > 100000) return absl::InternalError("MiniHost::Run does not finish");
    const bool all_released = std::all_of(seqs_.begin(), seqs_.end(),
                                          [](const auto& entry) { return entry.second.released; });
    if (all_released) {
      while (in_flight() > 0) RETURN_IF_ERROR(Collect());
      if (Done()) return absl::OkStatus();
    }
    RETURN_IF_ERROR(Launch(/*pad=*/false));
    if (!options_.overlap || in_flight() > 1) RETURN_IF_ERROR(Collect());
  }
}

}  // namespace lockstep::engine::testing
