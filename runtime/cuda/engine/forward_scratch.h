// The device scratch of one CUDA transformer: every buffer a forward of at most
// max_rows rows uses (activations, attention split scratch, logits, the MoE routing and
// expert-parallel exchange buffers, the packed step input), as offsets into one
// allocation made at load, so no forward allocates and every CUDA graph captures the
// same addresses. Plain C++ (no CUDA).
//
// The expert-parallel exchange sends every peer `capacity` rows whatever it holds for
// it (MoeExchangeFor): rows * min(k, the most experts a rank holds), which every rank
// computes from the same agreed row count (engine::StepAgreement), so the NCCL calls
// have the same sizes on every rank without exchanging them, and a graph holds them.
//
// Value types; thread-compatible.
#ifndef LOCKSTEP_RUNTIME_CUDA_ENGINE_FORWARD_SCRATCH_H_
#define LOCKSTEP_RUNTIME_CUDA_ENGINE_FORWARD_SCRATCH_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "runtime/cuda/engine/step_layout.h"
#include "runtime/engine/model/model_config.h"

namespace lockstep::cuda {

// The shape of one MoE layer's exchange for `rows` rows on every rank.
struct MoeExchange {
  int32_t capacity = 0;    // rows sent to (and received from) each rank
  int32_t groups = 1;      // blocks of received rows: one per rank
  int32_t total_rows = 0;  // groups * capacity: the rows the experts see
  int32_t max_tiles = 0;   // of the grouped GEMM over them
};

// `max_local`: the most experts any rank holds. With one rank, the capacity is
// rows * k (every entry, in expert order).
MoeExchange MoeExchangeFor(int64_t rows, int k, int max_local, int world_size);

// The most experts any of `world_size` ranks holds.
int MaxLocalExperts(int num_experts, int world_size);

struct ScratchOptions {
  int element_bytes = 2;  // of the activations (bf16: 2, f32: 4)
  int64_t max_rows = 1;   // the most rows of one forward
  int32_t max_seqs = 1;   // the most sequences of one forward
  // The most rows of one forward that attend by the decode kernel or return logits: a
  // generation step's 1 + K per sequence (max_seqs * (1 + K)).
  int64_t max_decode_rows = 1;
  int32_t max_table_stride = 1;  // the most blocks of one sequence's table
  int32_t max_splits = 32;       // DecodeSplitOptions::max_splits
  int world_size = 1;
  // The MTP prologue (an MTP layer's model): its input hidden states and the
  // concatenation eh_proj multiplies.
  bool mtp = false;
};

// Byte offsets into the scratch allocation (256-byte aligned), and its size.
struct ScratchLayout {
  size_t input = 0;  // the packed step (step_layout.h), input_bytes long
  size_t input_bytes = 0;
  size_t h = 0, normed = 0, qkv = 0, attn = 0, delta = 0;  // [rows][...] activations
  size_t gate_up = 0, act = 0;  // dense MLP and shared experts: [rows][2 * width], [.][width]
  // MLA (absent without): [rows][q_lora_rank], [rows][heads * qk_head_dim],
  // [rows][latent_dim] in the element type; f32 [rows][heads][2 * cache_head_dim] and
  // [rows][heads][kv_lora_rank].
  size_t mla_q_low = 0, mla_q = 0, mla_kv = 0, mla_q_lat = 0, mla_acc = 0;
  size_t shared_out = 0;  // the shared experts' output [rows][hidden] (absent without)
  size_t decode_scratch = 0;                               // f32 split partials
  size_t final_rows = 0;                                   // [logit rows][hidden]
  size_t logits = 0;                                       // f32 [logit rows][vocab]
  // MoE (absent when the model has none).
  size_t router_logits = 0;                               // f32 [rows][experts]
  size_t experts = 0, weights = 0;                        // [rows * k] int32 / f32
  size_t offsets = 0;                                     // int32 [experts + 1]
  size_t entry_of_slot = 0, slot_of_entry = 0, dest = 0;  // int32 [rows * k]
  size_t send_counts = 0, recv_counts = 0;                // int32 [world][max_local]
  size_t tiles = 0;                                       // GroupedGemmTile [max_tiles]
  size_t x_send = 0, x_recv = 0;                          // [world * capacity][hidden]
  size_t expert_gate_up = 0, expert_act = 0;  // [world * capacity][2 * width], [.][width]
  size_t y = 0, y_back = 0;                   // [world * capacity][hidden]
  // The MTP prologue (absent without): the rows' previous hidden states [rows][hidden]
  // and [enorm(embedding) | hnorm(previous)] [rows][2 * hidden].
  size_t hidden_in = 0, mtp_both = 0;
  size_t bytes = 0;

  MoeExchange max_exchange;  // for max_rows
  StepShape max_step;        // the largest packed step
};

// InvalidArgument for non-positive sizes or a model whose attention or MoE does not fit
// the kernels.
absl::StatusOr<ScratchLayout> PlanScratch(const engine::ModelConfig& config,
                                          const ScratchOptions& options);

}  // namespace lockstep::cuda

#endif  // LOCKSTEP_RUNTIME_CUDA_ENGINE_FORWARD_SCRATCH_H_
