#include "runtime/engine/cpu/testing/test_engine.h"

#include <utility>

#include "common/check.h"
#include "runtime/engine/cpu/cpu_engine.h"

namespace lockstep::engine::testing {

TestEngine MakeTestEngine(const TestEngineOptions& options) {
  TestEngine result;
  absl::StatusOr<kv::BlockLayout> layout =
      ModelBlockLayout(options.model_dir, options.tokens_per_block);
  LOCKSTEP_CHECK_OK(layout.status());
  result.target = std::make_unique<HostPool>(*layout, options.num_blocks, options.pool_seed);
  CpuEngineOptions engine;
  engine.model_dir = options.model_dir;
  engine.target_storage = result.target->storage();
  engine.target_layout = *layout;
  engine.target_num_blocks = options.num_blocks;
  // Drafts with K = num_draft_tokens when the method has what it needs (a draft model
  // needs draft_dir).
  const bool mtp = options.spec_method == spec::Method::kMtp;
  const bool drafts =
      options.spec_method == spec::Method::kNgram || mtp ||
      (options.spec_method == spec::Method::kDraftModel && !options.draft_dir.empty());
  if (drafts && options.num_draft_tokens > 0) {
    engine.speculative = {.method = options.spec_method,
                          .num_draft_tokens = options.num_draft_tokens,
                          .ngram_max = options.ngram_max};
  }
  if (!options.draft_dir.empty() || (mtp && options.num_draft_tokens > 0)) {
    absl::StatusOr<kv::BlockLayout> draft_layout = DraftBlockLayout(
        engine.speculative, options.model_dir, options.draft_dir, options.tokens_per_block);
    LOCKSTEP_CHECK_OK(draft_layout.status());
    result.draft =
        std::make_unique<HostPool>(*draft_layout, options.num_blocks, options.pool_seed + 1);
    engine.draft_model_dir = options.draft_dir;
    engine.draft_storage = result.draft->storage();
    engine.draft_layout = *draft_layout;
    engine.draft_num_blocks = options.num_blocks;
  }
  engine.communicator = options.communicator;
  engine.rank = options.rank;
  engine.world_size = options.world_size;
  engine.collective_timeout = options.collective_timeout;
  engine.num_threads = options.num_threads;
  absl::StatusOr<std::unique_ptr<ModelEngine>> created = CreateCpuEngine(engine);
  LOCKSTEP_CHECK_OK(created.status());
  result.engine = std::move(created).value();
  return result;
}

}  // namespace lockstep::engine::testing
