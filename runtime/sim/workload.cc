#include "runtime/sim/workload.h"

#include <random>

namespace lockstep::sim {
namespace {

class Draws {
 public:
  explicit Draws(uint64_t seed) : rng_(seed) {}
  int64_t Uniform(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(rng_() % static_cast<uint64_t>(hi - lo + 1));
  }
  double Unit() { return static_cast<double>(rng_() >> 11) * (1.0 / 9007199254740992.0); }
  std::vector<int32_t> Tokens(int64_t n) {
    std::vector<int32_t> tokens;
    for (int64_t p = 0; p < n; ++p) tokens.push_back(static_cast<int32_t>(rng_() % 256));
    return tokens;
  }
  std::mt19937_64& rng() { return rng_; }

 private:
  std::mt19937_64 rng_;
};

// Everything but the arrival and the prompt: sampling, pins, the request type (a
// generation-only request carries what its context leg produced), cancels.
SimRequest MakeRequest(const WorkloadConfig& config, int64_t index, std::vector<int32_t> prompt,
                       int num_ranks, int num_draft_tokens, const engine::FakeEngine& engine,
                       Draws& draws) {
  SimRequest r;
  exec::NewRequestSpec& s = r.spec;
  s.id = RequestId(index + 1);
  s.prompt = std::move(prompt);
  const int64_t length = static_cast<int64_t>(s.prompt.size());
  s.sampling.max_tokens = static_cast<int32_t>(draws.Uniform(config.min_output, config.max_output));
  s.sampling.seed = draws.rng()();
  if (draws.Unit() < config.pinned_fraction) {
    s.pinned_rank = static_cast<int32_t>(draws.rng()() % static_cast<uint64_t>(num_ranks));
  }
  if (config.generation_only) {
    s.type = sched::RequestType::kGenerationOnly;
    sched::ContextSource c;
    c.instance = "ctx-sim";
    c.rank = static_cast<int32_t>(draws.rng()() % 2);
    c.address = "sim";
    c.remote_id = s.id;
    c.first_token = engine.TargetToken(s.sampling.seed, length);
    c.first_drafts = engine.ContextDrafts(s.sampling.seed, s.prompt, num_draft_tokens);
    s.context_source = std::move(c);
  } else if (config.context_only) {
    s.type = sched::RequestType::kContextOnly;
  }
  if (draws.Unit() < config.cancel_fraction) r.cancel_after_steps = draws.Uniform(0, 40);
  return r;
}

}  // namespace

std::vector<SimRequest> GenerateWorkload(const WorkloadConfig& config, uint64_t seed, int num_ranks,
                                         int num_draft_tokens, const engine::FakeEngine& engine) {
  Draws draws(seed);
  std::exponential_distribution<double> gap(config.arrival_rate > 0 ? config.arrival_rate : 1);
  std::vector<SimRequest> out;
  absl::Duration t;
  auto next_arrival = [&] {
    if (config.arrival_rate > 0) t += absl::Seconds(gap(draws.rng()));
    return t;
  };
  if (config.conversations <= 0) {
    out.reserve(config.num_requests);
    for (int64_t i = 0; i < config.num_requests; ++i) {
      const absl::Duration arrival = next_arrival();
      std::vector<int32_t> prompt =
          draws.Tokens(draws.Uniform(config.min_prompt, config.max_prompt));
      out.push_back(
          MakeRequest(config, i, std::move(prompt), num_ranks, num_draft_tokens, engine, draws));
      out.back().arrival = arrival;
    }
    return out;
  }
  const std::vector<int32_t> system = draws.Tokens(config.system_prompt);
  for (int32_t c = 0; c < config.conversations; ++c) {
    const absl::Duration start = next_arrival();
    const int64_t turns = draws.Uniform(config.min_turns, config.max_turns);
    std::vector<int32_t> history = system;
    for (int64_t turn = 0; turn < turns; ++turn) {
      const std::vector<int32_t> user =
          draws.Tokens(draws.Uniform(config.min_prompt, config.max_prompt));
      history.insert(history.end(), user.begin(), user.end());
      const int64_t index = static_cast<int64_t>(out.size());
      out.push_back(
          MakeRequest(config, index, history, num_ranks, num_draft_tokens, engine, draws));
      SimRequest& r = out.back();
      r.arrival = start;
      if (turn > 0) {
        r.follows = index - 1;
        r.think_steps = draws.Uniform(0, config.max_think_steps);
      }
      // The answer the client got (the engine's token function) joins the history.
      const int64_t length = static_cast<int64_t>(history.size());
      for (int32_t i = 0; i < r.spec.sampling.max_tokens; ++i) {
        history.push_back(engine.TargetToken(r.spec.sampling.seed, length + i));
      }
    }
  }
  return out;
}

}  // namespace lockstep::sim
