#include "runtime/engine/cpu/expert_load.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"

namespace lockstep::engine {

double ExpertLoadSnapshot::RankImbalance(int layer) const {
  int64_t total = 0, max = 0;
  for (int r = 0; r < num_ranks; ++r) {
    const int64_t n = computed[static_cast<size_t>(layer) * num_ranks + r];
    total += n;
    max = std::max(max, n);
  }
  if (total == 0) return 1.0;
  return static_cast<double>(max) * num_ranks / static_cast<double>(total);
}

std::vector<double> ExpertLoadSnapshot::LayerLoads(int layer) const {
  const auto first = routed.begin() + static_cast<size_t>(layer) * num_experts;
  return std::vector<double>(first, first + num_experts);
}

std::string ExpertLoadSnapshot::Format() const {
  std::string text = absl::StrCat("# windows ", windows, " forwards ", forwards, "\n");
  for (int l = 0; l < num_layers; ++l) {
    const auto r = routed.begin() + static_cast<size_t>(l) * num_experts;
    const auto c = computed.begin() + static_cast<size_t>(l) * num_ranks;
    absl::StrAppend(&text, "routed ", l, ": ",
                    absl::StrJoin(std::vector<int64_t>(r, r + num_experts), " "), "\n");
    absl::StrAppend(&text, "computed ", l, ": ",
                    absl::StrJoin(std::vector<int64_t>(c, c + num_ranks), " "), "\n");
  }
  return text;
}

void ExpertLoadBoard::Publish(const ExpertLoadSnapshot& snapshot) {
  absl::MutexLock lock(&mu_);
  latest_ = snapshot;
}

ExpertLoadSnapshot ExpertLoadBoard::Latest() const {
  absl::MutexLock lock(&mu_);
  return latest_;
}

ExpertLoad::ExpertLoad(int num_layers, int num_experts, int window, comm::Communicator* comm,
                       absl::Duration timeout, const std::string& model_name)
    : num_layers_(num_layers),
      num_experts_(num_experts),
      window_(std::max(window, 1)),
      rank_(comm != nullptr ? comm->rank() : 0),
      world_(comm != nullptr ? comm->world_size() : 1),
      comm_(comm),
      timeout_(timeout),
      tag_(absl::StrCat(model_name, ".eplb.loads")),
      counts_(static_cast<size_t>(num_layers) * (num_experts + world_), 0) {
  latest_.num_layers = num_layers;
  latest_.num_experts = num_experts;
  latest_.num_ranks = world_;
  latest_.forwards = window_;
  latest_.routed.assign(static_cast<size_t>(num_layers) * num_experts, 0);
  latest_.computed.assign(static_cast<size_t>(num_layers) * world_, 0);
}

void ExpertLoad::AddRouted(int layer, const int* experts, int n) {
  int64_t* row = counts_.data() + static_cast<size_t>(layer) * num_experts_;
  for (int i = 0; i < n; ++i) ++row[experts[i]];
}

void ExpertLoad::AddComputed(int layer, int64_t records) {
  counts_[static_cast<size_t>(num_layers_) * num_experts_ +
          static_cast<size_t>(layer) * world_ + rank_] += records;
}

absl::Status ExpertLoad::EndForward() {
  if (++forwards_ % window_ != 0) return absl::OkStatus();
  if (comm_ != nullptr && world_ > 1) {
    absl::Status status =
        comm_->AllReduce(absl::MakeSpan(counts_), comm::ReduceOp::kSum, {timeout_, tag_});
    if (!status.ok()) return status;
  }
  const size_t routed = static_cast<size_t>(num_layers_) * num_experts_;
  {
    absl::MutexLock lock(&mu_);
    ++latest_.windows;
    std::copy(counts_.begin(), counts_.begin() + routed, latest_.routed.begin());
    std::copy(counts_.begin() + routed, counts_.end(), latest_.computed.begin());
  }
  std::fill(counts_.begin(), counts_.end(), 0);
  if (on_window_) on_window_(Latest());
  return absl::OkStatus();
}

ExpertLoadSnapshot ExpertLoad::Latest() const {
  absl::MutexLock lock(&mu_);
  return latest_;
}

}  // namespace lockstep::engine
