#include "runtime/engine/cpu_engine.h"

#include <deque>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "runtime/engine/batch_runner.h"
#include "runtime/engine/draft_model_drafter.h"
#include "runtime/engine/model_config.h"
#include "runtime/engine/parallel.h"
#include "runtime/engine/transformer.h"
#include "spec_decode/ngram_drafter.h"

namespace lockstep::engine {
namespace {

constexpr int kMaxDraftTokens = spec::kMaxDraftTokens;

// The drafter `options` asks for (`draft`: the loaded draft model, or null), or null.
std::unique_ptr<spec::Drafter> MakeDrafter(const CpuEngineOptions& options,
                                           const Transformer* draft, ThreadPool* threads) {
  if (options.num_draft_tokens == 0) return nullptr;
  if (options.spec_method == spec::Method::kNgram) {
    return std::make_unique<spec::NgramDrafter>(options.ngram_max);
  }
  if (draft == nullptr) return nullptr;
  return std::make_unique<DraftModelDrafter>(
      draft, KvPoolView{options.draft_storage, options.draft_layout, options.draft_num_blocks},
      options.num_draft_tokens, threads);
}

// Checks a pool against the model it holds KV for; errors name both.
absl::Status CheckPool(const char* name, const float* storage, const kv::BlockLayout& layout,
                       int32_t num_blocks, const Transformer& model, const std::string& dir) {
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

// Runs batches on its own thread; Launch/Collect from the executor thread.
class CpuEngine final : public ModelEngine {
 public:
  CpuEngine(std::unique_ptr<Transformer> target, std::unique_ptr<Transformer> draft,
            const CpuEngineOptions& options)
      : target_(std::move(target)),
        draft_(std::move(draft)),
        threads_(options.num_threads),
        drafter_(MakeDrafter(options, draft_.get(), &threads_)),
        runner_(target_.get(),
                {options.target_storage, options.target_layout, options.target_num_blocks},
                drafter_.get(),
                {options.draft_storage, options.draft_layout, options.draft_num_blocks},
                options.num_draft_tokens, &threads_),
        thread_([this] { Loop(); }) {}

  ~CpuEngine() override {
    {
      absl::MutexLock lock(&mu_);
      shutdown_ = true;
    }
    thread_.join();
  }

  EngineInfo info() const override {
    const ModelConfig& config = target_->config();
    return {config.vocab_size, config.eos_token_id, config.max_position};
  }

  void Launch(Batch batch) override {
    absl::MutexLock lock(&mu_);
    launched_.push_back(batch.step);
    queue_.push_back(std::move(batch));
  }

  absl::StatusOr<BatchResult> Collect(StepId step, absl::Duration timeout) override {
    absl::MutexLock lock(&mu_);
    if (launched_.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("Collect(step ", step.value(), "): no batch is in flight"));
    }
    if (launched_.front() != step) {
      return absl::FailedPreconditionError(absl::StrCat("Collect(step ", step.value(),
                                                        "): the oldest batch in flight is step ",
                                                        launched_.front().value()));
    }
    auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !results_.empty(); };
    if (!mu_.AwaitWithTimeout(absl::Condition(&done), timeout)) {
      return absl::DeadlineExceededError(absl::StrCat(
          "step ", step.value(), " is still running after ", absl::FormatDuration(timeout)));
    }
    Outcome outcome = std::move(results_.front());
    results_.pop_front();
    launched_.pop_front();
    if (!outcome.status.ok()) return outcome.status;
    return std::move(outcome.result);
  }

 private:
  // A finished batch (a StatusOr split in two: gcc 12 warns on moving StatusOr here).
  struct Outcome {
    absl::Status status;
    BatchResult result;
  };

  void Loop() {
    while (true) {
      Batch batch;
      {
        absl::MutexLock lock(&mu_);
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return shutdown_ || !queue_.empty();
        };
        while (!mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(1))) {
        }
        if (queue_.empty()) return;  // shut down with nothing left to run
        batch = std::move(queue_.front());
        queue_.pop_front();
      }
      absl::StatusOr<BatchResult> result = runner_.Run(batch);
      Outcome outcome;
      if (result.ok()) {
        outcome.result = *std::move(result);
      } else {
        outcome.status = result.status();
      }
      absl::MutexLock lock(&mu_);
      results_.push_back(std::move(outcome));
    }
  }

  const std::unique_ptr<Transformer> target_;
  const std::unique_ptr<Transformer> draft_;
  ThreadPool threads_;
  const std::unique_ptr<spec::Drafter> drafter_;  // the draft model's, n-gram, or null
  BatchRunner runner_;                            // used by thread_ only

  absl::Mutex mu_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Batch> queue_ ABSL_GUARDED_BY(mu_);
  std::deque<StepId> launched_ ABSL_GUARDED_BY(mu_);  // launched, not collected
  std::deque<Outcome> results_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: starts after everything above exists
};

}  // namespace

absl::StatusOr<kv::BlockLayout> ModelBlockLayout(const std::string& model_dir,
                                                 int tokens_per_block) {
  ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(model_dir));
  const kv::BlockLayout layout{config.num_layers, config.num_kv_heads, config.head_dim,
                               tokens_per_block};
  RETURN_IF_ERROR(layout.Validate());
  return layout;
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
  if (options.num_draft_tokens < 0 || options.num_draft_tokens > kMaxDraftTokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_draft_tokens must be in [0, ", kMaxDraftTokens, "], got ", options.num_draft_tokens));
  }
  const bool draft_model =
      options.num_draft_tokens > 0 && options.spec_method == spec::Method::kDraftModel;
  if (draft_model && options.draft_model_dir.empty()) {
    return absl::InvalidArgumentError("num_draft_tokens > 0 needs draft_model_dir");
  }
  if (options.spec_method == spec::Method::kNgram &&
      (options.ngram_max < 1 || options.ngram_max > spec::kMaxNgram)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ngram_max must be in [1, ", spec::kMaxNgram, "], got ", options.ngram_max));
  }
  const ExpertGroup group{options.communicator, options.rank, options.world_size,
                          options.collective_timeout};
  ASSIGN_OR_RETURN(std::unique_ptr<Transformer> target,
                   Transformer::Load(options.model_dir, "target", group));
  RETURN_IF_ERROR(CheckPool("target", options.target_storage, options.target_layout,
                            options.target_num_blocks, *target, options.model_dir));
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
  return std::unique_ptr<ModelEngine>(new CpuEngine(std::move(target), std::move(draft), options));
}

}  // namespace lockstep::engine
