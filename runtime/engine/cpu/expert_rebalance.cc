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
        const int had = HeldIndex(old, e);
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
    : moe_layer_(config.moe_layer.begin(), config.moe_layer.end()),
      current_(std::move(current)),
      weights_(std::move(weights)),
      options_(std::move(options)),
      comm_(comm),
      rank_(rank),
      timeout_(timeout),
      tag_(absl::StrCat(model_name, ".eplb.adopt")),
      copy_tag_(absl::StrCat(model_name, ".eplb.copy")),
      loader_(std::move(loader)) {
  moe_layer_.resize(current_.layers.size(), false);
}

ExpertRebalancer::~ExpertRebalancer() {
  if (loading_.valid()) loading_.wait();
  if (sending_.valid()) sending_.wait();
}

absl::StatusOr<absl::StatusOr<LayerMoeWeights>> ExpertRebalancer::Exchange(
    absl::StatusOr<Prepared> prepared) {
  const int world = current_.num_ranks;
  std::vector<std::string> received(world);
  if (comm_ != nullptr && world > 1) {
    // A rank that has nothing (its encoding failed) still joins with empty bytes; its
    // receivers then find their copies missing.
    const std::vector<std::string> send =
        prepared.ok() ? std::move(prepared->send) : std::vector<std::string>(world);
    absl::StatusOr<std::vector<std::string>> got =
        comm_->AllToAllBytes(send, {timeout_, copy_tag_});
    if (!got.ok()) return got.status();
    received = std::move(*got);
  }
  if (!prepared.ok()) return absl::StatusOr<LayerMoeWeights>(prepared.status());
  costs_.experts_received = 0;
  costs_.bytes_received = 0;
  for (int r = 0; r < world; ++r) {
    if (r != rank_) costs_.bytes_received += static_cast<int64_t>(received[r].size());
  }
  for (const ExpertCopy& copy : copies_) costs_.experts_received += copy.to == rank_ ? 1 : 0;
  absl::Status filled = FillCopiedExperts(copies_, rank_, received, prepared->kept);
  if (!filled.ok()) return absl::StatusOr<LayerMoeWeights>(filled);
  return absl::StatusOr<LayerMoeWeights>(
      LayerMoeWeights(prepared->kept.begin(), prepared->kept.end()));
}

absl::StatusOr<LayerMoeWeights> ExpertRebalancer::AtWindowEnd(const ExpertLoadSnapshot& snapshot) {
  if (pending_) {
    // The adoption point: every rank started this load at the previous window's end.
    // The local wait is half the collective timeout, so that a rank waiting in the
    // collectives below for a late one does not time out first.
    pending_ = false;
    const auto wait = std::chrono::nanoseconds(absl::ToInt64Nanoseconds(timeout_ / 2));
    const absl::Status late = absl::DeadlineExceededError(
        absl::StrCat("preparing the experts of the new placement took longer than ",
                     absl::FormatDuration(timeout_ / 2)));
    absl::StatusOr<LayerMoeWeights> result = late;
    if (options_.copy_from_peers) {
      absl::StatusOr<Prepared> prepared = late;
      if (sending_.wait_for(wait) == std::future_status::ready) prepared = sending_.get();
      costs_.prepare = absl::Nanoseconds(prepare_ns_.load());
      const absl::Time start = absl::Now();
      absl::StatusOr<absl::StatusOr<LayerMoeWeights>> exchanged = Exchange(std::move(prepared));
      if (!exchanged.ok()) return exchanged.status();
      result = std::move(*exchanged);
      costs_.exchange = absl::Now() - start;
    } else {
      if (loading_.wait_for(wait) == std::future_status::ready) result = loading_.get();
      costs_.prepare = absl::Nanoseconds(prepare_ns_.load());
      costs_.exchange = absl::ZeroDuration();
    }
    int64_t loaded = result.ok() ? 1 : 0;
    if (comm_ != nullptr && current_.num_ranks > 1) {
      absl::Status status =
          comm_->AllReduce(absl::MakeSpan(&loaded, 1), comm::ReduceOp::kMin, {timeout_, tag_});
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
    bytes_received_ += costs_.bytes_received;
    ++adopted_;
    return weights_;
  }
  if (snapshot.windows % options_.every_windows != 0) return LayerMoeWeights();
  std::vector<std::vector<double>> loads;
  for (int l = 0; l < snapshot.num_layers; ++l) loads.push_back(snapshot.LayerLoads(l));
  absl::StatusOr<eplb::Placement> plan = eplb::Plan(loads, options_.plan, &current_);
  if (!plan.ok() || *plan == current_) return LayerMoeWeights();
  if (options_.copy_from_peers) {
    absl::StatusOr<std::vector<ExpertCopy>> copies = PlanExpertCopies(current_, *plan, moe_layer_);
    if (!copies.ok()) {
      // The same on every rank (the same placements), so every rank skips this plan.
      GetLogger("engine")->warn("expert rebalance skipped: {}", copies.status().ToString());
      return LayerMoeWeights();
    }
    copies_ = std::move(*copies);
  }
  next_ = std::move(*plan);
  pending_ = true;
  prepare_ns_ = 0;
  if (options_.copy_from_peers) {
    sending_ = std::async(
        std::launch::async,
        [this, sender = options_.sender ? options_.sender : ExpertSender(EncodeExpertCopies),
         copies = copies_, rank = rank_, world = current_.num_ranks, next = next_,
         weights = weights_]() -> absl::StatusOr<Prepared> {
          const absl::Time start = absl::Now();
          absl::StatusOr<std::vector<std::string>> send = sender(copies, rank, world, weights);
          absl::StatusOr<Prepared> out =
              send.ok() ? absl::StatusOr<Prepared>(
                              Prepared{std::move(*send), KeptExperts(rank, next, weights)})
                        : absl::StatusOr<Prepared>(send.status());
          prepare_ns_ = absl::ToInt64Nanoseconds(absl::Now() - start);
          return out;
        });
  } else {
    loading_ = std::async(std::launch::async, [this, next = next_, weights = weights_]() {
      const absl::Time start = absl::Now();
      absl::StatusOr<LayerMoeWeights> out = loader_(next, weights);
      prepare_ns_ = absl::ToInt64Nanoseconds(absl::Now() - start);
      return out;
    });
  }
  return LayerMoeWeights();
}

}  // namespace lockstep::engine
