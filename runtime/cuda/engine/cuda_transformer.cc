#include "runtime/cuda/engine/cuda_transformer.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "runtime/cuda/cuda_status.h"
#include "runtime/cuda/engine/transformer_state.h"
#include "runtime/cuda/engine/weight_convert.h"
#include "runtime/cuda/kernels/bf16.h"
#include "runtime/cuda/poll.h"
#include "runtime/engine/cpu/mtp_module.h"
#include "runtime/engine/model/safetensors.h"
#include "runtime/engine/model/tensor_names.h"
#include "runtime/engine/model/weight_plan.h"

namespace lockstep::cuda {
namespace {

constexpr absl::Duration kSpin = absl::Microseconds(50);

// A spec buffer in device memory (stream-ordered: allocated and freed on the engine's
// stream, so neither synchronizes the device).
class DeviceSpecBuffer final : public engine::SpecBuffer {
 public:
  DeviceSpecBuffer(int device, cudaStream_t stream, void* data)
      : device_(device), stream_(stream), data_(data) {}
  ~DeviceSpecBuffer() override {
    if (data_ == nullptr) return;
    cudaSetDevice(device_);
    cudaFreeAsync(data_, stream_);
  }
  float* data() override { return static_cast<float*>(data_); }

 private:
  const int device_;
  const cudaStream_t stream_;
  void* const data_;
};

absl::Status CheckOptions(const CudaModelOptions& o) {
  if (o.element_bytes != 2 && o.element_bytes != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("element_bytes must be 2 (bf16) or 4 (f32), got ", o.element_bytes));
  }
  if (o.max_rows < 1 || o.max_seqs < 1 || o.max_decode_rows < 1 || o.tokens_per_block < 1 ||
      o.max_spec_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_rows ", o.max_rows, ", max_seqs ", o.max_seqs, ", max_decode_rows ",
                     o.max_decode_rows, ", tokens_per_block ", o.tokens_per_block,
                     ", max_spec_tokens ", o.max_spec_tokens, " must all be >= 1"));
  }
  return absl::OkStatus();
}

// The most experts a layer of `plan` holds on this rank.
int MostLocalExperts(const engine::ModelPlan& plan) {
  int local_experts = 0;
  for (const engine::LayerSource& layer : plan.layers) {
    local_experts = std::max(local_experts, layer.local.size());
  }
  return local_experts;
}

// A weight of one stored tensor: [rows, cols], or a vector of `rows` with cols 0.
engine::WeightSource One(const std::string& name, int rows, int cols) {
  engine::WeightSource w;
  w.label = name;
  w.parts = {{name, rows}};
  w.rows = rows;
  w.cols = cols;
  return w;
}

// The plan of the MTP layer (index target.num_layers) of `tensors` for `rank`: its
// decoder layer (this rank's experts), its embedding (none where the checkpoint shares
// the target's), shared_head.norm as the final norm and shared_head.head as the LM head
// (none where shared), and the prologue's weights in `mtp`.
engine::ModelPlan PlanMtpLayer(const engine::SafetensorsModel& tensors,
                               const engine::ModelConfig& target, int rank, int world,
                               MtpSources* mtp) {
  const int index = target.num_layers;
  const int hidden = target.hidden_size;
  const int vocab = target.vocab_size;
  engine::ModelConfig extended = target;
  extended.num_layers = index + 1;
  extended.moe_layer.push_back(engine::MtpLayerConfig(target).moe_layer[0]);
  engine::ModelPlan full = engine::PlanWeights(extended, rank, world);
  engine::ModelPlan plan;
  plan.layers.push_back(std::move(full.layers[index]));
  const std::string embedding = engine::LayerName(index, "embed_tokens.weight");
  if (tensors.Contains(embedding)) plan.embedding = One(embedding, vocab, hidden);
  plan.final_norm = One(engine::LayerName(index, "shared_head.norm.weight"), hidden, 0);
  const std::string head = engine::LayerName(index, "shared_head.head.weight");
  if (tensors.Contains(head)) plan.lm_head = One(head, vocab, hidden);
  mtp->enorm = One(engine::LayerName(index, "enorm.weight"), hidden, 0);
  mtp->hnorm = One(engine::LayerName(index, "hnorm.weight"), hidden, 0);
  mtp->eh_proj = One(engine::LayerName(index, "eh_proj.weight"), hidden, 2 * hidden);
  return plan;
}

}  // namespace

absl::Status NcclExpertExchange::AllToAll(const void* send, void* recv, int64_t count, Type type) {
  const std::vector<int64_t> counts(group_->world_size(), count);
  const ncclDataType_t nccl = type == Type::kBf16  ? ncclBfloat16
                              : type == Type::kF32 ? ncclFloat32
                                                   : ncclInt32;
  return group_->DeviceAllToAllV(send, counts, recv, counts, nccl, deadline_);
}

StepOptions CudaTransformer::State::StepOptionsFor(const engine::KvPoolView& pool,
                                                   int64_t graph_rows) const {
  StepOptions o;
  o.tokens_per_block = pool.layout.tokens_per_block;
  o.num_blocks = pool.num_blocks;
  o.decode = options.decode;
  o.pad_spec = reinterpret_cast<uint64_t>(pad_spec.get());
  if (graph_rows > 0) {
    o.graph_rows = static_cast<int32_t>(graph_rows);
    o.graph_seqs = static_cast<int32_t>(std::min<int64_t>(graph_rows, options.max_seqs)) + 1;
    o.graph_table_stride = layout.max_step.table_stride;
    o.graph_max_splits = options.decode.max_splits;
    o.graph_spec_tokens = options.max_spec_tokens;  // the pad buffer's, and NewSpecBuffer's
  }
  return o;
}

ForwardContext CudaTransformer::State::ContextFor(const PackedStep& step,
                                                  const engine::KvPoolView& pool, int64_t moe_rows,
                                                  bool timed) const {
  ForwardContext c;
  c.config = &config;
  c.weights = &weights;
  c.gemm = gemm.get();
  c.stream = stream;
  c.scratch = scratch.as<std::byte>();
  c.layout = &layout;
  c.shape = step.shape;
  c.offsets = step.offsets;
  c.kv.storage = pool.storage;
  c.kv.element_bytes = options.element_bytes;
  c.kv.num_layers = config.num_layers;
  c.kv.num_kv_heads = config.cache_kv_heads();
  c.kv.head_dim = config.cache_head_dim();
  c.kv.tokens_per_block = pool.layout.tokens_per_block;
  if (config.is_moe()) {
    c.moe = MoeExchangeFor(moe_rows, config.num_experts_per_tok,
                           MaxLocalExperts(config.num_experts, world), world);
  }
  c.exchange = exchange.get();
  if (timed) {
    c.timer = timer;
    c.routing = routing;
  }
  return c;
}

absl::Status CudaTransformer::State::CheckFits(const PackedStep& step, int64_t moe_rows) const {
  const StepShape& s = step.shape;
  const StepShape& m = layout.max_step;
  if (s.rows > m.rows || s.logit_rows > m.logit_rows || s.seqs > m.seqs ||
      s.table_stride > m.table_stride || s.decode_rows > m.decode_rows ||
      s.decode_items > m.decode_items || s.prefill_tiles > m.prefill_tiles ||
      step.offsets.bytes > layout.input_bytes || moe_rows > m.rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        options.name, ": a step of ", s.rows, " rows (", s.logit_rows, " with logits, ",
        s.decode_rows, " decode rows, ", s.seqs - 1, " sequences, tables of ", s.table_stride,
        " blocks) exceeds the engine's bounds (", m.rows, " rows, ", m.logit_rows, " with logits, ",
        m.seqs - 1, " sequences, tables of ", m.table_stride, " blocks)"));
  }
  return absl::OkStatus();
}

absl::Status CudaTransformer::State::Upload(const PackedStep& step, const float* input_hidden,
                                            int64_t rows) {
  std::memcpy(pinned_input.get(), step.bytes.data(), step.bytes.size());
  RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(scratch.as<std::byte>() + layout.input,
                                             pinned_input.get(), step.bytes.size(),
                                             cudaMemcpyHostToDevice, stream),
                             absl::StrCat(options.name, ": copying the step to the device")));
  if (input_hidden == nullptr || rows == 0) return absl::OkStatus();
  const size_t values = static_cast<size_t>(rows) * config.hidden_size;
  if (options.element_bytes == 4) {
    std::memcpy(pinned_hidden.get(), input_hidden, values * sizeof(float));
  } else {
    kernels::Bf16* out = pinned_hidden.as<kernels::Bf16>();
    for (size_t i = 0; i < values; ++i) out[i] = kernels::FloatToBf16(input_hidden[i]);
  }
  return CudaStatus(cudaMemcpyAsync(scratch.as<std::byte>() + layout.hidden_in, pinned_hidden.get(),
                                    values * options.element_bytes, cudaMemcpyHostToDevice, stream),
                    absl::StrCat(options.name, ": copying the hidden states to the device"));
}

absl::Status CudaTransformer::State::Enqueue(const ForwardContext& context) const {
  return options.element_bytes == 4 ? EnqueueForward<float>(context)
                                    : EnqueueForward<kernels::Bf16>(context);
}

absl::Status CudaTransformer::State::Wait(absl::Time deadline, const std::string& what) {
  absl::Status s;
  if (options.group != nullptr) {
    s = options.group->Sync(deadline);
  } else {
    s = CudaStatus(cudaEventRecord(done, stream), "cudaEventRecord");
    if (s.ok()) {
      s = Poll(
          [&]() -> absl::StatusOr<bool> {
            const cudaError_t query = cudaEventQuery(done);
            if (query == cudaErrorNotReady) return false;
            RETURN_IF_ERROR(CudaStatus(query, what));
            return true;
          },
          deadline, kSpin, what);
    }
  }
  if (absl::IsDeadlineExceeded(s)) {
    if (options.group != nullptr) options.group->Abort();
    return absl::UnavailableError(absl::StrCat(
        options.name, ": ", what, " did not finish within ", absl::FormatDuration(options.timeout),
        options.group != nullptr ? " (the expert-parallel group is aborted)" : ""));
  }
  return s;
}

absl::StatusOr<int64_t> CudaTransformer::State::AgreeRows(int64_t rows, absl::Time deadline) {
  if (world == 1 || moe_layers == 0) return rows;
  std::vector<int64_t> all(world, 0);
  RETURN_IF_ERROR(options.group->AllGatherFixed(
      absl::string_view(reinterpret_cast<const char*>(&rows), sizeof(rows)),
      reinterpret_cast<char*>(all.data()), deadline));
  return *std::max_element(all.begin(), all.end());
}

absl::Status CudaTransformer::State::FailBeforeForward(absl::Status error,
                                                       const engine::KvPoolView& pool,
                                                       int64_t moe_rows, absl::Time deadline) {
  if (exchange == nullptr) return error;
  // This rank's step fails, but its peers are already in theirs: make the same
  // exchanges with no rows, so they do not wait for this rank until the deadline.
  bool joined = false;
  if (moe_rows <= layout.max_step.rows) {
    absl::StatusOr<PackedStep> none = PackStep(engine::ForwardInput{}, StepOptionsFor(pool, 0));
    if (none.ok() && Upload(*none).ok()) {
      if (Enqueue(ContextFor(*none, pool, moe_rows)).ok()) {
        // Past the deadline, Wait aborts the group itself.
        joined = Wait(deadline, "the exchanges of a failed step").ok();
      } else {
        options.group->Abort();  // part of the exchanges may be on the stream
        return error;
      }
    }
  }
  if (!joined) options.group->Abort();
  return error;
}

absl::Status CudaTransformer::State::FailAfterForward(absl::Status error, bool exchanges_enqueued,
                                                      absl::Time deadline) {
  if (exchange != nullptr && !exchanges_enqueued) {
    // The peers' exchanges cannot be matched any more: fail them now, not at the deadline.
    options.group->Abort();
    return error;
  }
  (void)Wait(deadline, "the rest of a failed step");
  return error;
}

CudaTransformer::CudaTransformer(std::unique_ptr<State> state) : state_(std::move(state)) {}

CudaTransformer::~CudaTransformer() = default;

absl::StatusOr<std::unique_ptr<CudaTransformer>> CudaTransformer::Load(
    const std::string& dir, const CudaModelOptions& options) {
  RETURN_IF_ERROR(CheckOptions(options));
  auto state = std::make_unique<State>();
  State& s = *state;
  s.options = options;
  s.world = options.group != nullptr ? options.group->world_size() : 1;
  const int rank = options.group != nullptr ? options.group->rank() : 0;
  ASSIGN_OR_RETURN(s.config, engine::LoadModelConfig(dir));
  const std::string where =
      absl::StrCat(options.name, " model ", dir, " on device ", options.device);
  RETURN_IF_ERROR(CudaStatus(cudaSetDevice(options.device), where));
  ASSIGN_OR_RETURN(std::unique_ptr<engine::SafetensorsModel> tensors,
                   engine::SafetensorsModel::Open(dir));
  const engine::ModelPlan plan = engine::PlanWeights(s.config, rank, s.world);
  absl::StatusOr<DeviceWeights> weights =
      UploadWeights(*tensors, s.config, plan, options.element_bytes, options.device);
  if (!weights.ok()) {
    return absl::Status(weights.status().code(),
                        absl::StrCat(where, ": ", weights.status().message()));
  }
  s.weights = *std::move(weights);
  return Finish(std::move(state), where, MostLocalExperts(plan));
}

absl::StatusOr<std::unique_ptr<CudaTransformer>> CudaTransformer::LoadMtp(
    const std::string& dir, const CudaModelOptions& options, const CudaTransformer& target) {
  RETURN_IF_ERROR(CheckOptions(options));
  auto state = std::make_unique<State>();
  State& s = *state;
  s.options = options;
  s.options.hidden_states = true;
  s.world = options.group != nullptr ? options.group->world_size() : 1;
  const int rank = options.group != nullptr ? options.group->rank() : 0;
  ASSIGN_OR_RETURN(const engine::ModelConfig target_config, engine::MtpTargetConfig(dir));
  s.config = engine::MtpLayerConfig(target_config);
  const std::string where =
      absl::StrCat(options.name, " MTP layer of ", dir, " on device ", options.device);
  RETURN_IF_ERROR(CudaStatus(cudaSetDevice(options.device), where));
  ASSIGN_OR_RETURN(std::unique_ptr<engine::SafetensorsModel> tensors,
                   engine::SafetensorsModel::Open(dir));
  MtpSources mtp;
  const engine::ModelPlan plan = PlanMtpLayer(*tensors, target_config, rank, s.world, &mtp);
  absl::StatusOr<DeviceWeights> weights =
      UploadWeights(*tensors, s.config, plan, options.element_bytes, options.device, &mtp);
  if (!weights.ok()) {
    return absl::Status(weights.status().code(),
                        absl::StrCat(where, ": ", weights.status().message()));
  }
  s.weights = *std::move(weights);
  if (s.weights.embedding == nullptr) s.weights.embedding = target.state_->weights.embedding;
  if (s.weights.lm_head == nullptr) s.weights.lm_head = target.state_->weights.lm_head;
  if (target.state_->options.element_bytes != options.element_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": the target's elements are of another type"));
  }
  return Finish(std::move(state), where, MostLocalExperts(plan));
}

absl::StatusOr<std::unique_ptr<CudaTransformer>> CudaTransformer::Finish(
    std::unique_ptr<State> state, const std::string& where, int local_experts) {
  State& s = *state;
  const CudaModelOptions& options = s.options;
  for (int i = 0; i < s.config.num_layers; ++i) {
    s.moe_layers += s.config.is_moe() && s.config.moe_layer[i] ? 1 : 0;
  }
  ScratchOptions so;
  so.element_bytes = options.element_bytes;
  so.max_rows = options.max_rows;
  so.max_seqs = options.max_seqs;
  so.max_decode_rows = options.max_decode_rows;
  so.max_table_stride = static_cast<int32_t>(
      (s.config.max_position + options.tokens_per_block - 1) / options.tokens_per_block);
  so.max_splits = options.decode.max_splits;
  so.world_size = s.world;
  so.mtp = s.weights.mtp.eh_proj != nullptr;
  ASSIGN_OR_RETURN(s.layout, PlanScratch(s.config, so));
  ASSIGN_OR_RETURN(s.scratch, DeviceBuffer::Allocate(options.device, s.layout.bytes,
                                                     absl::StrCat(where, ": forward scratch")));
  if (so.mtp) {  // what a graph's warm-up and pad rows read before any step brought any
    RETURN_IF_ERROR(CudaStatus(
        cudaMemset(s.scratch.as<std::byte>() + s.layout.hidden_in, 0,
                   static_cast<size_t>(options.max_rows) * s.config.hidden_size *
                       options.element_bytes),
        where));
  }
  const size_t pad_bytes =
      engine::SpecBufferFloats(
          kv::BlockLayout{s.config.num_layers, s.config.cache_kv_heads(), s.config.cache_head_dim(),
                          1},
          options.max_spec_tokens) *
      options.element_bytes;
  ASSIGN_OR_RETURN(s.pad_spec, DeviceBuffer::Allocate(options.device, pad_bytes,
                                                      absl::StrCat(where, ": pad K/V")));
  RETURN_IF_ERROR(CudaStatus(cudaMemset(s.pad_spec.get(), 0, pad_bytes), where));
  ASSIGN_OR_RETURN(s.pinned_input,
                   PinnedBuffer::Allocate(s.layout.input_bytes, absl::StrCat(where, " steps")));
  ASSIGN_OR_RETURN(s.pinned_logits,
                   PinnedBuffer::Allocate(static_cast<size_t>(s.layout.max_step.logit_rows) *
                                              s.config.vocab_size * sizeof(float),
                                          absl::StrCat(where, " logits")));
  if (options.hidden_states) {
    ASSIGN_OR_RETURN(s.pinned_hidden,
                     PinnedBuffer::Allocate(static_cast<size_t>(options.max_rows) *
                                                s.config.hidden_size * options.element_bytes,
                                            absl::StrCat(where, " hidden states")));
  }
  if (options.group != nullptr) {
    s.stream = options.group->stream();
    if (s.moe_layers > 0 && s.world > 1) {
      s.exchange = std::make_unique<NcclExpertExchange>(options.group);
    }
  } else {
    RETURN_IF_ERROR(CudaStatus(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking),
                               absl::StrCat(where, ": stream")));
    s.own_stream = true;
  }
  RETURN_IF_ERROR(CudaStatus(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming),
                             absl::StrCat(where, ": event")));
  kernels::GemmOptions gemm;
  gemm.batch_invariant = options.batch_invariant;
  // The invariance check at a GEMM's first use compares M = 1 with the most rows a
  // forward runs through it, up to 512 (its probe memory: an LM head's f32 output of
  // 512 rows of a 128k vocabulary is 256 MiB).
  gemm.invariant_check_m = std::clamp<int64_t>(options.max_rows, 2, 512);
  ASSIGN_OR_RETURN(s.gemm, kernels::CublasLtGemm::Create(s.stream, gemm));
  RETURN_IF_ERROR(CudaStatus(cudaDeviceSynchronize(), where));  // load time only
  LOCKSTEP_LOG_INFO("cuda",
                    "{}: {} weights of {} bytes ({} of {} experts per MoE layer), "
                    "scratch of {} bytes, KV of {} bytes per token{}",
                    where, ElementName(options.element_bytes), s.weights.bytes, local_experts,
                    s.config.num_experts, s.layout.bytes,
                    s.config.kv_values_per_token() * options.element_bytes,
                    s.config.mla ? " (MLA latent cache)" : "");
  return std::unique_ptr<CudaTransformer>(new CudaTransformer(std::move(state)));
}

const engine::ModelConfig& CudaTransformer::config() const { return state_->config; }

kv::BlockLayout CudaTransformer::Layout(int tokens_per_block) const {
  const engine::ModelConfig& c = state_->config;
  // The engines' shared cache shape (MLA: the latent vector as one KV head).
  return kv::BlockLayout{c.num_layers, c.cache_kv_heads(), c.cache_head_dim(), tokens_per_block,
                         state_->options.element_bytes};
}

int CudaTransformer::collectives_per_forward() const {
  return state_->exchange != nullptr ? 3 * state_->moe_layers : 0;
}

size_t CudaTransformer::weight_bytes() const { return state_->weights.bytes; }
size_t CudaTransformer::scratch_bytes() const { return state_->layout.bytes; }

absl::StatusOr<const float*> CudaTransformer::Forward(const engine::ForwardInput& input,
                                                      const engine::KvPoolView& pool,
                                                      engine::Arena& /*arena*/,
                                                      engine::ThreadPool* /*threads*/) const {
  State& s = *state_;
  const absl::Time deadline = absl::Now() + s.options.timeout;
  if (s.exchange != nullptr) s.exchange->set_deadline(deadline);
  const int64_t local_rows = static_cast<int64_t>(input.rows.size());
  const engine::StepAgreement& agreement = input.agreement;
  // Every rank sizes its exchange and picks its graph from the vote (the same values on
  // every rank); a rank with more rows than the vote says plans as if it had the vote's.
  const int64_t planned_rows =
      agreement.agreed ? std::min(local_rows, agreement.max_rows) : local_rows;
  const DecodeGraph* graph = nullptr;
  if (!s.graphs.empty() && pool.storage == s.graph_pool && !agreement.any_context &&
      (s.exchange == nullptr || agreement.agreed)) {
    if (std::optional<engine::GraphKey> key =
            s.buckets->GraphFor(planned_rows, agreement.max_rows, s.exchange != nullptr)) {
      for (const DecodeGraph& g : s.graphs) {
        if (g.key == *key) graph = &g;
      }
    }
  }
  int64_t moe_rows = planned_rows;
  if (graph != nullptr) {
    moe_rows = graph->moe_rows;
  } else if (agreement.agreed) {
    moe_rows = agreement.max_rows;
  } else {
    ASSIGN_OR_RETURN(moe_rows, s.AgreeRows(local_rows, deadline));
  }
  if (!s.pending.ok()) {
    return s.FailBeforeForward(std::exchange(s.pending, absl::OkStatus()), pool, moe_rows,
                               deadline);
  }
  if (local_rows > planned_rows) {
    // A rank with more rows would send more than its peers expect.
    return s.FailBeforeForward(absl::InternalError(absl::StrCat(
                                   s.options.name, ": a forward of ", local_rows,
                                   " rows in a step whose vote says at most ", agreement.max_rows)),
                               pool, moe_rows, deadline);
  }
  absl::StatusOr<PackedStep> packed =
      PackStep(input, s.StepOptionsFor(pool, graph != nullptr ? graph->key.rows : 0));
  if (graph != nullptr && (!packed.ok() || !(packed->shape == graph->shape))) {
    // Not the graph's shape after all: eagerly, with the exchange the others replay.
    graph = nullptr;
    packed = PackStep(input, s.StepOptionsFor(pool, 0));
  }
  const absl::Status fits = packed.ok() ? s.CheckFits(*packed, moe_rows) : packed.status();
  if (!fits.ok()) return s.FailBeforeForward(fits, pool, moe_rows, deadline);
  const PackedStep& step = *packed;
  const bool mtp = s.weights.mtp.eh_proj != nullptr;
  if ((mtp && input.input_hidden == nullptr) || (!mtp && input.input_hidden != nullptr) ||
      (input.hidden_out != nullptr && !s.options.hidden_states)) {
    return s.FailBeforeForward(
        absl::InvalidArgumentError(absl::StrCat(
            s.options.name, mtp ? ": an MTP layer's forward needs the previous hidden states"
                                : ": this model neither reads nor returns hidden states")),
        pool, moe_rows, deadline);
  }
  if (absl::Status uploaded = s.Upload(step, input.input_hidden, local_rows); !uploaded.ok()) {
    return s.FailBeforeForward(uploaded, pool, moe_rows, deadline);
  }
  if (graph != nullptr) {
    const absl::Status launched =
        CudaStatus(cudaGraphLaunch(graph->exec, s.stream),
                   absl::StrCat(s.options.name, ": graph of ", graph->key.rows, " rows"));
    // A graph that did not launch enqueued nothing: the step's exchanges can still be made.
    if (!launched.ok()) return s.FailBeforeForward(launched, pool, moe_rows, deadline);
  } else if (absl::Status enqueued = s.Enqueue(s.ContextFor(step, pool, moe_rows, true));
             !enqueued.ok()) {
    return s.FailAfterForward(enqueued, /*exchanges_enqueued=*/false, deadline);
  }
  const size_t logit_bytes =
      static_cast<size_t>(step.real_logits) * s.config.vocab_size * sizeof(float);
  if (logit_bytes > 0) {
    const absl::Status copied = CudaStatus(
        cudaMemcpyAsync(s.pinned_logits.get(), s.scratch.as<std::byte>() + s.layout.logits,
                        logit_bytes, cudaMemcpyDeviceToHost, s.stream),
        absl::StrCat(s.options.name, ": copying the logits back"));
    if (!copied.ok()) return s.FailAfterForward(copied, /*exchanges_enqueued=*/true, deadline);
  }
  const size_t hidden_values = static_cast<size_t>(local_rows) * s.config.hidden_size;
  if (input.hidden_out != nullptr && hidden_values > 0) {
    const absl::Status copied = CudaStatus(
        cudaMemcpyAsync(s.pinned_hidden.get(), s.scratch.as<std::byte>() + s.layout.h,
                        hidden_values * s.options.element_bytes, cudaMemcpyDeviceToHost, s.stream),
        absl::StrCat(s.options.name, ": copying the hidden states back"));
    if (!copied.ok()) return s.FailAfterForward(copied, /*exchanges_enqueued=*/true, deadline);
  }
  RETURN_IF_ERROR(s.Wait(deadline, absl::StrCat("the forward of ", local_rows, " rows")));
  s.kv_copies_pending = false;  // the wait covered them
  if (input.hidden_out != nullptr && hidden_values > 0) {
    if (s.options.element_bytes == 4) {
      std::memcpy(input.hidden_out, s.pinned_hidden.get(), hidden_values * sizeof(float));
    } else {
      const kernels::Bf16* in = s.pinned_hidden.as<const kernels::Bf16>();
      for (size_t i = 0; i < hidden_values; ++i) input.hidden_out[i] = kernels::Bf16ToFloat(in[i]);
    }
  }
  ++s.forwards;
  if (graph != nullptr) ++s.graph_replays;
  return s.pinned_logits.as<const float>();
}

void CudaTransformer::CopyKv(const engine::KvPoolView& pool, const engine::SequenceKv& from,
                             const engine::SequenceKv& to, int64_t begin, int64_t end) const {
  State& s = *state_;
  const kv::BlockLayout layout = Layout(pool.layout.tokens_per_block);
  const size_t element = static_cast<size_t>(s.options.element_bytes);
  const size_t row = static_cast<size_t>(layout.head_dim) * element;
  const size_t planes = static_cast<size_t>(layout.num_layers) * 2 * layout.num_kv_heads;
  // Position p's first plane in `seq`, and the distance between its planes.
  auto where = [&](const engine::SequenceKv& seq, int64_t p, size_t* pitch) -> std::byte* {
    if (p >= seq.spec_base) {
      if (seq.spec == nullptr) return nullptr;  // its allocation failed (NewSpecBuffer)
      *pitch = static_cast<size_t>(seq.spec_tokens) * row;
      return reinterpret_cast<std::byte*>(seq.spec) + (p - seq.spec_base) * row;
    }
    *pitch = static_cast<size_t>(layout.tokens_per_block) * row;
    const int64_t block = seq.blocks[p / layout.tokens_per_block].value();
    return reinterpret_cast<std::byte*>(pool.storage) + block * layout.BlockBytes() +
           (p % layout.tokens_per_block) * row;
  };
  for (int64_t p = begin; p < end && s.pending.ok(); ++p) {
    size_t from_pitch = 0, to_pitch = 0;
    const std::byte* src = where(from, p, &from_pitch);
    std::byte* dst = where(to, p, &to_pitch);
    if (src == nullptr || dst == nullptr) {
      s.pending = absl::InternalError(absl::StrCat(s.options.name, ": moving K/V of position ", p,
                                                   " into or out of a missing spec buffer"));
      return;
    }
    s.pending = CudaStatus(cudaMemcpy2DAsync(dst, to_pitch, src, from_pitch, row, planes,
                                             cudaMemcpyDeviceToDevice, s.stream),
                           absl::StrCat(s.options.name, ": moving K/V of position ", p));
    s.kv_copies_pending = true;
  }
}

absl::Status CudaTransformer::FinishKvCopies() {
  State& s = *state_;
  if (!s.kv_copies_pending) return absl::OkStatus();
  RETURN_IF_ERROR(CudaStatus(cudaSetDevice(s.options.device), s.options.name));
  RETURN_IF_ERROR(s.Wait(absl::Now() + s.options.timeout, "moving K/V out of spec buffers"));
  s.kv_copies_pending = false;
  return absl::OkStatus();
}

void CudaTransformer::set_forward_timer(ForwardTimer* timer) { state_->timer = timer; }

void CudaTransformer::set_routing_hook(RoutingHook* hook) { state_->routing = hook; }

std::unique_ptr<engine::SpecBuffer> CudaTransformer::NewSpecBuffer(int tokens) const {
  State& s = *state_;
  const size_t bytes = engine::SpecBufferFloats(Layout(1), tokens) * s.options.element_bytes;
  void* data = nullptr;
  cudaError_t error = cudaMallocAsync(&data, bytes, s.stream);
  if (error == cudaSuccess) error = cudaMemsetAsync(data, 0, bytes, s.stream);
  if (error != cudaSuccess) {
    // A forward reaching into the missing buffer fails its batch (PackStep says why).
    LOCKSTEP_LOG_ERROR("cuda", "{}: a spec buffer of {} bytes: {}", s.options.name, bytes,
                       CudaStatus(error, "cudaMallocAsync").ToString());
    cudaGetLastError();
    data = nullptr;
  }
  return std::make_unique<DeviceSpecBuffer>(s.options.device, s.stream, data);
}

}  // namespace lockstep::cuda
