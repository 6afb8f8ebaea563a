#include "runtime/engine/cpu/cpu_engine.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "runtime/engine/cpu/batch_runner.h"
#include "runtime/engine/cpu/draft_model_drafter.h"
#include "runtime/engine/cpu/expert_placement.h"
#include "runtime/engine/cpu/expert_rebalance.h"
#include "runtime/eplb/placement.h"
#include "runtime/engine/cpu/mtp_drafter.h"
#include "runtime/engine/cpu/mtp_module.h"
#include "runtime/engine/cpu/parallel.h"
#include "runtime/engine/cpu/transformer.h"
#include "runtime/engine/engine_thread.h"
#include "runtime/engine/model/model_config.h"
#include "spec_decode/ngram_drafter.h"

namespace lockstep::engine {
namespace {

// The drafter `options` asks for (`draft`: the loaded draft model, `mtp`: the MTP
// module, or null), or null.
std::unique_ptr<spec::Drafter> MakeDrafter(const CpuEngineOptions& options,
                                           const Transformer* draft, const MtpModule* mtp,
                                           ThreadPool* threads) {
  const spec::SpeculativeConfig& speculative = options.speculative;
  if (!speculative.enabled()) return nullptr;
  if (speculative.method == spec::Method::kNgram) {
    return std::make_unique<spec::NgramDrafter>(speculative.ngram_max);
  }
  if (mtp != nullptr) {
    return std::make_unique<MtpDrafter>(
        mtp, KvPoolView{options.draft_storage, options.draft_layout, options.draft_num_blocks},
        speculative.num_draft_tokens, threads);
  }
  if (draft == nullptr) return nullptr;
  return std::make_unique<DraftModelDrafter>(
      draft, KvPoolView{options.draft_storage, options.draft_layout, options.draft_num_blocks},
      speculative.num_draft_tokens, threads);
}

// Checks a pool against the model it holds KV for; errors name both.
absl::Status CheckPool(const char* name, const float* storage, const kv::BlockLayout& layout,
                       int32_t num_blocks, const ForwardModel& model, const std::string& dir) {
  if (storage == nullptr) return absl::InvalidArgumentError(absl::StrCat(name, "_storage is null"));
  RETURN_IF_ERROR(layout.Validate());
  if (num_blocks < 1) {
    return absl::InvalidArgumentError(absl::StrCat(name, "_num_blocks must be >= 1"));
  }
  const kv::BlockLayout expected = model.Layout(layout.tokens_per_block);
  if (!(layout == expected)) {
    return absl::InvalidArgumentError(absl::StrCat(name, " pool layout (", layout.ToString(),
                                                   ") does not match the model in ", dir, " (",
                                                   expected.ToString(), ")"));
  }
  return absl::OkStatus();
}

// The CPU engine's parts: the models, the drafter and the batch runner over them.
class CpuParts final : public EngineParts {
 public:
  CpuParts(std::unique_ptr<Transformer> target, std::unique_ptr<Transformer> draft,
           std::unique_ptr<MtpModule> mtp, const CpuEngineOptions& options)
      : target_(std::move(target)),
        draft_(std::move(draft)),
        mtp_(std::move(mtp)),
        threads_(options.num_threads),
        drafter_(MakeDrafter(options, draft_.get(), mtp_.get(), &threads_)),
        runner_(target_.get(),
                {options.target_storage, options.target_layout, options.target_num_blocks},
                drafter_.get(),
                {options.draft_storage, options.draft_layout, options.draft_num_blocks},
                options.speculative.enabled() ? options.speculative.num_draft_tokens : 0,
                &threads_),
        grammars_(options.model_dir, target_->config().vocab_size,
                  target_->config().eos_token_id) {
    runner_.set_grammar_source(&grammars_);
  }

  absl::StatusOr<BatchResult> Run(const Batch& batch) override { return runner_.Run(batch); }

 private:
  const std::unique_ptr<Transformer> target_;
  const std::unique_ptr<Transformer> draft_;
  const std::unique_ptr<MtpModule> mtp_;  // speculative.method mtp
  ThreadPool threads_;
  const std::unique_ptr<spec::Drafter> drafter_;  // the draft model's, MTP, n-gram, or null
  BatchRunner runner_;
  GrammarSource grammars_;  // constrained decoding's vocabulary and compiled grammars
};

}  // namespace

absl::StatusOr<kv::BlockLayout> ModelBlockLayout(const std::string& model_dir,
                                                 int tokens_per_block) {
  ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(model_dir));
  const kv::BlockLayout layout{config.num_layers, config.cache_kv_heads(),
                               config.cache_head_dim(), tokens_per_block};
  RETURN_IF_ERROR(layout.Validate());
  return layout;
}

absl::StatusOr<kv::BlockLayout> DraftBlockLayout(const spec::SpeculativeConfig& speculative,
                                                 const std::string& model_dir,
                                                 const std::string& draft_model_dir,
                                                 int tokens_per_block) {
  if (speculative.method == spec::Method::kMtp) {
    return MtpModule::BlockLayout(model_dir, tokens_per_block);
  }
  return ModelBlockLayout(draft_model_dir, tokens_per_block);
}

absl::StatusOr<std::unique_ptr<ModelEngine>> CreateCpuEngine(const CpuEngineOptions& options) {
  if (options.model_dir.empty()) return absl::InvalidArgumentError("model_dir is required");
  if (options.num_threads < 1) return absl::InvalidArgumentError("num_threads must be >= 1");
  if (options.communicator != nullptr) {
    if (options.communicator->world_size() != options.world_size ||
        options.communicator->rank() != options.rank) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", options.rank, " of ", options.world_size,
                       " does not match the communicator (rank ", options.communicator->rank(),
                       " of ", options.communicator->world_size(), ")"));
    }
  } else if (options.world_size != 1 || options.rank != 0) {
    return absl::InvalidArgumentError("world_size > 1 needs a communicator");
  }
  RETURN_IF_ERROR(options.speculative.Validate());
  const bool mtp = options.speculative.enabled() && options.speculative.method == spec::Method::kMtp;
  const bool draft_model = options.speculative.needs_draft_kv() && !mtp;
  if (draft_model && options.draft_model_dir.empty()) {
    return absl::InvalidArgumentError("speculative.method draft_model needs draft_model_dir");
  }
  const ExpertGroup group{options.communicator, options.rank, options.world_size,
                          options.collective_timeout};
  ASSIGN_OR_RETURN(const ModelConfig target_config, LoadModelConfig(options.model_dir));
  ASSIGN_OR_RETURN(const ExpertLayout layout,
                   LoadExpertLayout(options.expert_placement, target_config,
                                    options.world_size));
  ASSIGN_OR_RETURN(std::unique_ptr<Transformer> target,
                   Transformer::Load(options.model_dir, "target", group, layout));
  if (options.expert_load_window > 0) {
    target->OwnExpertLoad(MakeExpertLoad(target->config(), options.expert_load_window,
                                         options.communicator, options.rank,
                                         options.collective_timeout, options.expert_load_dump,
                                         options.expert_load_board));
  }
  if (options.expert_rebalance_windows > 0) {
    const ModelConfig& c = target->config();
    if (options.expert_load_window <= 0 || !c.is_moe()) {
      return absl::InvalidArgumentError(
          "expert_rebalance_windows needs expert_load_window > 0 and a model with routed experts");
    }
    eplb::Placement current =
        eplb::ContiguousPlacement(c.num_experts, options.world_size, c.num_layers);
    for (size_t l = 0; l < layout.size(); ++l) {
      if (!layout[l].empty()) current.layers[l].slots = layout[l];
    }
    target->OwnRebalancer(std::make_unique<ExpertRebalancer>(
        c, std::move(current), target->LoadedMoeWeights(),
        RebalanceOptions{.every_windows = options.expert_rebalance_windows,
                         .plan = {.num_ranks = options.world_size,
                                  .redundant_per_rank = options.expert_redundant_slots},
                         .copy_from_peers = options.expert_copy_from_peers},
        options.communicator, options.rank, options.collective_timeout, "target",
        CheckpointExpertLoader(options.model_dir, c, options.rank)));
  }
  RETURN_IF_ERROR(CheckPool("target", options.target_storage, options.target_layout,
                            options.target_num_blocks, *target, options.model_dir));
  {
    const ModelConfig& c = target->config();
    GetLogger("engine")->info(
        "{}: KV cache {} bytes per token ({} layers x {} values{}, {} bytes each)",
        options.model_dir, c.kv_values_per_token() * options.target_layout.element_bytes,
        c.num_layers, c.kv_values_per_token() / c.num_layers,
        c.mla ? " of MLA's latent vector" : "", options.target_layout.element_bytes);
  }
  std::unique_ptr<Transformer> draft;
  if (draft_model) {
    ASSIGN_OR_RETURN(draft, Transformer::Load(options.draft_model_dir, "draft", group));
    RETURN_IF_ERROR(CheckPool("draft", options.draft_storage, options.draft_layout,
                              options.draft_num_blocks, *draft, options.draft_model_dir));
    if (draft->config().vocab_size != target->config().vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("draft vocab_size ", draft->config().vocab_size, " (",
                       options.draft_model_dir, ") differs from the target's ",
                       target->config().vocab_size, " (", options.model_dir, ")"));
    }
  }
  std::unique_ptr<MtpModule> mtp_module;
  if (mtp) {
    ASSIGN_OR_RETURN(mtp_module, MtpModule::Load(options.model_dir, group));
    RETURN_IF_ERROR(CheckPool("draft", options.draft_storage, options.draft_layout,
                              options.draft_num_blocks, mtp_module->layer(),
                              absl::StrCat(options.model_dir, " (its MTP layer)")));
  }
  const ModelConfig& config = target->config();
  const EngineInfo info{config.vocab_size, config.eos_token_id, config.max_position};
  return std::unique_ptr<ModelEngine>(std::make_unique<EngineThread>(
      info, std::make_unique<CpuParts>(std::move(target), std::move(draft),
                                       std::move(mtp_module), options)));
}

}  // namespace lockstep::engine
