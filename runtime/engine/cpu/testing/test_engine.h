// A CPU engine with its own host pools, for tests.
#ifndef LOCKSTEP_RUNTIME_ENGINE_CPU_TESTING_TEST_ENGINE_H_
#define LOCKSTEP_RUNTIME_ENGINE_CPU_TESTING_TEST_ENGINE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "runtime/comm/communicator.h"
#include "runtime/engine/cpu/testing/test_models.h"
#include "runtime/engine/model_engine.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::engine::testing {

struct TestEngineOptions {
  std::string model_dir;
  std::string draft_dir;  // empty: no draft
  int num_draft_tokens = 0;
  // kNgram: the n-gram drafter with K = num_draft_tokens (no draft_dir, no draft pool).
  // kMtp: the model's MTP layer with K = num_draft_tokens (no draft_dir; a draft pool).
  spec::Method spec_method = spec::Method::kDraftModel;
  int ngram_max = 3;
  int tokens_per_block = 8;
  int32_t num_blocks = 512;
  int num_threads = 1;
  comm::Communicator* communicator = nullptr;
  int rank = 0;
  int world_size = 1;
  absl::Duration collective_timeout = absl::Seconds(60);
  uint64_t pool_seed = 1;  // block allocation order
};

struct TestEngine {
  std::unique_ptr<HostPool> target;
  std::unique_ptr<HostPool> draft;  // null without a draft
  std::unique_ptr<ModelEngine> engine;
};

// CHECK-fails when the engine cannot be created.
TestEngine MakeTestEngine(const TestEngineOptions& options);

}  // namespace lockstep::engine::testing

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_TESTING_TEST_ENGINE_H_
