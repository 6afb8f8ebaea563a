// The CPU transformer engine: a ModelEngine (model_engine.h) that runs a real
// decoder-only transformer from a safetensors model directory, with paged attention
// directly on the host's KV pools, MoE expert parallelism over its own Communicator,
// sampling, and speculative decoding with a draft model, the model's own MTP layer or
// the n-gram drafter (as CpuEngineOptions::speculative says).
//
//   ASSIGN_OR_RETURN(kv::BlockLayout layout, ModelBlockLayout(model_dir, 16));
//   ... size the pool with `layout`, then:
//   CpuEngineOptions options;
//   options.model_dir = model_dir;
//   options.target_storage = pool_slab;  options.target_layout = layout;
//   options.target_num_blocks = num_blocks;
//   ASSIGN_OR_RETURN(std::unique_ptr<ModelEngine> engine, CreateCpuEngine(options));
//
// Batches run in launch order on the engine's own thread (see batch_runner.h for what
// one batch does and which collectives it makes).
#ifndef LOCKSTEP_RUNTIME_ENGINE_CPU_CPU_ENGINE_H_
#define LOCKSTEP_RUNTIME_ENGINE_CPU_CPU_ENGINE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kvcache/block_layout.h"
#include "runtime/engine/cpu/expert_load.h"
#include "runtime/comm/communicator.h"
#include "runtime/engine/model_engine.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::engine {

struct CpuEngineOptions {
  // Directory with config.json and model.safetensors (or shards + index).
  std::string model_dir;
  // What the engine speculates with, the instance's `speculative:` block as is (its
  // rules checked by SpeculativeConfig::Validate; the default speculates not at all).
  // kDraftModel loads `draft_model_dir` (its KV in the draft pool); kMtp runs the
  // model's own MTP layer (mtp_module.h; its KV in the draft pool, laid out by
  // DraftBlockLayout); kNgram is the prompt-lookup drafter (no draft model, no draft
  // pool). Dynamic K is the executor's: the engine sizes its buffers by
  // num_draft_tokens.
  spec::SpeculativeConfig speculative;
  // Draft model directory (kDraftModel).
  std::string draft_model_dir;

  // The KV pools (host slabs, not owned; they must outlive the engine), sized with
  // ModelBlockLayout. The layouts must match the models (layers, kv heads, head dim).
  float* target_storage = nullptr;
  kv::BlockLayout target_layout;
  int32_t target_num_blocks = 0;
  float* draft_storage = nullptr;
  kv::BlockLayout draft_layout;
  int32_t draft_num_blocks = 0;

  // The engine thread's expert-parallel group (not owned; must outlive the engine and
  // be used by nothing else). Null: one rank, all experts local.
  comm::Communicator* communicator = nullptr;
  int rank = 0;
  int world_size = 1;
  absl::Duration collective_timeout = absl::Seconds(60);

  // Threads for the GEMMs and attention (including the engine thread). Results do not
  // depend on it.
  int num_threads = 1;

  // Expert-parallel load balancing (docs/eplb.md). A file with the target's expert
  // placement in runtime/eplb's text form (empty: the contiguous sharding).
  std::string expert_placement;
  // Forwards per expert-load window (0: not measured); each window's loads are
  // all-reduced over the group and, with `expert_load_dump`, written there by rank 0.
  int expert_load_window = 0;
  std::string expert_load_dump;
  // Where every rank publishes each window's loads (not owned; must outlive the
  // engine), e.g. for the worker's Stats; null: nowhere.
  ExpertLoadBoard* expert_load_board = nullptr;
  // Live rebalancing (expert_rebalance.h): plan at the end of every Nth expert-load
  // window (0: never; needs expert_load_window) with this many redundant slots per rank.
  int expert_rebalance_windows = 0;
  int expert_redundant_slots = 0;
  // The experts a rank gains: read from the checkpoint in model_dir on the background
  // thread (false, the default: nothing of the load is on the engine thread), or copied
  // from the ranks holding them over `communicator` (true: no checkpoint needed, but the
  // exchange and decode run on the engine thread at the adoption step).
  bool expert_copy_from_peers = false;
};

absl::StatusOr<std::unique_ptr<ModelEngine>> CreateCpuEngine(const CpuEngineOptions& options);

// The KV block layout the model in `model_dir` needs for `tokens_per_block`.
absl::StatusOr<kv::BlockLayout> ModelBlockLayout(const std::string& model_dir,
                                                 int tokens_per_block);

// The draft pool's layout for `speculative`: the draft model's in `draft_model_dir`,
// or with kMtp the MTP layer's of the model in `model_dir`.
absl::StatusOr<kv::BlockLayout> DraftBlockLayout(const spec::SpeculativeConfig& speculative,
                                                 const std::string& model_dir,
                                                 const std::string& draft_model_dir,
                                                 int tokens_per_block);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_CPU_ENGINE_H_
