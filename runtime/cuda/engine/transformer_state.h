// The device state of a CudaTransformer (cuda_transformer.h), shared by its .cc files:
// weights, scratch, staging, stream, GEMM handle, the expert exchange and the captured
// graphs. Internal to the package.
#ifndef LOCKSTEP_RUNTIME_CUDA_ENGINE_TRANSFORMER_STATE_H_
#define LOCKSTEP_RUNTIME_CUDA_ENGINE_TRANSFORMER_STATE_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/cuda/engine/cuda_transformer.h"
#include "runtime/cuda/engine/device_memory.h"
#include "runtime/cuda/engine/device_weights.h"
#include "runtime/cuda/engine/forward_pass.h"
#include "runtime/cuda/engine/forward_scratch.h"
#include "runtime/cuda/engine/step_layout.h"
#include "runtime/cuda/kernels/cublaslt_gemm.h"
#include "runtime/cuda/nccl_group.h"
#include "runtime/engine/graph_buckets.h"
#include "runtime/engine/model/model_config.h"

namespace lockstep::cuda {

// The MoE all-to-all over an NcclGroup (equal counts to and from every rank), bounded by
// the deadline of the forward it belongs to.
class NcclExpertExchange final : public ExpertExchange {
 public:
  explicit NcclExpertExchange(NcclGroup* group) : group_(group) {}
  int world_size() const override { return group_->world_size(); }
  absl::Status AllToAll(const void* send, void* recv, int64_t count, Type type) override;
  void set_deadline(absl::Time deadline) { deadline_ = deadline; }

 private:
  NcclGroup* const group_;
  absl::Time deadline_ = absl::InfiniteFuture();
};

// One captured decode graph.
struct DecodeGraph {
  engine::GraphKey key;  // its bucket and exchange bucket
  int64_t moe_rows = 0;  // the rows its MoE exchange is sized for
  StepShape shape;
  StepOffsets offsets;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
};

struct CudaTransformer::State {
  ~State();

  engine::ModelConfig config;
  CudaModelOptions options;
  int world = 1;
  int moe_layers = 0;
  DeviceWeights weights;
  ScratchLayout layout;
  DeviceBuffer scratch;
  DeviceBuffer pad_spec;  // zeroed: what the pad rows of a graph attend to
  PinnedBuffer pinned_input;
  PinnedBuffer pinned_logits;
  PinnedBuffer pinned_hidden;  // hidden states in and out (options.hidden_states); else empty
  cudaStream_t stream = nullptr;
  bool own_stream = false;
  cudaEvent_t done = nullptr;
  std::unique_ptr<kernels::CublasLtGemm> gemm;
  std::unique_ptr<NcclExpertExchange> exchange;  // null: one rank
  absl::Status pending;                          // a CopyKv error, returned by the next Forward
  bool kv_copies_pending = false;                // CopyKv enqueued copies no Wait has covered yet
  ForwardTimer* timer = nullptr;  // instruments eager forwards (a benchmark's); not owned
  RoutingHook* routing = nullptr;  // instruments eager forwards' routing (a test's); not owned

  int64_t forwards = 0;       // finished
  int64_t graph_replays = 0;  // of those, from a graph
  std::vector<DecodeGraph> graphs;
  std::optional<engine::GraphBuckets> buckets;
  const void* graph_pool = nullptr;  // the pool the graphs were captured for

  StepOptions StepOptionsFor(const engine::KvPoolView& pool, int64_t graph_rows) const;
  // The context of `step` over `pool` with the exchange sized for `moe_rows` rows
  // (with the timer and the routing hook when `timed`: an eager forward).
  ForwardContext ContextFor(const PackedStep& step, const engine::KvPoolView& pool,
                            int64_t moe_rows, bool timed = false) const;
  // InvalidArgument when `step` or `moe_rows` exceed what the scratch holds.
  absl::Status CheckFits(const PackedStep& step, int64_t moe_rows) const;
  // Copies the packed step to the device (stream order), and the rows' previous hidden
  // states of an MTP layer's step (`input_hidden`, rows of the config's hidden size).
  absl::Status Upload(const PackedStep& step, const float* input_hidden = nullptr,
                      int64_t rows = 0);
  // EnqueueForward in the element type.
  absl::Status Enqueue(const ForwardContext& context) const;
  // Waits for everything on the stream; past the deadline, aborts the expert group and
  // returns Unavailable naming `what`.
  absl::Status Wait(absl::Time deadline, const std::string& what);
  // The most rows any rank's forward has (an all-gather; `rows` with one rank).
  absl::StatusOr<int64_t> AgreeRows(int64_t rows, absl::Time deadline);

  // The failure paths of a forward, so that no peer of an expert-parallel group waits
  // for this rank until the deadline. Both return `error`.
  // Before anything of the step was enqueued: makes the step's exchanges (sized for
  // `moe_rows`) with no rows of this rank, or, when even that fails, aborts the group.
  absl::Status FailBeforeForward(absl::Status error, const engine::KvPoolView& pool,
                                 int64_t moe_rows, absl::Time deadline);
  // After the forward was (perhaps partly) enqueued: aborts the group unless
  // `exchanges_enqueued` (every exchange of the step is on the stream); otherwise waits
  // for the stream (so the staging buffers are free for the next step).
  absl::Status FailAfterForward(absl::Status error, bool exchanges_enqueued, absl::Time deadline);
};

}  // namespace lockstep::cuda

#endif  // LOCKSTEP_RUNTIME_CUDA_ENGINE_TRANSFORMER_STATE_H_
