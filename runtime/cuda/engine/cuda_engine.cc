#include "runtime/cuda/engine/cuda_engine.h"

#include <cuda_runtime_api.h>

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "runtime/comm/rendezvous_client.h"
#include "runtime/cuda/cuda_status.h"
#include "runtime/cuda/engine/cuda_mtp.h"
#include "runtime/engine/cpu/batch_runner.h"
#include "runtime/engine/cpu/draft_model_drafter.h"
#include "runtime/engine/cpu/mtp_drafter.h"
#include "runtime/engine/cpu/sampler_grammar.h"
#include "runtime/engine/engine_thread.h"
#include "runtime/engine/graph_buckets.h"
#include "runtime/engine/model/model_config.h"
#include "spec_decode/ngram_drafter.h"

namespace lockstep::cuda {
namespace {

// The CUDA engine's parts: the models, the drafter and the batch runner over them. The
// runner samples on the host from the logits the model copied back, so constrained
// decoding is the CPU engine's: the grammar's mask on the logits of the rank that owns
// the request (runtime/engine/cpu/sampler_grammar.h), its vocabulary from `model_dir`.
class CudaParts final : public engine::EngineParts {
 public:
  CudaParts(int device, std::unique_ptr<CudaTransformer> target,
            std::unique_ptr<CudaTransformer> draft, std::unique_ptr<CudaMtp> mtp,
            std::unique_ptr<spec::Drafter> drafter,
            const engine::KvPoolView& target_pool, const engine::KvPoolView& draft_pool, int k,
            const std::string& model_dir)
      : device_(device),
        target_(std::move(target)),
        draft_(std::move(draft)),
        mtp_(std::move(mtp)),
        drafter_(std::move(drafter)),
        grammars_(model_dir, target_->config().vocab_size, target_->config().eos_token_id),
        runner_(target_.get(), target_pool, drafter_.get(), draft_pool, k, nullptr) {
    runner_.set_grammar_source(&grammars_);
  }

  absl::StatusOr<engine::BatchResult> Run(const engine::Batch& batch) override {
    // The engine thread's device (CUDA's current device is per thread).
    RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device_), absl::StrCat("device ", device_)));
    absl::StatusOr<engine::BatchResult> result = runner_.Run(batch);
    // The batch's K/V copies (confirmed drafts out of spec buffers) are done before
    // Collect returns it: the executor may hand its blocks to a BlockCopier next.
    absl::Status copies = target_->FinishKvCopies();
    if (draft_ != nullptr && copies.ok()) copies = draft_->FinishKvCopies();
    if (mtp_ != nullptr && copies.ok()) copies = mtp_->model()->FinishKvCopies();
    if (!copies.ok() && result.ok()) return copies;
    return result;
  }

 private:
  const int device_;
  const std::unique_ptr<CudaTransformer> target_;
  const std::unique_ptr<CudaTransformer> draft_;
  const std::unique_ptr<CudaMtp> mtp_;
  const std::unique_ptr<spec::Drafter> drafter_;  // the draft model's, MTP, n-gram, or null
  engine::GrammarSource grammars_;  // constrained decoding's vocabulary and compiled grammars
  engine::BatchRunner runner_;
};

bool DraftModel(const engine::DeviceEngineOptions& o) {
  return o.speculative.needs_draft_kv() && o.speculative.method == spec::Method::kDraftModel;
}

// The model's own MTP layer drafts (its KV in the draft pool).
bool Mtp(const engine::DeviceEngineOptions& o) {
  return o.speculative.needs_draft_kv() && o.speculative.method == spec::Method::kMtp;
}

// K: the most drafts per generation step (0 without speculation).
int DraftTokens(const engine::DeviceEngineOptions& o) {
  return o.speculative.enabled() ? o.speculative.num_draft_tokens : 0;
}

absl::Status CheckOptions(const engine::DeviceEngineOptions& o) {
  if (o.model_dir.empty()) return absl::InvalidArgumentError("model_dir is required");
  RETURN_IF_ERROR(o.speculative.Validate());
  if (DraftModel(o) && o.draft_model_dir.empty()) {
    return absl::InvalidArgumentError("speculative.method draft_model needs draft_model_dir");
  }
  if (Mtp(o) && !o.draft_model_dir.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "speculative.method mtp drafts with the MTP layer of ", o.model_dir,
        ", not with a draft model: leave draft_model_dir (", o.draft_model_dir, ") empty"));
  }
  if (o.max_batch_size < 1 || o.max_num_tokens < 1 || o.tokens_per_block < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_batch_size ", o.max_batch_size, ", max_num_tokens ", o.max_num_tokens,
                     ", tokens_per_block ", o.tokens_per_block, " must be >= 1"));
  }
  if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", o.rank, " is not in a world of ", o.world_size));
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || o.device < 0 || o.device >= devices) {
    cudaGetLastError();
    return absl::FailedPreconditionError(absl::StrCat("device ", o.device,
                                                      " (this rank's local rank) is not among the ",
                                                      devices, " usable GPUs of this node"));
  }
  return absl::OkStatus();
}

}  // namespace

CudaModelOptions ModelOptionsFor(const engine::DeviceEngineOptions& o, bool draft,
                                 NcclGroup* group) {
  const int k = DraftTokens(o);
  CudaModelOptions m;
  m.name = absl::StrCat(o.name, !draft ? " target" : Mtp(o) ? " mtp" : " draft");
  m.hidden_states = !draft && Mtp(o);  // the MTP layer reads the target's
  m.device = o.device;
  m.element_bytes = o.dtype == engine::DeviceDtype::kF32 ? 4 : 2;
  m.batch_invariant = o.batch_invariant;
  m.max_seqs = static_cast<int32_t>(o.max_batch_size) + 1;
  m.max_rows = o.max_num_tokens + m.max_seqs;
  m.max_decode_rows = static_cast<int64_t>(m.max_seqs) * (1 + k);
  m.tokens_per_block = o.tokens_per_block;
  m.max_spec_tokens = k + 1;
  m.group = group;
  m.timeout = o.collective_timeout;
  return m;
}

absl::StatusOr<std::unique_ptr<CudaEngineBuilder>> CudaEngineBuilder::Start(
    const engine::DeviceEngineOptions& options) {
  RETURN_IF_ERROR(CheckOptions(options));
  ASSIGN_OR_RETURN(const engine::ModelConfig config, engine::LoadModelConfig(options.model_dir));
  if (options.world_size > 1 && config.is_moe() && !options.nccl_group) {
    return absl::FailedPreconditionError(absl::StrCat(
        "comm.engine_transport: engine cuda exchanges the MoE rows of ", options.model_dir,
        " between its ", options.world_size, " ranks over NCCL: set it to nccl"));
  }
  std::unique_ptr<CudaEngineBuilder> b(new CudaEngineBuilder(options));
  RETURN_IF_ERROR(
      CudaStatus(cudaSetDevice(options.device), absl::StrCat("device ", options.device)));
  if (options.nccl_group && options.world_size > 1) {
    std::unique_ptr<comm::RendezvousClient> client =
        comm::RendezvousClient::Connect(options.rendezvous_address, options.name);
    NcclGroupOptions g;
    g.name = absl::StrCat(options.name, "/engine");
    g.rank = options.rank;
    g.world_size = options.world_size;
    g.local_rank = options.device;
    g.rendezvous = client.get();
    g.uid_key = absl::StrCat(options.epoch, "/nccl/engine/uid");
    g.bootstrap_timeout = options.bootstrap_timeout;
    ASSIGN_OR_RETURN(b->group_, NcclGroup::Create(g));
  }
  ASSIGN_OR_RETURN(
      b->target_,
      CudaTransformer::Load(options.model_dir, ModelOptionsFor(options, false, b->group_.get())));
  if (DraftModel(options)) {
    ASSIGN_OR_RETURN(b->draft_,
                     CudaTransformer::Load(options.draft_model_dir,
                                           ModelOptionsFor(options, true, b->group_.get())));
    if (b->draft_->config().vocab_size != config.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "draft vocab_size ", b->draft_->config().vocab_size, " (", options.draft_model_dir,
          ") differs from the target's ", config.vocab_size, " (", options.model_dir, ")"));
    }
  }
  if (Mtp(options)) {
    ASSIGN_OR_RETURN(b->mtp_, CudaTransformer::LoadMtp(
                                  options.model_dir,
                                  ModelOptionsFor(options, true, b->group_.get()), *b->target_));
  }
  return b;
}

CudaEngineBuilder::~CudaEngineBuilder() = default;

engine::EngineInfo CudaEngineBuilder::info() const {
  const engine::ModelConfig& c = target_->config();
  return {c.vocab_size, c.eos_token_id, c.max_position};
}

kv::BlockLayout CudaEngineBuilder::target_layout() const {
  return target_->Layout(options_.tokens_per_block);
}

std::optional<kv::BlockLayout> CudaEngineBuilder::draft_layout() const {
  if (mtp_ != nullptr) return mtp_->Layout(options_.tokens_per_block);
  if (draft_ == nullptr) return std::nullopt;
  return draft_->Layout(options_.tokens_per_block);
}

absl::StatusOr<engine::DeviceMemoryInfo> CudaEngineBuilder::memory() const {
  ASSIGN_OR_RETURN(const DeviceMemory m, QueryDeviceMemory(options_.device));
  return engine::DeviceMemoryInfo{m.free_bytes, m.total_bytes};
}

absl::StatusOr<std::unique_ptr<engine::ModelEngine>> CudaEngineBuilder::Finish(
    const engine::DevicePools& pools) {
  if (finished_) return absl::FailedPreconditionError("the CUDA engine was finished already");
  const bool draft_kv = draft_ != nullptr || mtp_ != nullptr;
  if (pools.target == nullptr || pools.target_blocks < 1 ||
      (draft_kv && (pools.draft == nullptr || pools.draft_blocks < 1))) {
    return absl::InvalidArgumentError(
        absl::StrCat(options_.name, ": the CUDA engine needs its target pool",
                     draft_kv ? " and its draft pool" : "", " in device memory"));
  }
  finished_ = true;
  const engine::EngineInfo engine_info = info();
  const engine::KvPoolView target_pool{reinterpret_cast<float*>(pools.target), target_layout(),
                                       pools.target_blocks};
  engine::KvPoolView draft_pool;
  if (draft_kv) {
    draft_pool = {reinterpret_cast<float*>(pools.draft), *draft_layout(), pools.draft_blocks};
  }
  const int k = DraftTokens(options_);
  if (options_.graphs) {
    ASSIGN_OR_RETURN(
        const engine::GraphBuckets buckets,
        engine::GraphBuckets::Plan(options_.max_batch_size, k, options_.graph_batch_sizes));
    RETURN_IF_ERROR(target_->CaptureGraphs(target_pool, buckets));
    // The MTP layer's decode passes (one row per sequence, or the rows a verification
    // confirmed) over the draft pool: the same buckets, captured now, before any step.
    if (mtp_ != nullptr) RETURN_IF_ERROR(mtp_->CaptureGraphs(draft_pool, buckets));
  }
  std::unique_ptr<CudaMtp> mtp;
  std::unique_ptr<spec::Drafter> drafter;
  if (k > 0 && options_.speculative.method == spec::Method::kNgram) {
    drafter = std::make_unique<spec::NgramDrafter>(options_.speculative.ngram_max);
  } else if (k > 0 && mtp_ != nullptr) {
    mtp = std::make_unique<CudaMtp>(std::move(mtp_));
    drafter = std::make_unique<engine::MtpDrafter>(mtp.get(), draft_pool, k, nullptr);
  } else if (k > 0 && draft_ != nullptr) {
    drafter = std::make_unique<engine::DraftModelDrafter>(draft_.get(), draft_pool, k, nullptr);
  }
  LOCKSTEP_LOG_INFO(
      "cuda", "{}: engine on device {} ready ({} target blocks{})", options_.name, options_.device,
      pools.target_blocks,
      draft_kv ? absl::StrCat(", ", pools.draft_blocks, mtp != nullptr ? " MTP" : " draft",
                              " blocks")
               : "");
  return std::unique_ptr<engine::ModelEngine>(std::make_unique<engine::EngineThread>(
      engine_info,
      std::make_unique<CudaParts>(options_.device, std::move(target_), std::move(draft_),
                                  std::move(mtp), std::move(drafter), target_pool, draft_pool, k,
                                  options_.model_dir)));
}

}  // namespace lockstep::cuda

namespace lockstep::engine {

absl::StatusOr<std::unique_ptr<DeviceEngineBuilder>> StartCudaEngine(
    const DeviceEngineOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaEngineBuilder> builder,
                   cuda::CudaEngineBuilder::Start(options));
  return std::unique_ptr<DeviceEngineBuilder>(std::move(builder));
}

}  // namespace lockstep::engine
