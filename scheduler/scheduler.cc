#include "scheduler/scheduler.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "common/check.h"
#include "spec_decode/budget.h"

namespace lockstep::sched {
namespace {

bool IsGenerationCandidate(const Request& r) {
  return r.state() == RequestState::kGenerationInProgress ||
         r.state() == RequestState::kGenTransferComplete;
}

// May be paused to make room: holds KV that recompute can rebuild, and is not between
// ranks or about to finish.
bool IsPausable(const Request& r) {
  return !r.is_dummy() && (r.state() == RequestState::kContextInit ||
                           r.state() == RequestState::kGenerationInProgress ||
                           r.state() == RequestState::kGenTransferComplete);
}

}  // namespace

Scheduler::Scheduler(const SchedulerConfig& config, kv::KvManager* kv) : config_(config), kv_(kv) {
  LOCKSTEP_CHECK_OK(config_.Validate());
}

int32_t Scheduler::DraftTokensFor(const Request& request) const {
  return config_.speculative.StepDraftTokens(request.is_dummy() ? nullptr : &request.dynamic_k());
}

int32_t Scheduler::GrantedDraftTokens(const Request& request, int64_t position) const {
  return spec::CapDraftTokens(DraftTokensFor(request), position, config_.max_position);
}

int64_t Scheduler::CountSchedulable(absl::Span<Request* const> active) {
  int64_t n = 0;
  for (const Request* r : active) {
    if (!r->is_dummy() && IsSchedulable(r->state())) ++n;
  }
  return n;
}

int64_t Scheduler::CountActive(absl::Span<Request* const> active) {
  int64_t n = 0;
  for (const Request* r : active) {
    if (!r->is_dummy() && !r->finished()) ++n;
  }
  return n;
}

namespace {

// Unpaired draft pool in use: the draft mirror is sized separately from the target.
bool UnpairedDraft(const kv::KvManager& kv, const SchedulerConfig& config) {
  return kv.config().draft_mode == kv::DraftMode::kUnpaired && config.speculative.enabled();
}

// Grows the target cache of `request` to `target_cap` (a paired draft follows) and, with
// an unpaired draft pool, its mirror to `draft_cap` (admitting the mirror first; a new
// mirror of a cache just created from `prompt` reuses its own prefix of it). All or
// nothing; what succeeded is recorded in `rollback`.
// `old_target` is the target capacity now.
bool GrowCaches(kv::KvManager& kv, const SchedulerConfig& config, RequestId id, int64_t old_target,
                int64_t target_cap, int64_t draft_cap, Rollback* rollback,
                absl::Span<const int32_t> prompt = {}) {
  if (target_cap > old_target) {
    if (!kv.Resize(id, kv::PoolKind::kTarget, target_cap, std::nullopt).ok()) return false;
  }
  if (UnpairedDraft(kv, config)) {
    // A mirror admitted for a live request stays with it (it is released with the
    // request); one admitted for a cache created this step goes with that cache.
    const bool admitted = kv.AdmitMirror(id, prompt).ok();
    const std::optional<kv::CacheInfo> draft = kv.Info(id, kv::PoolKind::kDraft);
    const bool grown = admitted && draft.has_value() &&
                       (draft_cap <= draft->capacity ||
                        kv.Resize(id, kv::PoolKind::kDraft, draft_cap, std::nullopt).ok());
    if (!grown) {
      if (target_cap > old_target) {
        LOCKSTEP_CHECK_OK(kv.Resize(id, kv::PoolKind::kTarget, old_target, std::nullopt));
      }
      return false;
    }
    if (draft_cap > draft->capacity) {
      rollback->RecordGrow(id, kv::PoolKind::kDraft, draft->capacity);
    }
  }
  if (target_cap > old_target) rollback->RecordGrow(id, kv::PoolKind::kTarget, old_target);
  return true;
}

}  // namespace

bool Scheduler::GrowBy(Request* request, int64_t tokens, Rollback* rollback) {
  const RequestId id = request->id();
  std::optional<kv::CacheInfo> target = kv_->Info(id, kv::PoolKind::kTarget);
  if (!target.has_value()) {
    // Only the dummy reaches generation without a cache: it gets one each step.
    if (!kv_->CreateCache(id).ok()) return false;
    rollback->RecordCreate(id);
    target = kv_->Info(id, kv::PoolKind::kTarget);
  }
  int64_t draft_cap = 0;
  if (UnpairedDraft(*kv_, config_)) {
    const std::optional<kv::CacheInfo> draft = kv_->Info(id, kv::PoolKind::kDraft);
    draft_cap = (draft ? draft->capacity : 0) + tokens;
  }
  if (GrowCaches(*kv_, config_, id, target->capacity, target->capacity + tokens, draft_cap,
                 rollback)) {
    return true;
  }
  ++stats_.growth_failures;
  return false;
}

void Scheduler::Pause(Request* request, ScheduleDecision* decision) {
  kv_->Release(request->id());
  request->ResetForRecompute();
  decision->paused.push_back(request);
  ++stats_.paused;
}

template <typename Fits>
bool Scheduler::MakeRoom(const Request* requester, absl::Span<Request* const> active,
                         ScheduleDecision* decision, Fits fits) {
  if (requester->start_order() < 0) return fits();  // holds nothing: younger than all
  while (!fits()) {
    Request* victim = nullptr;
    for (Request* r : active) {
      if (r == requester || !IsPausable(*r) || r->start_order() <= requester->start_order()) {
        continue;
      }
      if (!kv_->Has(r->id(), kv::PoolKind::kTarget)) continue;
      const bool in_batch = std::find(decision->generation.begin(), decision->generation.end(),
                                      r) != decision->generation.end() ||
                            std::any_of(decision->context.begin(), decision->context.end(),
                                        [r](const ScheduledChunk& c) { return c.request == r; });
      if (in_batch) continue;
      if (victim == nullptr || r->start_order() > victim->start_order()) victim = r;
    }
    if (victim == nullptr) return false;
    Pause(victim, decision);
  }
  return true;
}

bool Scheduler::FitsWithoutEviction(const Request& request, absl::Span<Request* const> order,
                                    absl::Span<const int32_t> reuse_from) const {
  const int64_t block = kv_->tokens_per_block(kv::PoolKind::kTarget);
  const int64_t step = config_.generation_step_tokens();
  int64_t reserve = 0;
  bool others = false;
  for (const Request* o : order) {
    if (o == &request || o->is_dummy() || o->finished()) continue;
    const std::optional<kv::CacheInfo> cache = kv_->Info(o->id(), kv::PoolKind::kTarget);
    if (!cache.has_value()) continue;
    others = true;
    const int64_t most = static_cast<int64_t>(o->prompt().size()) + o->sampling().max_tokens + step;
    reserve += (std::max<int64_t>(0, most - cache->capacity) + block - 1) / block * block;
  }
  if (!others) return true;
  // Keys that do not cover `reuse_from` (never, as Schedule makes them) reuse nothing.
  const int64_t own =
      request.context_length() - kv_->ProbePrefix(reuse_from, request.prefix_keys()).value_or(0) +
      std::max<int64_t>(0, request.sampling().max_tokens - request.num_output_tokens()) + step;
  return kv_->CanGrow(request.id(), own + reserve);
}

bool Scheduler::ScheduleDummy(Request* dummy, ScheduleDecision* decision, Rollback* rollback) {
  LOCKSTEP_CHECK(dummy->is_dummy()) << "ScheduleDummy on " << dummy->DebugString();
  const int32_t k = GrantedDraftTokens(*dummy, 0);  // a new cache: history 0
  if (k < 0) return false;
  const spec::Grant grant = spec::GenerationGrant(k, kv_->config().draft_mode);
  if (!GrowBy(dummy, grant.target_tokens, rollback)) return false;
  decision->AddGeneration(dummy, grant);
  return true;
}

ScheduleDecision Scheduler::Schedule(absl::Span<Request* const> active, bool in_flight,
                                     Rollback* rollback) {
  ++stats_.passes;
  ScheduleDecision decision;
  const kv::DraftMode draft_pool = kv_->config().draft_mode;
  auto full = [&] {
    return decision.batch_size() >= config_.max_batch_size ||
           decision.num_tokens >= config_.max_num_tokens;
  };

  // Requests that already hold KV go first, in the order they got it (the oldest can
  // always make room by pausing younger ones, so someone always progresses); requests
  // that hold nothing follow in arrival order.
  auto by_start = [](const Request* a, const Request* b) {
    const int64_t ka = a->start_order() < 0 ? INT64_MAX : a->start_order();
    const int64_t kb = b->start_order() < 0 ? INT64_MAX : b->start_order();
    return ka < kb;
  };
  order_.assign(active.begin(), active.end());
  if (!std::is_sorted(order_.begin(), order_.end(), by_start)) {
    std::stable_sort(order_.begin(), order_.end(), by_start);
  }
  const std::vector<Request*>& order = order_;
  decision.generation.reserve(std::min<size_t>(active.size(), config_.max_batch_size));

  // 1. Generation steps, oldest first.
  for (Request* r : order) {
    if (full()) break;
    if (!IsGenerationCandidate(*r)) continue;
    // The step's last token sits at most at the target capacity (the dummy has none yet).
    const std::optional<kv::CacheInfo> cache = kv_->Info(r->id(), kv::PoolKind::kTarget);
    const int32_t k = GrantedDraftTokens(*r, cache.has_value() ? cache->capacity : 0);
    if (k < 0) continue;  // the step in flight may reach the last position: wait for it
    const spec::Grant grant = spec::GenerationGrant(k, draft_pool);
    const int64_t step_tokens = grant.target_tokens;
    if (decision.num_tokens + step_tokens > config_.max_num_tokens) break;
    if (r->is_dummy()) {
      if (GrowBy(r, step_tokens, rollback)) decision.AddGeneration(r, grant);
      continue;
    }
    bool grown = GrowBy(r, step_tokens, rollback);
    if (!grown &&
        MakeRoom(r, active, &decision, [&] { return kv_->CanGrow(r->id(), step_tokens); })) {
      grown = GrowBy(r, step_tokens, rollback);
    }
    if (!grown) continue;  // refused this step; it keeps its KV, older requests may pause it
    decision.AddGeneration(r, grant);
    decision.num_tokens += step_tokens;
  }

  // 2. Prefill chunks: started ones in start order, then first-come-first-served.
  for (Request* r : order) {
    if (full()) break;
    if (r->state() != RequestState::kContextInit || r->is_dummy() || r->context_remaining() <= 0) {
      continue;
    }
    if (std::find(decision.paused.begin(), decision.paused.end(), r) != decision.paused.end()) {
      continue;  // paused in this pass: try again next step
    }
    const RequestId id = r->id();
    // Prefix blocks brought back from a KV tier are copied in after the batch in
    // flight: the request waits a step, keeping its cache (the kept-cache path below).
    if (kv_->OnboardPending(id)) continue;
    int64_t position = r->context_position();
    bool created = false;
    const absl::Span<const int32_t> reuse_from =
        config_.prefix_reuse ? absl::Span<const int32_t>(r->context_tokens())
                             : absl::Span<const int32_t>();
    // The first chunk of its cache (ScheduledChunk::new_cache): also a cache created in an
    // earlier pass that scheduled nothing of it (its onboard was pending, or no room).
    bool first_chunk = false;
    if (const std::optional<kv::CacheInfo> info = kv_->Info(id, kv::PoolKind::kTarget)) {
      // A cache kept from a step that did not schedule it may hold a reused prefix.
      first_chunk = r->context_position() == 0;
      position = std::max(position, info->history);
    } else {
      // The context's prefix keys, hashed once (later tries hash only blocks it gained):
      // the probe, the device tree's match and the tiers' fetch all read them.
      if (!reuse_from.empty()) kv_->HashPrefix(reuse_from, r->mutable_prefix_keys());
      if (config_.capacity_policy == CapacityPolicy::kGuaranteedNoEvict &&
          !FitsWithoutEviction(*r, order, reuse_from)) {
        break;  // strict FCFS: it waits for room, and nobody younger jumps ahead
      }
      absl::StatusOr<int64_t> reused = kv_->CreateCache(id, reuse_from, r->prefix_keys());
      if (!reused.ok()) break;
      rollback->RecordCreate(id);
      created = true;
      first_chunk = true;
      if (r->start_order() < 0) r->set_start_order(next_start_order_++);
      if (kv_->OnboardPending(id)) continue;
      position = std::max(position, *reused);
    }
    const int64_t remaining = r->context_length() - position;
    const int64_t chunk =
        std::min({remaining, config_.chunk_size, config_.max_num_tokens - decision.num_tokens});
    if (chunk <= 0) break;
    const bool last = chunk == remaining;
    // The first generation step's last token sits right after the context.
    const int32_t k = std::max(GrantedDraftTokens(*r, position + chunk), 0);
    const spec::Grant grant = spec::ContextGrant(chunk, last, k, draft_pool);
    const int64_t target_cap = position + grant.target_tokens;
    const int64_t draft_cap = position + std::max(grant.draft_tokens, grant.target_tokens);
    auto grow = [&] {
      return GrowCaches(*kv_, config_, id, kv_->Info(id, kv::PoolKind::kTarget)->capacity,
                        target_cap, draft_cap, rollback,
                        created ? reuse_from : absl::Span<const int32_t>());
    };
    bool grown = grow();
    if (!grown) {
      ++stats_.growth_failures;
      const int64_t have = kv_->Info(id, kv::PoolKind::kTarget)->capacity;
      if (MakeRoom(r, active, &decision, [&] { return kv_->CanGrow(id, draft_cap - have); })) {
        grown = grow();
      }
    }
    if (!grown) {
      if (created) {
        // A first chunk that does not fit holds nothing: free what its creation took.
        kv_->Release(id);
        r->set_start_order(-1);
      }
      break;  // strict FCFS: nobody younger jumps ahead of this request
    }
    // A new mirror may have reused less than its target: the draft catches up first.
    int64_t draft_position = -1;
    if (created) {
      const std::optional<kv::CacheInfo> draft = kv_->Info(id, kv::PoolKind::kDraft);
      if (draft.has_value() && draft->history < position) draft_position = draft->history;
    }
    decision.context.push_back({r, position, chunk, last, grant, draft_position, first_chunk});
    decision.num_tokens += chunk;
  }

  // 3. KV for generation-only requests waiting for their transfer. Not rolled back.
  for (Request* r : order) {
    if (r->state() != RequestState::kGenInit || kv_->Has(r->id(), kv::PoolKind::kTarget)) {
      continue;
    }
    const int64_t prompt = static_cast<int64_t>(r->prompt().size());
    if (!kv_->CanGrow(r->id(), prompt) || !kv_->CreateCache(r->id()).ok()) break;
    Rollback local;
    if (!GrowCaches(*kv_, config_, r->id(), 0, prompt, prompt, &local)) {
      kv_->Release(r->id());
      break;
    }
    local.Commit();
    if (r->start_order() < 0) r->set_start_order(next_start_order_++);
    decision.transfer_receives.push_back(r);
  }

  if (decision.empty() && !in_flight && CountSchedulable(active) > 0) {
    decision.no_progress = true;
    ++stats_.no_progress;
  }
  return decision;
}

}  // namespace lockstep::sched
