#include "runtime/engine/cpu/expert_rebalance.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/log.h"
#include "runtime/engine/model/safetensors.h"
#include "runtime/engine/model/weight_plan.h"

namespace lockstep::engine {
namespace {

absl::StatusOr<PackedMatrix> ReadPacked(const SafetensorsModel& tensors, const WeightSource& w) {
  absl::StatusOr<std::vector<float>> values = ReadWeight(tensors, w);
  if (!values.ok()) return values.status();
  return PackedMatrix::Pack(*values, w.rows, w.cols);
}

}  // namespace

ExpertLoader CheckpointExpertLoader(std::string model_dir, ModelConfig config, int rank) {
  return [model_dir = std::move(model_dir), config = std::move(config), rank](
             const eplb::Placement& next,
             const LayerMoeWeights& current) -> absl::StatusOr<LayerMoeWeights> {
    absl::StatusOr<std::unique_ptr<SafetensorsModel>> tensors = SafetensorsModel::Open(model_dir);
    if (!tensors.ok()) return tensors.status();
    ExpertLayout layout;
    for (const eplb::LayerPlacement& layer : next.layers) layout.push_back(layer.slots);
    const ModelPlan plan = PlanWeights(config, rank, next.num_ranks, layout);
    LayerMoeWeights out(current.size());
    for (size_t l = 0; l < current.size(); ++l) {
      if (current[l] == nullptr) continue;
      const MoeWeights& old = *current[l];
      auto moe = std::make_shared<MoeWeights>();
      moe->router = old.router;
      moe->score_bias = old.score_bias;
      moe->held = plan.layers[l].held;
      moe->replicas.resize(config.num_experts);
      for (size_t r = 0; r < layout[l].size(); ++r) {
        for (int e : layout[l][r]) moe->replicas[e].push_back(static_cast<int>(r));
      }
      for (size_t i = 0; i < moe->held.size(); ++i) {
        const int e = moe->held[i];
        int had = -1;  // its index in the old weights
        for (size_t j = 0; j < old.experts.size(); ++j) {
          if ((old.held.empty() ? old.local.first + static_cast<int>(j) : old.held[j]) == e) {
            had = static_cast<int>(j);
          }
        }
        if (had >= 0) {
          moe->experts.push_back(old.experts[had]);
          continue;
        }
        const SwiGluSource& source = plan.layers[l].experts[i];
        SwiGluWeights expert;
        expert.width = source.width;
        absl::StatusOr<PackedMatrix> gate_up = ReadPacked(**tensors, source.gate_up);
        if (!gate_up.ok()) return gate_up.status();
        absl::StatusOr<PackedMatrix> down = ReadPacked(**tensors, source.down);
        if (!down.ok()) return down.status();
        expert.gate_up = std::move(*gate_up);
        expert.down = std::move(*down);
        moe->experts.push_back(std::move(expert));
      }
      out[l] = std::move(moe);
    }
    return out;
  };
}

ExpertRebalancer::ExpertRebalancer(const ModelConfig& config, eplb::Placement current,
                                   LayerMoeWeights weights, RebalanceOptions options,
                                   comm::Communicator* comm, int rank, absl::Duration timeout,
                                   const std::string& model_name, ExpertLoader loader)
    : config_(config),
      current_(std::move(current)),
      weights_(std::move(weights)),
      options_(std::move(options)),
      comm_(comm),
      rank_(rank),
      timeout_(timeout),
      tag_(absl::StrCat(model_name, ".eplb.adopt")),
      loader_(std::move(loader)) {}

ExpertRebalancer::~ExpertRebalancer() {
  if (loading_.valid()) loading_.wait();
}

absl::StatusOr<LayerMoeWeights> ExpertRebalancer::AtWindowEnd(const ExpertLoadSnapshot& snapshot) {
  if (pending_) {
    // The adoption point: every rank started this load at the previous window's end.
    pending_ = false;
    int64_t loaded = 0;
    absl::StatusOr<LayerMoeWeights> result = absl::DeadlineExceededError(absl::StrCat(
        "loading the experts of the new placement took longer than ", absl::FormatDuration(
                                                                          timeout_)));
    if (loading_.wait_for(std::chrono::nanoseconds(absl::ToInt64Nanoseconds(timeout_))) ==
        std::future_status::ready) {
      result = loading_.get();
      loaded = result.ok() ? 1 : 0;
    }
    if (comm_ != nullptr && current_.num_ranks > 1) {
      absl::Status status = comm_->AllReduce(absl::MakeSpan(&loaded, 1), comm::ReduceOp::kMin,
                                             {timeout_, tag_});
      if (!status.ok()) return status;
    }
    if (loaded == 0) {
      ++aborted_;
      GetLogger("engine")->warn("expert rebalance aborted on every rank (rank {}: {})", rank_,
                                result.ok() ? "loaded" : result.status().ToString());
      return LayerMoeWeights();
    }
    current_ = std::move(next_);
    weights_ = std::move(*result);
    ++adopted_;
    return weights_;
  }
  if (snapshot.windows % options_.every_windows != 0) return LayerMoeWeights();
  std::vector<std::vector<double>> loads;
  for (int l = 0; l < snapshot.num_layers; ++l) loads.push_back(snapshot.LayerLoads(l));
  absl::StatusOr<eplb::Placement> plan = eplb::Plan(loads, options_.plan, &current_);
  if (!plan.ok() || *plan == current_) return LayerMoeWeights();
  next_ = std::move(*plan);
  pending_ = true;
  loading_ = std::async(std::launch::async, loader_, next_, weights_);
  return LayerMoeWeights();
}

}  // namespace lockstep::engine
