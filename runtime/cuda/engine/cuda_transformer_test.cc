// GPU checks of CudaTransformer against the CPU transformer, teacher-forced
// (runtime/engine/cpu/testing/forward_compare.h): for tiny models of all five families, a
// prefill of three prompts in one forward, six decode steps on the CPU's tokens, and a
// verification of three drafts per sequence. Thresholds (docs/gpu.md): relative L2 of
// every logit row <= 1e-4 in f32 mode (not bitwise: cuBLASLt's and the attention
// kernels' reduction orders differ from the CPU's sequential chains) and <= 2e-2 in
// bf16; greedy tokens equal at every position of a sequence before the first where the
// CPU's top-2 logit margin is not above 12 x the row's median |GPU - CPU| logit error
// (relative to the row's noise: forward_compare.h; the report prints that position per
// sequence). MoE families also run with teacher-forced routing (the CUDA MoE uses the
// CPU's experts and gates through the routing hook, so a near-tied top-k that bf16
// flips does not send a row to other experts) and the routing rule: the CUDA router's
// own choice equals the CPU's except within 8 x the row's median router error of a tie
// (excused and counted, at most 1 in 20 rows), router rows within 1e-4 (f32) / 6e-2
// (bf16); planted bugs (experts on their neighbour's weights, a router favouring one
// expert) are caught. Also: a decode step of 3 rows replayed from its 4-row CUDA graph
// (a pad row included) gives the eager step's bits (batch-invariant GEMMs), and running
// out of device memory at load names what did not fit. Skips without a GPU.
#include "runtime/cuda/engine/cuda_transformer.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/cuda/engine/device_kv_pool.h"
#include "runtime/cuda/engine/forward_pass.h"
#include "runtime/cuda/engine/graph_capture.h"
#include "runtime/cuda/gpu_test_env.h"
#include "runtime/engine/cpu/arena.h"
#include "runtime/engine/cpu/moe.h"
#include "runtime/engine/cpu/testing/forward_compare.h"
#include "runtime/engine/cpu/testing/test_models.h"
#include "runtime/engine/cpu/transformer.h"
#include "runtime/engine/graph_buckets.h"

namespace lockstep::cuda {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;
namespace et = ::lockstep::engine::testing;

constexpr int kBlocks = 96;
constexpr int kTokensPerBlock = 8;

CudaModelOptions Options(int element_bytes, bool batch_invariant = false) {
  CudaModelOptions o;
  o.element_bytes = element_bytes;
  o.batch_invariant = batch_invariant;
  o.max_rows = 256;
  o.max_seqs = 8;
  o.max_decode_rows = 64;
  o.tokens_per_block = kTokensPerBlock;
  return o;
}

// A zeroed device pool for `model` (empty when it cannot be made: the test fails).
DeviceKvPool MakePool(const CudaTransformer& model) {
  absl::StatusOr<DeviceKvPool> pool = MakeDeviceKvPool(0, model.Layout(kTokensPerBlock), kBlocks);
  EXPECT_THAT(pool, IsOk());
  return pool.ok() ? *std::move(pool) : DeviceKvPool{};
}

// A bug planted in the candidate's MoE to show the comparison catches it.
enum class Bug {
  kNone,
  kNeighbourExperts,  // every expert computes with the next expert's weights
  kBiasedRouter,      // one expert's router logit is 0.5 too high
};

// The candidate's routing hook: traces its router logits and forces the reference's
// routing (teacher forcing, forward_compare.h), with `bug` planted.
class ForcedRoutingHook final : public RoutingHook {
 public:
  ForcedRoutingHook(const et::RouterTrace& reference, et::RouterTrace& own, bool renormalize,
                    Bug bug)
      : reference_(reference), own_(own), renormalize_(renormalize), bug_(bug) {}

  void Observe(int layer, const float* logits, int rows, int experts) override {
    own_.Record(layer, logits, rows, experts);
    if (bug_ != Bug::kBiasedRouter) return;
    std::vector<float>& last = own_.layers.back().logits;
    for (int i = 0; i < rows; ++i) last[static_cast<size_t>(i) * experts + 1] += 0.5f;
  }

  absl::StatusOr<bool> Force(int layer, int rows, int k, int32_t* experts,
                             float* weights) override {
    RETURN_IF_ERROR(et::ForcedRouting(reference_, layer, rows, k, renormalize_, experts, weights));
    if (bug_ == Bug::kNeighbourExperts) {
      const int n = reference_.Find(layer)->experts;
      for (int i = 0; i < rows; ++i) {
        std::vector<std::pair<int32_t, float>> row;
        for (int j = 0; j < k; ++j) row.push_back({(experts[i * k + j] + 1) % n, weights[i * k + j]});
        std::sort(row.begin(), row.end());
        for (int j = 0; j < k; ++j) std::tie(experts[i * k + j], weights[i * k + j]) = row[j];
      }
    }
    return true;
  }

 private:
  const et::RouterTrace& reference_;
  et::RouterTrace& own_;
  const bool renormalize_;
  const Bug bug_;
};

// The comparison of one family (MoE families with teacher-forced routing and the routing
// rule); the report printed.
absl::StatusOr<et::CompareReport> RunFamily(const std::string& family, int element_bytes,
                                            Bug bug = Bug::kNone) {
  const std::string dir = et::FamilyModelDir(family);
  ASSIGN_OR_RETURN(std::unique_ptr<engine::Transformer> cpu,
                   engine::Transformer::Load(dir, "target", engine::ExpertGroup{}));
  ASSIGN_OR_RETURN(std::unique_ptr<CudaTransformer> gpu,
                   CudaTransformer::Load(dir, Options(element_bytes)));
  et::HostPool host(cpu->Layout(kTokensPerBlock), kBlocks, 1);
  ASSIGN_OR_RETURN(DeviceKvPool device,
                   MakeDeviceKvPool(0, gpu->Layout(kTokensPerBlock), kBlocks));
  const auto prompts = et::RandomPrompts({37, 5, 70}, cpu->config().vocab_size, 11);
  et::CompareOptions options;
  et::RouterTrace reference_router, candidate_router;
  ForcedRoutingHook hook(reference_router, candidate_router, cpu->config().norm_topk_prob, bug);
  if (cpu->config().is_moe()) {
    cpu->set_router_tap([&](int layer, const float* logits, int rows, int experts) {
      reference_router.Record(layer, logits, rows, experts);
    });
    gpu->set_routing_hook(&hook);
    options.reference_router = &reference_router;
    options.candidate_router = &candidate_router;
  }
  ASSIGN_OR_RETURN(et::CompareReport report,
                   et::CompareForwards(*cpu, host, *gpu, device.view, prompts, options));
  std::cout << "[" << family << (element_bytes == 4 ? " f32] " : " bf16] ") << report.ToString()
            << "\n";
  return report;
}

void CompareFamily(const std::string& family, int element_bytes) {
  SCOPED_TRACE(::testing::Message() << family << (element_bytes == 4 ? " f32" : " bf16"));
  absl::StatusOr<et::CompareReport> report = RunFamily(family, element_bytes);
  ASSERT_THAT(report, IsOk());
  const double tolerance = element_bytes == 4 ? 1e-4 : 2e-2;
  EXPECT_LE(report->worst_rel_l2, tolerance) << report->ToString();
  EXPECT_EQ(report->argmax_mismatches, 0) << report->ToString();
  if (et::FamilyConfig(family).is_moe()) {
    EXPECT_GT(report->routing_rows, 0) << report->ToString();
    // A row's 8 router logits are small: bf16 moves them by up to ~4% (mixtral 0.037).
    EXPECT_LE(report->worst_router_rel_l2, element_bytes == 4 ? 1e-4 : 6e-2)
        << report->ToString();
    EXPECT_EQ(report->routing_mismatches, 0) << report->ToString();
    // Excused flips are rare near-ties, not a pattern (bf16: 18 of 1,136 routings).
    EXPECT_LE(report->routing_flips_excused, report->routing_rows / 20) << report->ToString();
  }
}

// One test per family and element type, so a sharded run spreads them.
class CudaTransformerFamilyTest : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaTransformerFamilyTest, F32MatchesTheCpuEngine) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  CompareFamily(GetParam(), 4);
}

TEST_P(CudaTransformerFamilyTest, Bf16MatchesTheCpuEngineWithinTolerance) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  CompareFamily(GetParam(), 2);
}

INSTANTIATE_TEST_SUITE_P(Families, CudaTransformerFamilyTest,
                         ::testing::ValuesIn(et::kModelFamilies),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

// Teacher-forced routing hides no bug: experts computing with their neighbour's weights
// fail the logits' relative L2, and a router that favours one expert fails the routing
// rule (flips with a clear gap; its median error stays small).
TEST(CudaTransformerTest, PlantedMoeBugsAreCaught) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  absl::StatusOr<et::CompareReport> experts = RunFamily("mixtral", 2, Bug::kNeighbourExperts);
  ASSERT_THAT(experts, IsOk());
  EXPECT_GT(experts->worst_rel_l2, 0.1) << experts->ToString();
  absl::StatusOr<et::CompareReport> router = RunFamily("mixtral", 2, Bug::kBiasedRouter);
  ASSERT_THAT(router, IsOk());
  EXPECT_GT(router->routing_mismatches, 0) << router->ToString();
  EXPECT_LE(router->worst_rel_l2, 2e-2) << router->ToString();  // routing was forced
}

// The same decode step eagerly (the agreement says a context chunk is somewhere) and
// from its graph (a decode step everywhere): the same bits.
TEST(CudaTransformerTest, AGraphReplayGivesTheEagerBits) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  for (const char* family : {"llama", "mixtral"}) {
    SCOPED_TRACE(family);
    absl::StatusOr<std::unique_ptr<CudaTransformer>> gpu =
        CudaTransformer::Load(et::FamilyModelDir(family), Options(2, /*batch_invariant=*/true));
    ASSERT_THAT(gpu, IsOk());
    DeviceKvPool pool = MakePool(**gpu);
    ASSERT_NE(pool.view.storage, nullptr);
    absl::StatusOr<engine::GraphBuckets> buckets = engine::GraphBuckets::Plan(8, 3, {1, 4, 8, 32});
    ASSERT_THAT(buckets, IsOk());
    ASSERT_THAT((*gpu)->CaptureGraphs(pool.view, *buckets), IsOk());
    EXPECT_EQ((*gpu)->captured_graphs(), 4);
    const int vocab = (*gpu)->config().vocab_size;
    // Two sequences: a 20-token prompt each, prefilled eagerly.
    et::HostPool blocks((*gpu)->Layout(kTokensPerBlock), kBlocks, 3);
    std::vector<std::vector<BlockId>> tables(2);
    for (auto& t : tables) ASSERT_THAT(blocks.Cover(t, 40), IsOk());
    const std::vector<engine::SequenceKv> seqs = {engine::SequenceKv{tables[0]},
                                                  engine::SequenceKv{tables[1]}};
    const auto prompts = et::RandomPrompts({20, 20}, vocab, 5);
    std::vector<engine::ForwardRow> rows;
    for (int s = 0; s < 2; ++s) {
      for (int p = 0; p < 20; ++p) rows.push_back({prompts[s][p], p, s});
    }
    const std::vector<int32_t> last = {19, 39};
    engine::Arena arena;
    ASSERT_THAT((*gpu)->Forward({rows, seqs, last}, pool.view, arena, nullptr).status(), IsOk());
    // A decode step of 3 rows (one sequence verifying a draft, one plain): bucket 4, so
    // the graph also runs a pad row, which must not change the real rows' bits.
    const std::vector<engine::ForwardRow> step = {{7, 20, 0}, {8, 21, 0}, {9, 20, 1}};
    const std::vector<int32_t> all = {0, 1, 2};
    engine::StepAgreement eager{3, /*any_context=*/true, false};
    engine::StepAgreement graph{3, /*any_context=*/false, false};
    absl::StatusOr<const float*> e =
        (*gpu)->Forward({step, seqs, all, eager}, pool.view, arena, nullptr);
    ASSERT_THAT(e, IsOk());
    EXPECT_EQ((*gpu)->graph_replays(), 0);
    const std::vector<float> eager_logits(*e, *e + 3 * vocab);
    absl::StatusOr<const float*> g =
        (*gpu)->Forward({step, seqs, all, graph}, pool.view, arena, nullptr);
    ASSERT_THAT(g, IsOk());
    EXPECT_EQ((*gpu)->graph_replays(), 1) << "the step did not replay its graph";
    EXPECT_EQ(std::memcmp(eager_logits.data(), *g, 3 * vocab * sizeof(float)), 0)
        << "the 4-row graph's logits for 3 rows differ from the eager step's";
  }
}

// A capture whose work failed to enqueue still ends with a graph: EndCapture destroys
// it (it leaked) and returns the enqueue's error; a good capture keeps its graph.
int destroyed_graphs = 0;
cudaError_t CountingDestroy(cudaGraph_t graph) {
  ++destroyed_graphs;
  return cudaGraphDestroy(graph);
}

TEST(CudaTransformerTest, AFailedCaptureDestroysItsGraph) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  void* buffer = nullptr;
  ASSERT_EQ(cudaMalloc(&buffer, 256), cudaSuccess);
  for (const bool fail : {true, false}) {
    SCOPED_TRACE(fail ? "failed enqueue" : "good capture");
    destroyed_graphs = 0;
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(buffer, 0, 256, stream), cudaSuccess);
    const absl::Status enqueued = fail ? absl::InternalError("a kernel failed") : absl::OkStatus();
    const absl::StatusOr<cudaGraph_t> graph =
        EndCapture(stream, enqueued, "test graph", CountingDestroy);
    if (fail) {
      EXPECT_THAT(graph, StatusIs(absl::StatusCode::kInternal, HasSubstr("a kernel failed")));
      EXPECT_EQ(destroyed_graphs, 1);
    } else {
      ASSERT_THAT(graph, IsOk());
      EXPECT_EQ(destroyed_graphs, 0);
      EXPECT_EQ(cudaGraphDestroy(*graph), cudaSuccess);
    }
  }
  cudaFree(buffer);
  cudaStreamDestroy(stream);
}

TEST(CudaTransformerTest, OutOfMemoryAtLoadNamesWhatDidNotFit) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  // Take (almost) all the device memory, then load.
  std::vector<void*> taken;
  for (size_t chunk = size_t{1} << 34; chunk >= (size_t{1} << 16); chunk /= 2) {
    void* p = nullptr;
    while (cudaMalloc(&p, chunk) == cudaSuccess) taken.push_back(p);
    cudaGetLastError();
  }
  absl::StatusOr<std::unique_ptr<CudaTransformer>> gpu =
      CudaTransformer::Load(et::FamilyModelDir("llama"), Options(4));
  for (void* p : taken) cudaFree(p);
  ASSERT_FALSE(gpu.ok());
  std::cout << gpu.status() << "\n";
  EXPECT_THAT(gpu.status(),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("bytes free of")));
  EXPECT_THAT(gpu.status().message(), HasSubstr("bytes) does not fit"));
}

}  // namespace
}  // namespace lockstep::cuda
