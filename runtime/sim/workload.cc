#include "runtime/sim/workload.h"

#include <random>

namespace lockstep::sim {

std::vector<SimRequest> GenerateWorkload(const WorkloadConfig& config, uint64_t seed, int num_ranks,
                                         int num_draft_tokens, const engine::FakeEngine& engine) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
  };
  auto unit = [&] { return static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0); };
  std::exponential_distribution<double> gap(config.arrival_rate > 0 ? config.arrival_rate : 1);
  std::vector<SimRequest> out;
  out.reserve(config.num_requests);
  absl::Duration t;
  for (int64_t i = 0; i < config.num_requests; ++i) {
    if (config.arrival_rate > 0) t += absl::Seconds(gap(rng));
    SimRequest r;
    r.arrival = t;
    exec::NewRequestSpec& s = r.spec;
    s.id = RequestId(i + 1);
    const int64_t prompt = uniform(config.min_prompt, config.max_prompt);
    for (int64_t p = 0; p < prompt; ++p) s.prompt.push_back(static_cast<int32_t>(rng() % 256));
    s.sampling.max_tokens = static_cast<int32_t>(uniform(config.min_output, config.max_output));
    s.sampling.seed = rng();
    if (unit() < config.pinned_fraction) {
      s.pinned_rank = static_cast<int32_t>(rng() % static_cast<uint64_t>(num_ranks));
    }
    if (config.generation_only) {
      s.type = sched::RequestType::kGenerationOnly;
      sched::ContextSource c;
      c.instance = "ctx-sim";
      c.rank = static_cast<int32_t>(rng() % 2);
      c.address = "sim";
      c.remote_id = s.id;
      c.first_token = engine.TargetToken(s.sampling.seed, prompt);
      c.first_drafts = engine.ContextDrafts(s.sampling.seed, s.prompt, num_draft_tokens);
      s.context_source = std::move(c);
    } else if (config.context_only) {
      s.type = sched::RequestType::kContextOnly;
    }
    if (unit() < config.cancel_fraction) r.cancel_after_steps = uniform(0, 40);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace lockstep::sim
