#include "runtime/engine/cpu/moe.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/status_macros.h"
#include "runtime/engine/cpu/gemm.h"
#include "runtime/engine/cpu/moe_route.h"
#include "runtime/engine/cpu/ops.h"

namespace lockstep::engine {

MoeBlock::MoeBlock(const ModelConfig& config, const std::string& model_name, ExpertGroup group)
    : config_(config), group_(group), grouped_(config.is_deepseek()) {
  for (int i = 0; i < config.num_layers; ++i) {
    const std::string prefix = absl::StrCat(model_name, ".moe.l", i);
    tags_.push_back({prefix + ".counts", prefix + ".dispatch", prefix + ".combine"});
  }
  for (int e = 0; e < config.num_experts; ++e) {
    owner_.push_back(ExpertOwner(config.num_experts, group_.world_size, e));
  }
  for (int i = 0; i < config.num_layers; ++i) {
    if (config.is_moe() && config.moe_layer[i]) last_moe_layer_ = i;
  }
}

absl::Status MoeBlock::Forward(int layer, const MoeWeights& given, const float* x, int m,
                               float* out, Arena& arena, ThreadPool* pool) const {
  const MoeWeights& weights =
      layer < static_cast<int>(adopted_.size()) && adopted_[layer] != nullptr ? *adopted_[layer]
                                                                             : given;
  const int hidden = config_.hidden_size;
  const int k = config_.num_experts_per_tok;
  const int world = group_.world_size;
  const int stride = hidden + 1;  // a dispatched record: [expert id, x row]

  // 1. Route every row.
  float* logits = arena.Alloc<float>(static_cast<size_t>(m) * config_.num_experts + 1);
  Gemm(x, m, hidden, weights.router, nullptr, logits, config_.num_experts, pool);
  if (router_tap_) router_tap_(layer, logits, m, config_.num_experts);
  int* experts = arena.Alloc<int>(static_cast<size_t>(m) * k + 1);
  float* gates = arena.Alloc<float>(static_cast<size_t>(m) * k + 1);
  float* probs = arena.Alloc<float>(3 * config_.num_experts + 2 * config_.n_group);
  if (grouped_) {
    const GroupedRouting rule{.num_experts = config_.num_experts,
                              .k = k,
                              .n_group = config_.n_group,
                              .topk_group = config_.topk_group,
                              .sigmoid = config_.scoring == ExpertScoring::kSigmoid,
                              .renormalize = config_.norm_topk_prob,
                              .scaling = static_cast<float>(config_.routed_scaling_factor)};
    const float* bias = weights.score_bias.empty() ? nullptr : weights.score_bias.data();
    for (int i = 0; i < m; ++i) {
      RouteGrouped(logits + static_cast<size_t>(i) * config_.num_experts, bias, rule,
                   experts + i * k, gates + i * k, probs);
    }
  } else {
    for (int i = 0; i < m; ++i) {
      RouteTopK(logits + static_cast<size_t>(i) * config_.num_experts, config_.num_experts, k,
                config_.norm_topk_prob, experts + i * k, gates + i * k, probs);
    }
  }

  if (load_ != nullptr) load_->AddRouted(layer, experts, m * k);

  // 2. Pick each record's rank: the expert's owner, or with replicas the
  // ((j + rank) mod replicas)-th of them for the j-th record of that expert in this
  // batch (a replica computes the same bits, so the choice only moves load).
  int* dest = arena.Alloc<int>(static_cast<size_t>(m) * k + 1);
  if (weights.replicas.empty()) {
    for (int i = 0; i < m * k; ++i) dest[i] = owner_[experts[i]];
  } else {
    int* seen = arena.Alloc<int>(config_.num_experts);
    std::fill(seen, seen + config_.num_experts, 0);
    for (int i = 0; i < m * k; ++i) {
      const std::vector<int>& ranks = weights.replicas[experts[i]];
      dest[i] = ranks[(seen[experts[i]]++ + group_.rank) % ranks.size()];
    }
  }
  // Lay out the records per destination rank, in (row, expert id) order.
  int64_t* send_records = arena.Alloc<int64_t>(world);
  int64_t* recv_records = arena.Alloc<int64_t>(world);
  std::fill(send_records, send_records + world, 0);
  for (int i = 0; i < m * k; ++i) ++send_records[dest[i]];
  int64_t* send_offset = arena.Alloc<int64_t>(world + 1);
  send_offset[0] = 0;
  for (int r = 0; r < world; ++r) send_offset[r + 1] = send_offset[r] + send_records[r];
  const int64_t total_send = send_offset[world];
  int64_t* slot_of = arena.Alloc<int64_t>(static_cast<size_t>(m) * k + 1);  // record index
  float* send = arena.Alloc<float>(static_cast<size_t>(total_send) * stride + 1);
  {
    int64_t* cursor = arena.Alloc<int64_t>(world);
    std::copy(send_offset, send_offset + world, cursor);
    for (int i = 0; i < m * k; ++i) {
      const int64_t slot = cursor[dest[i]]++;
      slot_of[i] = slot;
      float* record = send + slot * stride;
      record[0] = static_cast<float>(experts[i]);
      std::memcpy(record + 1, x + static_cast<size_t>(i / k) * hidden, hidden * sizeof(float));
    }
  }

  // 3. Exchange counts, then rows.
  const float* recv = send;
  int64_t total_recv = total_send;
  int64_t* send_floats = arena.Alloc<int64_t>(world);
  int64_t* recv_floats = arena.Alloc<int64_t>(world);
  const Tags& tags = tags_[layer];
  if (world > 1) {
    RETURN_IF_ERROR(group_.comm->AllToAll(absl::MakeConstSpan(send_records, world),
                                          absl::MakeSpan(recv_records, world),
                                          {group_.timeout, tags.counts}));
    total_recv = 0;
    for (int r = 0; r < world; ++r) {
      send_floats[r] = send_records[r] * stride;
      recv_floats[r] = recv_records[r] * stride;
      total_recv += recv_records[r];
    }
    float* received = arena.Alloc<float>(static_cast<size_t>(total_recv) * stride + 1);
    RETURN_IF_ERROR(group_.comm->AllToAllV(
        absl::MakeConstSpan(send, total_send * stride), absl::MakeConstSpan(send_floats, world),
        absl::MakeSpan(received, total_recv * stride), absl::MakeConstSpan(recv_floats, world),
        {group_.timeout, tags.dispatch}));
    recv = received;
  }

  // 4. Run the local experts on the received records, grouped by expert.
  const int local_experts = static_cast<int>(weights.experts.size());
  int* local_index = arena.Alloc<int>(config_.num_experts);  // expert -> experts[] index
  std::fill(local_index, local_index + config_.num_experts, -1);
  for (int i = 0; i < local_experts; ++i) {
    local_index[weights.held.empty() ? weights.local.first + i : weights.held[i]] = i;
  }
  int64_t* expert_start = arena.Alloc<int64_t>(local_experts + 1);
  std::fill(expert_start, expert_start + local_experts + 1, 0);
  for (int64_t rec = 0; rec < total_recv; ++rec) {
    const int expert = static_cast<int>(recv[rec * stride]);
    const int e = expert >= 0 && expert < config_.num_experts ? local_index[expert] : -1;
    if (e < 0) {
      return absl::InternalError(absl::StrCat(tags.dispatch, ": received a row for expert ",
                                              expert, " not held by rank ", group_.rank));
    }
    ++expert_start[e + 1];
  }
  for (int e = 0; e < local_experts; ++e) expert_start[e + 1] += expert_start[e];
  if (load_ != nullptr) load_->AddComputed(layer, total_recv);
  int64_t* order = arena.Alloc<int64_t>(static_cast<size_t>(total_recv) + 1);
  {
    int64_t* cursor = arena.Alloc<int64_t>(local_experts + 1);
    std::copy(expert_start, expert_start + local_experts, cursor);
    for (int64_t rec = 0; rec < total_recv; ++rec) {
      order[cursor[local_index[static_cast<int>(recv[rec * stride])]]++] = rec;
    }
  }
  float* results = arena.Alloc<float>(static_cast<size_t>(total_recv) * hidden + 1);
  int max_rows = 0;
  for (int e = 0; e < local_experts; ++e) {
    max_rows = std::max<int>(max_rows, static_cast<int>(expert_start[e + 1] - expert_start[e]));
  }
  const int width = config_.moe_intermediate_size;
  float* rows_in = arena.Alloc<float>(static_cast<size_t>(max_rows) * hidden + 1);
  float* gate_up = arena.Alloc<float>(static_cast<size_t>(max_rows) * 2 * width + 1);
  float* act = arena.Alloc<float>(static_cast<size_t>(max_rows) * width + 1);
  float* rows_out = arena.Alloc<float>(static_cast<size_t>(max_rows) * hidden + 1);
  for (int e = 0; e < local_experts; ++e) {
    const int count = static_cast<int>(expert_start[e + 1] - expert_start[e]);
    if (count == 0) continue;
    for (int j = 0; j < count; ++j) {
      std::memcpy(rows_in + static_cast<size_t>(j) * hidden,
                  recv + order[expert_start[e] + j] * stride + 1, hidden * sizeof(float));
    }
    const SwiGluWeights& expert = weights.experts[e];
    Gemm(rows_in, count, hidden, expert.gate_up, nullptr, gate_up, 2 * width, pool);
    for (int j = 0; j < count; ++j) {
      const float* row = gate_up + static_cast<size_t>(j) * 2 * width;
      SiluMul(row, row + width, width, act + static_cast<size_t>(j) * width);
    }
    Gemm(act, count, width, expert.down, nullptr, rows_out, hidden, pool);
    for (int j = 0; j < count; ++j) {
      std::memcpy(results + order[expert_start[e] + j] * hidden,
                  rows_out + static_cast<size_t>(j) * hidden, hidden * sizeof(float));
    }
  }

  // 5. Send results back to the origin ranks (same record order), then combine.
  const float* back = results;
  if (world > 1) {
    for (int r = 0; r < world; ++r) {
      send_floats[r] = recv_records[r] * hidden;
      recv_floats[r] = send_records[r] * hidden;
    }
    float* returned = arena.Alloc<float>(static_cast<size_t>(total_send) * hidden + 1);
    RETURN_IF_ERROR(group_.comm->AllToAllV(
        absl::MakeConstSpan(results, total_recv * hidden), absl::MakeConstSpan(send_floats, world),
        absl::MakeSpan(returned, total_send * hidden), absl::MakeConstSpan(recv_floats, world),
        {group_.timeout, tags.combine}));
    back = returned;
  }
  for (int i = 0; i < m; ++i) {
    float* row = out + static_cast<size_t>(i) * hidden;
    std::fill(row, row + hidden, 0.0f);
    for (int j = 0; j < k; ++j) {
      Axpy(gates[i * k + j], back + slot_of[i * k + j] * hidden, row, hidden);
    }
  }
  if (load_ == nullptr || layer != last_moe_layer_) return absl::OkStatus();
  RETURN_IF_ERROR(load_->EndForward());
  if (rebalancer_ != nullptr && load_->window_ended()) {
    ASSIGN_OR_RETURN(LayerMoeWeights adopted, rebalancer_->AtWindowEnd(load_->Latest()));
    if (!adopted.empty()) adopted_ = std::move(adopted);
  }
  return absl::OkStatus();
}

}  // namespace lockstep::engine
