// CudaTransformer: the ForwardModel (runtime/engine/cpu/forward_model.h) of a decoder-only
// transformer on one GPU, under the same batch runner as the CPU transformer, so
// sequence state, the KV contract, speculation and sampling are the CPU engine's.
//
//   CudaModelOptions options;  options.device = local_rank; options.max_rows = ...;
//   ASSIGN_OR_RETURN(std::unique_ptr<CudaTransformer> model, CudaTransformer::Load(dir, options));
//   ... the KV pool in device memory of model->Layout(tokens_per_block) ...
//   RETURN_IF_ERROR(model->CaptureGraphs(pool, buckets));   // optional
//
// Load reads config.json and the safetensors with the CPU engine's weight plan,
// converts every weight to bf16 (or keeps f32: options.element_bytes 4) and uploads it
// (with expert parallelism only this rank's experts), then allocates the forward's
// scratch and pinned staging once; nothing is allocated per step. Running out of
// device memory names the weight (or buffer), its size and the free memory.
//
// MTP: LoadMtp makes the model of a checkpoint's MTP layer (its rows start from the
// previous hidden states the caller passes in ForwardInput::input_hidden); with
// options.hidden_states a Forward also copies the rows' last hidden states back
// (ForwardInput::hidden_out), as the MTP drafter needs of the target and of the layer.
//
// One Forward: the step is packed on the host (step_layout.h) and copied to the device
// in one transfer, the forward is enqueued on the engine's stream (eagerly, or as the
// CUDA graph of the step's bucket), the logit rows are copied back into pinned memory,
// and the call waits for the stream with the collective timeout; past it, the expert
// group is aborted and Forward returns Unavailable. The returned logits stay valid until
// this model's next Forward (the batch runner and the draft drafter read them before).
//
// KV: the pool is device memory of the model's element type (Layout); spec buffers are
// device memory too (NewSpecBuffer, stream-ordered allocations). A graph is captured
// for one pool and replayed only with it. Ordering: everything a Forward writes (K/V,
// logits) is complete when it returns; CopyKv only enqueues its copies on the model's
// stream, which the next Forward or FinishKvCopies waits for. The engine calls
// FinishKvCopies at the end of every batch, so when Collect hands a batch back no K/V
// copy of it is still in flight, and a BlockCopier on another stream (KV transfer)
// reads the blocks as the batch left them.
//
// Expert parallelism: the MoE rows travel over `group` (NcclGroup's stream-ordered
// all-to-all, on whose stream the model then runs) with a per-peer capacity from the
// step's agreed row count (engine::StepAgreement: the vote, so no extra collective), or
// from a small all-gather of the row counts when the caller brings no agreement (the
// draft model's passes). A rank whose forward fails still makes the step's exchanges
// (with no rows of its own) when nothing of the step was enqueued yet, and otherwise
// aborts the group, so its peers never wait for it until the deadline.
//
// Graphs: decode steps (no context chunk on any rank) replay a graph chosen by
// engine::GraphBuckets::GraphFor: with exchanges, every rank's graph carries the
// exchange capacity of the bucket of the vote's largest row count, and a rank whose
// rows fit the pad dummy's bucket (e.g. it holds only the dummy) computes just that
// bucket; without exchanges a rank replays its own rows' bucket. Others run eagerly.
//
// Thread-compatible: one engine thread (which must not change the current device).
#ifndef LOCKSTEP_RUNTIME_CUDA_ENGINE_CUDA_TRANSFORMER_H_
#define LOCKSTEP_RUNTIME_CUDA_ENGINE_CUDA_TRANSFORMER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kvcache/block_layout.h"
#include "runtime/cuda/kernels/decode_split_plan.h"
#include "runtime/engine/cpu/forward_model.h"
#include "runtime/engine/graph_buckets.h"

namespace lockstep::cuda {

class ForwardTimer;
class NcclGroup;
class RoutingHook;

struct CudaModelOptions {
  std::string name = "target";  // in errors and logs
  int device = 0;
  int element_bytes = 2;  // 2: bf16, 4: f32 (`cuda.dtype`)
  // GEMMs whose rows do not depend on how many rows share them (`cuda.batch_invariant`).
  bool batch_invariant = false;
  // Bounds of one forward, which size the scratch: its rows, its sequences, and the
  // rows that attend by the decode kernel or return logits (sequences * (1 + K)).
  int64_t max_rows = 256;
  int32_t max_seqs = 8;
  int64_t max_decode_rows = 64;
  int tokens_per_block = 16;
  // The most positions of a spec buffer (1 + K of the draft model that uses them).
  int max_spec_tokens = 17;
  kernels::DecodeSplitOptions decode;
  // Expert parallelism (not owned; its stream becomes the model's): null, one rank.
  NcclGroup* group = nullptr;
  // The bound on one forward's wait for the device (and its collectives).
  absl::Duration timeout = absl::Seconds(60);
  // Forwards may return the rows' last hidden states (ForwardInput::hidden_out: the
  // target of an MTP drafter); set by LoadMtp for the MTP layer, which also reads them
  // (ForwardInput::input_hidden).
  bool hidden_states = false;
};

class CudaTransformer final : public engine::ForwardModel {
 public:
  static absl::StatusOr<std::unique_ptr<CudaTransformer>> Load(const std::string& dir,
                                                               const CudaModelOptions& options);
  // The MTP layer of the model in `dir` (runtime/engine/cpu/mtp_module.h) as a one-layer
  // model whose rows start from the MTP prologue: eh_proj([enorm(embedding(token));
  // hnorm(input_hidden)]), every ForwardInput carrying input_hidden; its final norm and
  // LM head are shared_head's. Where the checkpoint omits the layer's embedding or head
  // it shares `target`'s on the device (`target` must outlive it).
  static absl::StatusOr<std::unique_ptr<CudaTransformer>> LoadMtp(const std::string& dir,
                                                                  const CudaModelOptions& options,
                                                                  const CudaTransformer& target);
  ~CudaTransformer() override;
  CudaTransformer(const CudaTransformer&) = delete;
  CudaTransformer& operator=(const CudaTransformer&) = delete;

  // ForwardModel.
  const engine::ModelConfig& config() const override;
  kv::BlockLayout Layout(int tokens_per_block) const override;
  absl::StatusOr<const float*> Forward(const engine::ForwardInput& input,
                                       const engine::KvPoolView& pool, engine::Arena& arena,
                                       engine::ThreadPool* threads) const override;
  // Enqueues the copies on the model's stream (see "Ordering" above); an error is
  // returned by the next Forward.
  void CopyKv(const engine::KvPoolView& pool, const engine::SequenceKv& from,
              const engine::SequenceKv& to, int64_t begin, int64_t end) const override;
  int collectives_per_forward() const override;
  std::unique_ptr<engine::SpecBuffer> NewSpecBuffer(int tokens) const override;

  // Waits (with the model's timeout) until the K/V copies CopyKv enqueued since the
  // last Forward are done; Unavailable past the timeout. Nothing to do without any.
  absl::Status FinishKvCopies();

  // Warms up and captures the decode graphs of buckets.Graphs (each no larger than
  // max_rows and max_decode_rows) for `pool`. Every rank of an expert-parallel group
  // must call it with the same buckets (the warm-up runs the exchanges).
  absl::Status CaptureGraphs(const engine::KvPoolView& pool, const engine::GraphBuckets& buckets);
  int captured_graphs() const;
  // Forwards that replayed a graph, and all forwards that finished.
  int64_t graph_replays() const;
  int64_t forwards() const;

  // Instruments the eager forwards that follow with `timer` (not owned; null: none).
  // Graph replays are not instrumented. For benchmarks.
  void set_forward_timer(ForwardTimer* timer);
  // Instruments the eager forwards' MoE routing that follow with `hook` (not owned;
  // null: none; forward_pass.h). For tests: it waits for the device in every MoE layer.
  void set_routing_hook(RoutingHook* hook);

  // Device bytes of the weights, and of the scratch.
  size_t weight_bytes() const;
  size_t scratch_bytes() const;

 private:
  struct State;
  explicit CudaTransformer(std::unique_ptr<State> state);
  // Load's second half: scratch, staging, stream and GEMM for the loaded weights.
  static absl::StatusOr<std::unique_ptr<CudaTransformer>> Finish(std::unique_ptr<State> state,
                                                                 const std::string& where,
                                                                 int local_experts);

  const std::unique_ptr<State> state_;  // mutable device state behind the const interface
};

}  // namespace lockstep::cuda

#endif  // LOCKSTEP_RUNTIME_CUDA_ENGINE_CUDA_TRANSFORMER_H_
