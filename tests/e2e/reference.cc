#include "tests/e2e/reference.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/status_macros.h"
#include "runtime/comm/in_process_communicator.h"
#include "runtime/engine/cpu/cpu_engine.h"
#include "runtime/executor/executor.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::e2e {
namespace {

class Collect : public exec::ResponseSink {
 public:
  void OnResponses(std::vector<exec::Response> responses) override {
    for (exec::Response& r : responses) {
      auto& out = tokens[r.id];
      out.insert(out.end(), r.tokens.begin(), r.tokens.end());
      if (r.finished) {
        ++finished;
        if (!r.status.ok()) errors.push_back(r.status);
      }
    }
  }
  absl::flat_hash_map<RequestId, std::vector<int32_t>> tokens;
  int64_t finished = 0;
  std::vector<absl::Status> errors;
};

}  // namespace

absl::StatusOr<std::vector<std::vector<int32_t>>> ReferenceGenerate(
    const std::string& model_dir, const std::string& draft_dir, int num_draft_tokens,
    const std::vector<ReferenceRequest>& requests) {
  const int tpb = 16;
  exec::ExecutorConfig config;
  config.instance = "reference";
  config.scheduler.max_batch_size = 16;
  config.scheduler.max_num_active_requests = 64;
  config.scheduler.max_num_tokens = 1024;
  if (num_draft_tokens > 0) {
    config.scheduler.speculative = {.method = spec::Method::kDraftModel,
                                    .num_draft_tokens = num_draft_tokens};
  }
  ASSIGN_OR_RETURN(config.kv.target.layout, engine::ModelBlockLayout(model_dir, tpb));
  config.kv.target.num_blocks = 2048;
  if (num_draft_tokens > 0) {
    config.kv.draft_mode = kv::DraftMode::kUnpaired;
    ASSIGN_OR_RETURN(config.kv.draft.layout, engine::ModelBlockLayout(draft_dir, tpb));
    config.kv.draft.num_blocks = 2048;
  }
  config.kv.dummy_reserved_tokens = 1 + num_draft_tokens;
  ASSIGN_OR_RETURN(std::unique_ptr<kv::KvManager> kv, kv::KvManager::Create(config.kv));
  engine::CpuEngineOptions e;
  e.model_dir = model_dir;
  e.speculative = config.scheduler.speculative;
  e.draft_model_dir = draft_dir;
  e.target_storage = reinterpret_cast<float*>(kv->Storage(kv::PoolKind::kTarget));  // host f32
  e.target_layout = config.kv.target.layout;
  e.target_num_blocks = config.kv.target.num_blocks;
  if (num_draft_tokens > 0) {
    e.draft_storage = reinterpret_cast<float*>(kv->Storage(kv::PoolKind::kDraft));
    e.draft_layout = config.kv.draft.layout;
    e.draft_num_blocks = config.kv.draft.num_blocks;
  }
  ASSIGN_OR_RETURN(std::unique_ptr<engine::ModelEngine> engine, engine::CreateCpuEngine(e));
  std::unique_ptr<comm::Communicator> comm = comm::MakeSoloCommunicator();
  Collect sink;
  exec::Executor::Deps deps;
  deps.comm = comm.get();
  deps.engine = engine.get();
  deps.kv = std::move(kv);
  deps.clock = SystemClock::Get();
  deps.sink = &sink;
  ASSIGN_OR_RETURN(std::unique_ptr<exec::Executor> executor,
                   exec::Executor::Create(config, std::move(deps)));
  for (size_t i = 0; i < requests.size(); ++i) {
    exec::NewRequestSpec s;
    s.id = RequestId(static_cast<int64_t>(i) + 1);
    s.prompt = requests[i].prompt;
    s.sampling = requests[i].sampling;
    executor->inbox().Push(std::move(s));
  }
  for (int step = 0; sink.finished < static_cast<int64_t>(requests.size()); ++step) {
    if (step > 200000) return absl::DeadlineExceededError("reference did not finish");
    RETURN_IF_ERROR(executor->Step());
  }
  if (!sink.errors.empty()) return sink.errors.front();
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < requests.size(); ++i) {
    out.push_back(sink.tokens[RequestId(static_cast<int64_t>(i) + 1)]);
  }
  return out;
}

}  // namespace lockstep::e2e
