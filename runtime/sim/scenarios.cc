#include "runtime/sim/scenarios.h"

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::sim {

SimConfig Dep4SmallBatch(int32_t max_batch_size, sched::DummyPolicy policy, uint64_t seed,
                         int64_t num_requests) {
  SimConfig c;
  c.seed = seed;
  c.ranks = 4;
  c.role = sched::InstanceRole::kGeneration;
  c.scheduler.max_batch_size = max_batch_size;
  // As in the anchor, the per-rank cap follows the batch size, and requests still
  // receiving KV count toward it.
  c.scheduler.max_num_active_requests = max_batch_size;
  c.scheduler.max_num_tokens = 256;
  c.scheduler.speculative = {.method = spec::Method::kDraftModel, .num_draft_tokens = 3};
  c.scheduler.dummy_policy = policy;
  c.scheduler.prefix_reuse = false;
  c.draft_mode = kv::DraftMode::kUnpaired;
  c.tokens_per_block = 16;
  c.num_blocks = 64 + 16 * max_batch_size;
  c.draft_num_blocks = c.num_blocks;
  c.workload.num_requests = num_requests;
  c.workload.generation_only = true;
  c.workload.arrival_rate = 400.0 * max_batch_size;
  c.workload.min_prompt = 16;
  c.workload.max_prompt = 128;
  c.workload.min_output = 8;
  c.workload.max_output = 48;
  c.transfer_min_latency = absl::Milliseconds(2);
  c.transfer_max_latency = absl::Milliseconds(40);
  c.draft_acceptance = 0.6;
  return c;
}

namespace {

// The longest sequence (prompt + output) a workload can send.
int64_t LongestSequence(const WorkloadConfig& w) {
  const int64_t turn = w.max_prompt + w.max_output;
  if (w.conversations <= 0) return turn;
  return w.system_prompt + int64_t{std::max(w.min_turns, w.max_turns)} * turn;
}

}  // namespace

SimConfig RandomConfig(uint64_t seed) {
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ull + 17);
  auto pick = [&](int lo, int hi) { return lo + static_cast<int>(rng() % (hi - lo + 1)); };
  SimConfig c;
  c.seed = seed;
  c.ranks = pick(2, 8);
  c.scheduler.max_batch_size = pick(1, 16);
  c.scheduler.max_num_active_requests = c.scheduler.max_batch_size + pick(0, 8);
  const int k = pick(0, 4);
  c.scheduler.speculative.num_draft_tokens = k;
  c.scheduler.speculative.method = k > 0 ? spec::Method::kDraftModel : spec::Method::kNone;
  c.scheduler.max_num_tokens = std::max<int64_t>(64, 16 * c.scheduler.max_batch_size);
  c.scheduler.chunk_size = pick(0, 1) ? 32 : 256;
  c.scheduler.dummy_policy =
      pick(0, 1) ? sched::DummyPolicy::kReserved : sched::DummyPolicy::kCompat;
  c.draft_mode = k == 0 ? kv::DraftMode::kNone
                        : (pick(0, 1) ? kv::DraftMode::kPaired : kv::DraftMode::kUnpaired);
  c.scheduler.prefix_reuse = pick(0, 3) != 0;  // on in every draft mode
  c.role = pick(0, 1) ? sched::InstanceRole::kGeneration : sched::InstanceRole::kAggregated;
  c.workload.generation_only = c.role == sched::InstanceRole::kGeneration;
  c.workload.num_requests = pick(40, 160);
  c.workload.arrival_rate = pick(0, 3) == 0 ? 0 : 300.0 * c.ranks;
  c.workload.min_prompt = pick(1, 16);
  c.workload.max_prompt = c.workload.min_prompt + pick(0, 120);
  c.workload.min_output = pick(1, 8);
  c.workload.max_output = c.workload.min_output + pick(0, 40);
  c.tokens_per_block = pick(0, 1) ? 16 : 8;
  // Sometimes tight KV: enough for one longest request plus slack, to force pauses.
  auto longest_blocks = [&] {
    return static_cast<int32_t>((LongestSequence(c.workload) + 4 * (1 + k)) / c.tokens_per_block +
                                2);
  };
  const bool tight_kv = pick(0, 2) == 0;
  const int32_t kv_slack = tight_kv ? pick(2, 8) : pick(4, 16);
  auto size_pools = [&] {
    c.num_blocks = tight_kv ? longest_blocks() + kv_slack : longest_blocks() * kv_slack;
    c.draft_num_blocks = c.num_blocks;
  };
  size_pools();
  c.draft_acceptance = 0.2 + 0.2 * pick(0, 3);
  if (pick(0, 1)) {  // faults on
    c.transfer_failure_rate = c.workload.generation_only ? 0.05 : 0.0;
    c.workload.cancel_fraction = 0.05;
    for (int i = 0; i < 4; ++i) {
      SimFault f;
      f.kind = SimFault::Kind::kVeto;
      f.rank = pick(0, c.ranks - 1);
      f.step = pick(1, 200);
      c.faults.push_back(f);
    }
  }
  // Drawn last, so the draws above (and the configurations of existing seeds) stay.
  if (c.role == sched::InstanceRole::kAggregated && pick(0, 2) == 0) {
    c.role = sched::InstanceRole::kContext;
    c.workload.context_only = true;
    if (!c.faults.empty()) {
      c.send_refusal_rate = 0.1;
      c.transfer_failure_rate = 0.05;  // sends that fail after the hand-off
    }
  }
  // The drafter (n-gram: no draft pool) and dynamic K, drawn after everything above.
  if (k > 0) {
    if (pick(0, 2) == 0) {
      c.scheduler.speculative.method = spec::Method::kNgram;
      c.draft_mode = kv::DraftMode::kNone;
    }
    c.scheduler.speculative.dynamic = pick(0, 1) == 1;
  }
  // Multi-turn conversations over a shared system prompt (what prefix reuse is for),
  // follow-ups sometimes hinted to the rank that answered the previous turn; and a draft
  // pool of its own size (an unpaired mirror's tree then loses prefixes its target
  // keeps). Drawn last.
  if (pick(0, 1) == 1) {
    WorkloadConfig& w = c.workload;
    w.conversations = pick(2, 12);
    w.min_turns = 2;
    w.max_turns = pick(2, 5);
    w.system_prompt = pick(8, 96);
    w.max_think_steps = pick(0, 8);
    w.hint_followups = pick(0, 1) == 1;
    size_pools();
  }
  if (c.draft_mode == kv::DraftMode::kUnpaired && pick(0, 1) == 1) {
    c.draft_num_blocks = std::min(c.num_blocks, longest_blocks() + pick(2, 8));
  }
  // MTP instead of the draft model over a paired pool (the model's own module: its KV
  // in a draft pool paired with the target's blocks, every pad dummy, rollback and
  // release through the paired mirror). Drawn last.
  if (c.scheduler.speculative.method == spec::Method::kDraftModel &&
      c.draft_mode == kv::DraftMode::kPaired && pick(0, 1) == 1) {
    c.scheduler.speculative.method = spec::Method::kMtp;
  }
  // A host KV tier below a tiny device pool (tiers need prefix reuse and no draft pool):
  // evicted prefixes are copied down and brought back. Drawn last.
  if (c.draft_mode == kv::DraftMode::kNone && c.scheduler.prefix_reuse && pick(0, 2) == 0) {
    c.num_blocks = longest_blocks() + pick(2, 6);
    c.host_tier_blocks = pick(4, 4 * c.num_blocks);
  }
  // Admission that keeps room for every holder to finish (no pauses for new requests;
  // a lone request is still admitted). Drawn last.
  if (pick(0, 2) == 0) c.scheduler.capacity_policy = sched::CapacityPolicy::kGuaranteedNoEvict;
  return c;
}

FleetConfig RandomFleetConfig(uint64_t seed) {
  std::mt19937_64 rng(seed * 0xbf58476d1ce4e5b9ull + 29);
  auto pick = [&](int lo, int hi) { return lo + static_cast<int>(rng() % (hi - lo + 1)); };
  FleetConfig f;
  f.sim = RandomConfig(seed);
  // The fleet's router has no two-leg flow: aggregated instances, no transfers.
  f.sim.role = sched::InstanceRole::kAggregated;
  f.sim.workload.generation_only = false;
  f.sim.workload.context_only = false;
  f.sim.transfer_failure_rate = 0;
  f.sim.send_refusal_rate = 0;
  f.sim.ranks = std::min(f.sim.ranks, 4);
  for (SimFault& fault : f.sim.faults) fault.rank %= f.sim.ranks;
  f.instances = pick(2, 4);
  f.migration_limit = pick(1, 3);
  for (int k = pick(1, f.instances - 1); k > 0; --k) {
    f.failures.push_back({.instance = pick(0, f.instances - 1), .step = pick(1, 50)});
  }
  return f;
}

absl::StatusOr<SimConfig> ScenarioByName(absl::string_view name, int32_t max_batch_size,
                                         sched::DummyPolicy policy, uint64_t seed) {
  if (name == "dep4-small-batch") return Dep4SmallBatch(max_batch_size, policy, seed);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown scenario '", name, "' (known: dep4-small-batch)"));
}

}  // namespace lockstep::sim
