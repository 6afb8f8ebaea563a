// CudaTransformer's decode graphs: one per key of GraphBuckets::Graphs (a bucket, and
// with expert parallelism also the pad dummy's bucket with every larger exchange
// capacity), captured after an eager warm-up of the same shape (cuBLASLt's algorithm
// choice, lazily loaded kernels and any first-call work happen outside the capture). A
// graph's step is all pad rows, which write no K/V and read only the zeroed pad
// sequence, so capturing touches no sequence; a replay reads the real step from the
// same input buffer.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "runtime/cuda/cuda_status.h"
#include "runtime/cuda/engine/cuda_transformer.h"
#include "runtime/cuda/engine/graph_capture.h"
#include "runtime/cuda/engine/transformer_state.h"

namespace lockstep::cuda {

absl::StatusOr<cudaGraph_t> EndCapture(cudaStream_t stream, const absl::Status& enqueued,
                                       absl::string_view what, GraphDestroyer destroy) {
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  if (enqueued.ok() && ended == cudaSuccess) return graph;
  // A capture whose work failed to enqueue still ends with a graph (it leaked before).
  if (graph != nullptr) destroy(graph);
  if (!enqueued.ok()) {
    return absl::Status(enqueued.code(), absl::StrCat(what, ": ", enqueued.message()));
  }
  return CudaStatus(ended, absl::StrCat(what, ": ending it"));
}

CudaTransformer::State::~State() {
  if (forwards > 0) {
    LOCKSTEP_LOG_INFO("cuda", "{}: {} forwards, {} of them from a decode graph", options.name,
                      forwards, graph_replays);
  }
  cudaSetDevice(options.device);  // the destroying thread may have another current
  if (stream != nullptr) cudaStreamSynchronize(stream);  // shutdown: nothing runs any more
  for (DecodeGraph& g : graphs) {
    if (g.exec != nullptr) cudaGraphExecDestroy(g.exec);
    if (g.graph != nullptr) cudaGraphDestroy(g.graph);
  }
  if (done != nullptr) cudaEventDestroy(done);
  gemm.reset();
  if (own_stream && stream != nullptr) cudaStreamDestroy(stream);
}

int CudaTransformer::captured_graphs() const { return static_cast<int>(state_->graphs.size()); }
int64_t CudaTransformer::graph_replays() const { return state_->graph_replays; }
int64_t CudaTransformer::forwards() const { return state_->forwards; }

absl::Status CudaTransformer::CaptureGraphs(const engine::KvPoolView& pool,
                                            const engine::GraphBuckets& buckets) {
  State& s = *state_;
  RETURN_IF_ERROR(CudaStatus(cudaSetDevice(s.options.device), s.options.name));
  const engine::ForwardInput nothing;  // every row of the bucket is a pad row
  for (const engine::GraphKey& key : buckets.Graphs(s.exchange != nullptr)) {
    const int64_t rows = key.rows;
    if (rows > s.options.max_decode_rows || rows > s.options.max_rows) {
      return absl::InvalidArgumentError(
          absl::StrCat(s.options.name, ": a graph of ", rows, " rows exceeds the engine's ",
                       std::min(s.options.max_decode_rows, s.options.max_rows), " decode rows"));
    }
    const std::string name =
        key.exchange_rows > rows
            ? absl::StrCat(rows, "-row graph with exchanges of ", key.exchange_rows, " rows")
            : absl::StrCat(rows, "-row graph");
    const int64_t moe_rows = key.exchange_rows > 0 ? key.exchange_rows : rows;
    const absl::Time deadline = absl::Now() + s.options.timeout;
    if (s.exchange != nullptr) s.exchange->set_deadline(deadline);
    ASSIGN_OR_RETURN(PackedStep step, PackStep(nothing, s.StepOptionsFor(pool, rows)));
    RETURN_IF_ERROR(s.CheckFits(step, moe_rows));
    const ForwardContext context = s.ContextFor(step, pool, moe_rows);
    RETURN_IF_ERROR(s.Upload(step));
    RETURN_IF_ERROR(s.Enqueue(context));  // the warm-up
    RETURN_IF_ERROR(s.Wait(deadline, absl::StrCat("the warm-up of the ", name)));

    DecodeGraph g;
    g.key = key;
    g.moe_rows = moe_rows;
    g.shape = step.shape;
    g.offsets = step.offsets;
    RETURN_IF_ERROR(CudaStatus(cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeRelaxed),
                               absl::StrCat(s.options.name, ": capturing the ", name)));
    const absl::Status enqueued = s.Enqueue(context);
    ASSIGN_OR_RETURN(g.graph,
                     EndCapture(s.stream, enqueued,
                                absl::StrCat(s.options.name, ": the capture of the ", name)));
    const cudaError_t made = cudaGraphInstantiate(&g.exec, g.graph, 0);
    if (made != cudaSuccess) cudaGraphDestroy(g.graph);
    RETURN_IF_ERROR(CudaStatus(made, absl::StrCat(s.options.name, ": instantiating the ", name)));
    s.graphs.push_back(g);
  }
  s.buckets = buckets;
  s.graph_pool = pool.storage;
  LOCKSTEP_LOG_INFO("cuda", "{}: {} decode graphs captured (buckets up to {} rows{})",
                    s.options.name, s.graphs.size(), buckets.sizes().back(),
                    s.exchange != nullptr ? ", with the pad dummy's" : "");
  return absl::OkStatus();
}

}  // namespace lockstep::cuda
