#include "runtime/cuda/engine/moe_forward.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "runtime/cuda/cuda_status.h"
#include "runtime/cuda/kernels/bf16.h"
#include "runtime/cuda/kernels/elementwise_kernels.h"
#include "runtime/cuda/kernels/grouped_gemm_kernel.h"
#include "runtime/cuda/kernels/grouped_route_kernel.h"
#include "runtime/cuda/kernels/kernel_ops.h"
#include "runtime/cuda/kernels/moe_kernels.h"

namespace lockstep::cuda {
namespace {

// The routing hook (forward_pass.h) of one layer: waits for the router logits and the
// route kernel's choice, shows the logits, and copies a forced choice over the kernel's.
absl::Status ApplyRoutingHook(const ForwardContext& c, int layer, int rows, const float* logits,
                              int32_t* experts, float* weights) {
  const int n = c.config->num_experts;
  const int k = c.config->num_experts_per_tok;
  const std::string where = absl::StrCat("layer ", layer, " routing hook");
  RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(c.stream), where));
  std::vector<float> host(static_cast<size_t>(rows) * n);
  RETURN_IF_ERROR(CudaStatus(
      cudaMemcpy(host.data(), logits, host.size() * sizeof(float), cudaMemcpyDeviceToHost), where));
  c.routing->Observe(layer, host.data(), rows, n);
  std::vector<int32_t> forced_experts(static_cast<size_t>(rows) * k);
  std::vector<float> forced_weights(forced_experts.size());
  ASSIGN_OR_RETURN(const bool forced,
                   c.routing->Force(layer, rows, k, forced_experts.data(), forced_weights.data()));
  if (!forced) return absl::OkStatus();
  RETURN_IF_ERROR(CudaStatus(cudaMemcpy(experts, forced_experts.data(),
                                        forced_experts.size() * sizeof(int32_t),
                                        cudaMemcpyHostToDevice),
                             where));
  return CudaStatus(cudaMemcpy(weights, forced_weights.data(),
                               forced_weights.size() * sizeof(float), cudaMemcpyHostToDevice),
                    where);
}

}  // namespace

template <typename T>
absl::Status EnqueueMoe(const ForwardContext& c, int layer, const T* x, T* out) {
  const engine::ModelConfig& config = *c.config;
  const ScratchLayout& l = *c.layout;
  const DeviceLayer& w = c.weights->layers[layer];
  const int rows = c.shape.rows;
  const int hidden = config.hidden_size;
  const int experts = config.num_experts;
  const int k = config.num_experts_per_tok;
  const int width = config.moe_intermediate_size;
  const int entries = rows * k;
  const int world = c.exchange == nullptr ? 1 : c.exchange->world_size();
  const int max_local = MaxLocalExperts(experts, world);
  const MoeExchange& moe = c.moe;
  std::byte* s = c.scratch;
  auto i32 = [&](size_t offset) { return reinterpret_cast<int32_t*>(s + offset); };
  auto rows_at = [&](size_t offset) { return reinterpret_cast<T*>(s + offset); };
  float* router_logits = reinterpret_cast<float*>(s + l.router_logits);
  float* weights = reinterpret_cast<float*>(s + l.weights);
  const std::string where = absl::StrCat("layer ", layer, " MoE");
  auto check = [&](cudaError_t error, const char* what) {
    return CudaStatus(error, absl::StrCat(where, ": ", what));
  };

  if (rows > 0) {
    RETURN_IF_ERROR(TimedSegment(c, ForwardTimer::Segment::kGemm, [&] {
      return c.gemm->Gemm(x, rows, static_cast<const T*>(w.router), experts, hidden, router_logits);
    }));
  }
  if (config.is_deepseek()) {  // sigmoid scores, correction bias, groups, scaling
    kernels::GroupedRouteRule rule;
    rule.num_experts = experts;
    rule.k = k;
    rule.n_group = config.n_group;
    rule.topk_group = config.topk_group;
    rule.sigmoid = config.scoring == engine::ExpertScoring::kSigmoid;
    rule.renormalize = config.norm_topk_prob;
    rule.scaling = static_cast<float>(config.routed_scaling_factor);
    RETURN_IF_ERROR(check(kernels::LaunchMoeRouteGrouped(router_logits, w.router_bias, rows, rule,
                                                         i32(l.experts), weights, c.stream),
                          "grouped routing"));
  } else {
    RETURN_IF_ERROR(kernels::MoeRoute(router_logits, rows, experts, k, config.norm_topk_prob,
                                      i32(l.experts), weights, c.stream));
  }
  if (c.routing != nullptr && rows > 0) {
    RETURN_IF_ERROR(ApplyRoutingHook(c, layer, rows, router_logits, i32(l.experts), weights));
  }
  RETURN_IF_ERROR(
      check(kernels::LaunchMoePermute(i32(l.experts), entries, experts, i32(l.offsets),
                                      i32(l.entry_of_slot), i32(l.slot_of_entry), c.stream),
            "permute"));
  RETURN_IF_ERROR(check(
      kernels::LaunchMoeDispatchLayout(i32(l.offsets), experts, world, moe.capacity, max_local,
                                       entries, i32(l.dest), i32(l.send_counts), c.stream),
      "dispatch layout"));
  T* x_send = rows_at(l.x_send);
  RETURN_IF_ERROR(check(kernels::LaunchMoeScatter(x, hidden, i32(l.entry_of_slot), i32(l.dest),
                                                  entries, k, x_send, c.stream),
                        "dispatch"));
  T* x_recv = rows_at(l.x_recv);
  const int32_t* counts = i32(l.send_counts);
  constexpr ExpertExchange::Type kRows =
      std::is_same_v<T, float> ? ExpertExchange::Type::kF32 : ExpertExchange::Type::kBf16;
  if (world > 1) {
    RETURN_IF_ERROR(
        c.exchange->AllToAll(x_send, x_recv, static_cast<int64_t>(moe.capacity) * hidden, kRows));
    RETURN_IF_ERROR(c.exchange->AllToAll(i32(l.send_counts), i32(l.recv_counts), max_local,
                                         ExpertExchange::Type::kInt32));
    counts = i32(l.recv_counts);
  }
  auto* tiles = reinterpret_cast<kernels::GroupedGemmTile*>(s + l.tiles);
  RETURN_IF_ERROR(
      check(kernels::LaunchGroupedGemmPlan(counts, moe.groups, max_local, w.local.size(),
                                           moe.capacity, tiles, moe.max_tiles, c.stream),
            "expert tiles"));
  T* gate_up = rows_at(l.expert_gate_up);
  T* act = rows_at(l.expert_act);
  T* y = rows_at(l.y);
  RETURN_IF_ERROR(TimedSegment(c, ForwardTimer::Segment::kGemm, [&] {
    return check(kernels::LaunchGroupedGemm(x_recv, tiles, moe.max_tiles,
                                            reinterpret_cast<const T* const*>(w.expert_gate_up),
                                            2 * width, hidden, gate_up, c.stream),
                 "expert gate_up");
  }));
  RETURN_IF_ERROR(check(kernels::LaunchSiluMul(gate_up, gate_up + width, 2 * width, moe.total_rows,
                                               width, act, width, c.stream),
                        "expert SiLU"));
  RETURN_IF_ERROR(TimedSegment(c, ForwardTimer::Segment::kGemm, [&] {
    return check(kernels::LaunchGroupedGemm(act, tiles, moe.max_tiles,
                                            reinterpret_cast<const T* const*>(w.expert_down),
                                            hidden, width, y, c.stream),
                 "expert down");
  }));
  T* y_back = rows_at(l.y_back);
  if (world > 1) {
    RETURN_IF_ERROR(
        c.exchange->AllToAll(y, y_back, static_cast<int64_t>(moe.capacity) * hidden, kRows));
  }
  return check(kernels::LaunchMoeCombineFrom(y_back, hidden, i32(l.slot_of_entry), i32(l.dest),
                                             weights, rows, k, out, c.stream),
               "combine");
}

template absl::Status EnqueueMoe<kernels::Bf16>(const ForwardContext&, int, const kernels::Bf16*,
                                                kernels::Bf16*);
template absl::Status EnqueueMoe<float>(const ForwardContext&, int, const float*, float*);

}  // namespace lockstep::cuda
