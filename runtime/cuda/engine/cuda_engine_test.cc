// GPU checks of the CUDA engine through the ModelEngine contract (Launch/Collect with
// overlap, driven by the engine tests' MiniHost), for tiny models of all five families
// (llama and mixtral: make-model's tiny and tiny-moe presets with their drafts; mistral,
// qwen2 and qwen3_moe: the test models of those families, another seed as the draft):
// with batch_invariant, greedy and seeded stochastic tokens are the same with CUDA
// graphs and without, with speculation (n-gram, draft model) and without, and whatever
// else shares the batch; in f32 the tokens are compared with the CPU engine's and the
// agreement is printed (the teacher-forced check, cuda_transformer_test, holds the
// tolerance). Skips without a GPU.
#include "runtime/cuda/engine/cuda_engine.h"

#include <algorithm>
#include <cstddef>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "runtime/cuda/engine/device_test_engine.h"
#include "runtime/cuda/gpu_test_env.h"
#include "runtime/engine/cpu/testing/mini_host.h"
#include "runtime/engine/cpu/testing/spec_runs.h"
#include "runtime/engine/cpu/testing/test_engine.h"
#include "runtime/engine/cpu/testing/test_models.h"

namespace lockstep::cuda {
namespace {

using ::lockstep::testing::IsOk;
namespace et = ::lockstep::engine::testing;

constexpr int32_t kBlocks = 1024;
constexpr int kTokensPerBlock = 8;

struct Run {
  bool graphs = true;
  spec::Method method = spec::Method::kNone;
  int k = 0;
  int max_batch = 8;
  engine::DeviceDtype dtype = engine::DeviceDtype::kBf16;
};

std::string Describe(const Run& run) {
  return absl::StrCat(run.graphs ? "graphs" : "eager", " ", spec::MethodName(run.method),
                      " K=", run.k, " batch ", run.max_batch,
                      run.dtype == engine::DeviceDtype::kF32 ? " f32" : " bf16");
}

// A family's model and a draft for it (same vocabulary).
struct Model {
  std::string dir;
  std::string draft_dir;
};

Model ModelOf(const std::string& family) {
  if (family == "llama" || family == "mixtral") {
    const std::string dir = et::PresetModelDir(family == "llama" ? "tiny" : "tiny-moe");
    return {dir, dir + "/draft"};
  }
  return {et::FamilyModelDir(family, 1), et::FamilyModelDir(family, 2)};
}

// The tokens of every request, in order.
std::vector<std::vector<int32_t>> RunOnDevice(const Model& model, const Run& run,
                                              const std::vector<et::HostRequest>& requests) {
  SCOPED_TRACE(Describe(run));
  engine::DeviceEngineOptions o;
  o.name = "check";
  o.model_dir = model.dir;
  if (run.method != spec::Method::kNone) {
    o.speculative = {.method = run.method, .num_draft_tokens = run.k};
  }
  if (run.method == spec::Method::kDraftModel) o.draft_model_dir = model.draft_dir;
  o.dtype = run.dtype;
  o.batch_invariant = true;
  o.graphs = run.graphs;
  o.tokens_per_block = kTokensPerBlock;
  o.max_batch_size = 8;
  o.max_num_tokens = 8 * 24;
  cuda::testing::DeviceTestEngine device(kBlocks);
  const absl::Status started = device.Start(o);
  EXPECT_THAT(started, IsOk());
  if (!started.ok()) return {};
  const kv::BlockLayout layout{1, 1, 1, kTokensPerBlock};  // block bookkeeping only
  et::HostPool target(layout, kBlocks, 1);
  et::HostPool draft(layout, kBlocks, 2);
  et::HostOptions h;
  h.chunk_size = 24;
  h.max_batch = run.max_batch;
  h.num_draft_tokens = run.k;
  h.spec_method = run.method == spec::Method::kNone ? spec::Method::kDraftModel : run.method;
  h.overlap = true;
  et::MiniHost host(device.engine(), &target,
                    run.method == spec::Method::kDraftModel ? &draft : nullptr, h);
  for (const et::HostRequest& r : requests) host.Add(r);
  const absl::Status ran = host.Run();
  EXPECT_THAT(ran, IsOk());
  std::vector<std::vector<int32_t>> tokens;
  for (const et::HostRequest& r : requests) tokens.push_back(host.output(r.id).tokens);
  return tokens;
}

void ExpectSameTokens(const std::vector<std::vector<int32_t>>& a,
                      const std::vector<std::vector<int32_t>>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << what << ": request " << i;
}

class CudaEngineTest : public ::testing::TestWithParam<std::string> {};

// Graphs off, one request per batch, n-gram and draft-model speculation (graphs on and
// off) give the tokens of the graphs-on base run.
void ExpectRunsAgree(const Model& model, bool stochastic) {
  SCOPED_TRACE(stochastic ? "stochastic" : "greedy");
  const std::vector<et::HostRequest> requests =
      et::SpecPrompts(6, 3, 20, stochastic, /*repeating=*/true);
  const auto base = RunOnDevice(model, {.graphs = true}, requests);
  ASSERT_EQ(base.size(), requests.size());
  ExpectSameTokens(base, RunOnDevice(model, {.graphs = false}, requests), "graphs off");
  ExpectSameTokens(base, RunOnDevice(model, {.graphs = true, .max_batch = 1}, requests),
                   "one request per batch");
  ExpectSameTokens(
      base, RunOnDevice(model, {.graphs = true, .method = spec::Method::kNgram, .k = 3}, requests),
      "n-gram K=3");
  ExpectSameTokens(
      base,
      RunOnDevice(model, {.graphs = true, .method = spec::Method::kDraftModel, .k = 2}, requests),
      "draft model K=2");
  ExpectSameTokens(
      base,
      RunOnDevice(model, {.graphs = false, .method = spec::Method::kDraftModel, .k = 2}, requests),
      "draft model K=2, graphs off");
}

// Greedy and stochastic are separate cases so that test shards can split a family's
// runs (the MoE families' are the slowest on the CPU execution layer).
TEST_P(CudaEngineTest, GraphsSpeculationAndBatchingLeaveGreedyTokensAlone) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  ExpectRunsAgree(ModelOf(GetParam()), /*stochastic=*/false);
}

TEST_P(CudaEngineTest, GraphsSpeculationAndBatchingLeaveStochasticTokensAlone) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  ExpectRunsAgree(ModelOf(GetParam()), /*stochastic=*/true);
}

TEST_P(CudaEngineTest, F32TokensAgainstTheCpuEngine) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const Model model = ModelOf(GetParam());
  const std::vector<et::HostRequest> requests = et::SpecPrompts(6, 5, 16, false);
  const auto gpu = RunOnDevice(model, {.dtype = engine::DeviceDtype::kF32}, requests);
  et::TestEngineOptions cpu_options;
  cpu_options.model_dir = model.dir;
  et::TestEngine cpu = et::MakeTestEngine(cpu_options);
  et::HostOptions h;
  h.chunk_size = 24;
  et::MiniHost host(cpu.engine.get(), cpu.target.get(), nullptr, h);
  for (const et::HostRequest& r : requests) host.Add(r);
  ASSERT_THAT(host.Run(), IsOk());
  ASSERT_EQ(gpu.size(), requests.size());
  int equal = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const std::vector<int32_t>& ref = host.output(requests[i].id).tokens;
    size_t same = 0;
    while (same < ref.size() && same < gpu[i].size() && ref[same] == gpu[i][same]) ++same;
    equal += same == ref.size() ? 1 : 0;
    std::cout << "[" << GetParam() << " f32] request " << i << ": " << same << " of " << ref.size()
              << " tokens as the CPU engine's\n";
    EXPECT_EQ(gpu[i].size(), ref.size());
  }
  std::cout << "[" << GetParam() << " f32] " << equal << " of " << requests.size()
            << " requests token for token as the CPU engine\n";
}

INSTANTIATE_TEST_SUITE_P(Families, CudaEngineTest,
                         ::testing::ValuesIn(std::vector<std::string>(
                             std::begin(et::kModelFamilies), std::end(et::kModelFamilies))),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           name.erase(std::remove(name.begin(), name.end(), '_'), name.end());
                           return name;
                         });

}  // namespace
}  // namespace lockstep::cuda
