#include "runtime/sim/expert_exchange.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "runtime/comm/in_process_communicator.h"
#include "runtime/engine/model_engine.h"
#include "runtime/eplb/plan.h"
#include "runtime/sim/rank_stack.h"

namespace lockstep::sim {
namespace {

// The rank's engine with the expert exchange in front of each forward it launches.
class ExchangeEngine final : public engine::ModelEngine {
 public:
  ExchangeEngine(std::shared_ptr<ExpertExchange> exchange, int rank, engine::ModelEngine* inner)
      : exchange_(std::move(exchange)), rank_(rank), inner_(inner) {}

  engine::EngineInfo info() const override { return inner_->info(); }

  void Launch(engine::Batch batch) override {
    int64_t rows = 0;
    for (const engine::ContextChunk& chunk : batch.context) {
      rows += static_cast<int64_t>(chunk.tokens.size());
    }
    for (const engine::GenerationStep& g : batch.generation) rows += 1 + g.num_draft_tokens;
    // Every launched forward joins the exchange, with no rows too (as the CPU engine's).
    absl::Status s = exchange_->Forward(rank_, batch.step.value(), rows);
    if (!s.ok()) failed_.emplace_back(batch.step, std::move(s));
    inner_->Launch(std::move(batch));
  }

  absl::StatusOr<engine::BatchResult> Collect(StepId step, absl::Duration timeout) override {
    absl::StatusOr<engine::BatchResult> result = inner_->Collect(step, timeout);
    for (auto it = failed_.begin(); it != failed_.end(); ++it) {
      if (it->first == step && result.ok()) {
        absl::Status s = std::move(it->second);
        failed_.erase(it);
        return s;
      }
    }
    return result;
  }

 private:
  const std::shared_ptr<ExpertExchange> exchange_;
  const int rank_;
  engine::ModelEngine* const inner_;
  std::vector<std::pair<StepId, absl::Status>> failed_;  // the exchange's errors by step
};

double WorstImbalance(const std::vector<int64_t>& computed, int layers, int ranks) {
  double worst = 1;
  for (int l = 0; l < layers; ++l) {
    int64_t total = 0, max = 0;
    for (int r = 0; r < ranks; ++r) {
      const int64_t n = computed[static_cast<size_t>(l) * ranks + r];
      total += n;
      max = std::max(max, n);
    }
    if (total > 0) worst = std::max(worst, static_cast<double>(max) * ranks / total);
  }
  return worst;
}

}  // namespace

std::vector<std::string> PlacementDisagreements(
    const std::vector<std::vector<PlacementEvent>>& per_rank) {
  std::vector<std::string> problems;
  if (per_rank.empty()) return problems;
  const std::vector<PlacementEvent>& want = per_rank[0];
  for (size_t r = 1; r < per_rank.size(); ++r) {
    const std::vector<PlacementEvent>& got = per_rank[r];
    if (got.size() != want.size()) {
      problems.push_back(absl::StrCat("rank ", r, " decided ", got.size(), " rebalances, rank 0 ",
                                      want.size()));
    }
    for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
      const PlacementEvent& a = want[i];
      const PlacementEvent& b = got[i];
      if (a.step != b.step || a.forward != b.forward || a.adopted != b.adopted) {
        problems.push_back(absl::StrCat(
            "rebalance ", i + 1, ": rank 0 ", a.adopted ? "adopted" : "aborted", " at step ",
            a.step, " (forward ", a.forward, "), rank ", r, " ", b.adopted ? "adopted" : "aborted",
            " at step ", b.step, " (forward ", b.forward, ")"));
      } else if (a.placement != b.placement) {
        problems.push_back(absl::StrCat("rebalance ", i + 1, " at step ", a.step, ": rank ", r,
                                        " uses another placement than rank 0"));
      }
    }
  }
  return problems;
}

ExpertExchange::ExpertExchange(const SimEplbConfig& config, uint64_t seed, int ranks)
    : config_(config), seed_(seed), ranks_(ranks), group_(comm::MakeInProcessGroup(ranks)) {
  const eplb::Placement contiguous =
      eplb::ContiguousPlacement(config.num_experts, ranks, config.num_layers);
  states_.resize(ranks);
  for (int r = 0; r < ranks; ++r) {
    mu_.push_back(std::make_unique<absl::Mutex>());
    RankState& s = states_[r];
    s.current = contiguous;
    s.routed.assign(static_cast<size_t>(config.num_layers) * config.num_experts, 0);
    s.computed.assign(static_cast<size_t>(config.num_layers) * ranks, 0);
    s.after.assign(s.computed.size(), 0);
  }
}

std::shared_ptr<ExpertExchange> ExpertExchange::Attach(const SimEplbConfig& config,
                                                       uint64_t seed, int ranks,
                                                       RankStackOptions* options) {
  if (!config.enabled) return nullptr;
  std::shared_ptr<ExpertExchange> exchange(new ExpertExchange(config, seed, ranks));
  options->wrap_engine = [exchange](int rank, engine::ModelEngine* fake) {
    return std::make_unique<ExchangeEngine>(exchange, rank, fake);
  };
  return exchange;
}

absl::Status ExpertExchange::Forward(int rank, int64_t step, int64_t rows) {
  absl::MutexLock lock(mu_[rank].get());
  RankState& s = states_[rank];
  const int layers = config_.num_layers;
  const int experts = config_.num_experts;
  ++s.forwards;
  // Routing: seeded per rank and forward, so a replay routes the same way.
  std::mt19937_64 rng(seed_ * 1000003 + static_cast<uint64_t>(rank) * 7919 +
                      static_cast<uint64_t>(s.forwards));
  std::vector<int64_t> computed(static_cast<size_t>(layers) * ranks_, 0);
  for (int l = 0; l < layers; ++l) {
    const int hot = (3 * l + 1) % experts;
    const std::vector<std::vector<int>> replicas =
        eplb::ReplicaRanks(s.current.layers[l], experts);
    std::vector<int64_t> sent(experts, 0);  // records of each expert so far
    for (int64_t row = 0; row < rows; ++row) {
      std::vector<int> chosen;
      while (static_cast<int>(chosen.size()) < std::min(config_.top_k, experts)) {
        const bool take_hot = chosen.empty() &&
                              std::uniform_real_distribution<double>(0, 1)(rng) < config_.hot_share;
        const int e = take_hot ? hot : static_cast<int>(rng() % experts);
        if (std::find(chosen.begin(), chosen.end(), e) != chosen.end()) continue;
        chosen.push_back(e);
        ++s.routed[static_cast<size_t>(l) * experts + e];
        const std::vector<int>& holders = replicas[e];
        const int dest = holders[(sent[e]++ + rank) % static_cast<int64_t>(holders.size())];
        ++computed[static_cast<size_t>(l) * ranks_ + dest];
      }
    }
  }
  // The exchange: every rank learns how many records each rank computes.
  absl::Status status = group_[rank]->AllReduce(absl::MakeSpan(computed), comm::ReduceOp::kSum,
                                                {config_.collective_timeout, "eplb.exchange"});
  if (!status.ok()) return status;
  for (size_t i = 0; i < computed.size(); ++i) s.computed[i] += computed[i];
  if (s.forwards % config_.window != 0) return absl::OkStatus();
  return EndWindow(rank, step, s);
}

absl::Status ExpertExchange::EndWindow(int rank, int64_t step, RankState& s) {
  const int layers = config_.num_layers;
  const int experts = config_.num_experts;
  absl::Status status = group_[rank]->AllReduce(absl::MakeSpan(s.routed), comm::ReduceOp::kSum,
                                                {config_.collective_timeout, "eplb.loads"});
  if (!status.ok()) return status;
  ++s.windows;
  if (s.windows == 1) s.first_window_imbalance = WorstImbalance(s.computed, layers, ranks_);
  if (!s.events.empty()) {
    for (size_t i = 0; i < s.computed.size(); ++i) s.after[i] += s.computed[i];
  }
  std::vector<std::vector<double>> loads(layers);
  for (int l = 0; l < layers; ++l) {
    const auto first = s.routed.begin() + static_cast<size_t>(l) * experts;
    loads[l].assign(first, first + experts);
  }
  std::fill(s.routed.begin(), s.routed.end(), 0);
  std::fill(s.computed.begin(), s.computed.end(), 0);
  if (s.pending) {
    int64_t loaded = s.load_ok ? 1 : 0;
    status = group_[rank]->AllReduce(absl::MakeSpan(&loaded, 1), comm::ReduceOp::kMin,
                                     {config_.collective_timeout, "eplb.adopt"});
    if (!status.ok()) return status;
    s.pending = false;
    if (loaded == 1) s.current = s.next;
    s.events.push_back({step, s.forwards, loaded == 1, eplb::Format(s.current)});
    return absl::OkStatus();
  }
  if (s.windows % config_.rebalance_windows != 0) return absl::OkStatus();
  absl::StatusOr<eplb::Placement> plan = eplb::Plan(
      loads, {.num_ranks = ranks_, .redundant_per_rank = config_.redundant_slots}, &s.current);
  if (!plan.ok()) return plan.status();
  if (*plan == s.current) return absl::OkStatus();
  s.next = *std::move(plan);
  s.pending = true;
  std::mt19937_64 rng(seed_ * 31 + static_cast<uint64_t>(rank) * 1009 +
                      static_cast<uint64_t>(s.windows));
  s.load_ok = rank != config_.failing_rank &&
              std::uniform_real_distribution<double>(0, 1)(rng) >= config_.load_failure_rate;
  return absl::OkStatus();
}

SimEplbSummary ExpertExchange::Summary() const {
  absl::MutexLock lock(mu_[0].get());
  const RankState& s = states_[0];
  SimEplbSummary summary;
  summary.forwards = s.forwards;
  summary.windows = s.windows;
  for (const PlacementEvent& e : s.events) ++(e.adopted ? summary.adopted : summary.aborted);
  summary.first_window_imbalance = s.first_window_imbalance;
  if (!s.events.empty()) {
    summary.imbalance_after_rebalance = WorstImbalance(s.after, config_.num_layers, ranks_);
  }
  return summary;
}

std::vector<std::string> ExpertExchange::Violations() const {
  std::vector<std::vector<PlacementEvent>> events;
  std::vector<std::string> problems;
  int64_t forwards0 = 0;
  for (int r = 0; r < ranks_; ++r) {
    absl::MutexLock lock(mu_[r].get());
    events.push_back(states_[r].events);
    if (r == 0) forwards0 = states_[r].forwards;
    if (states_[r].forwards != forwards0) {
      problems.push_back(absl::StrCat("expert exchange: rank ", r, " ran ", states_[r].forwards,
                                      " forwards, rank 0 ", forwards0));
    }
  }
  for (std::string& p : PlacementDisagreements(events)) {
    problems.push_back(absl::StrCat("expert exchange: ", p));
  }
  return problems;
}

}  // namespace lockstep::sim
