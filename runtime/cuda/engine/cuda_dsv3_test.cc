// GPU checks of the DeepSeek-V3 family on CudaTransformer against the CPU transformer
// (runtime/engine/cpu/testing/forward_compare.h: a prefill of three prompts in one
// forward, six greedy decode steps on the CPU's tokens, a verification of three drafts
// per sequence), in f32: MLA over the latent cache (absorbed form), YaRN, grouped sigmoid
// routing with the correction bias and scaling factor (the CUDA router's own choice: no
// teacher forcing), shared experts, and FP8 weights dequantized at load. Thresholds:
// relative L2 of every logit row <= 1e-4 and greedy tokens equal under the margin rule
// (docs/gpu.md). The presets tiny-dsv3 and tiny-dsv3-fp8, and a variant without
// q_lora_rank whose YaRN original context (16) the prompts pass. The latent cache both
// engines wrote holds the same values in the same layout (what a CPU <-> CUDA KV
// transfer relies on), and a decode step replayed from its CUDA graph (pad row included)
// gives the eager step's bits. Through the engine: f32 greedy tokens equal the CPU
// engine's, and in bf16 graphs and speculation (n-gram, draft model) leave the greedy
// tokens alone. Skips without a GPU.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/status_macros.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "runtime/cuda/engine/cuda_transformer.h"
#include "runtime/cuda/engine/device_kv_pool.h"
#include "runtime/cuda/engine/device_test_engine.h"
#include "runtime/cuda/gpu_test_env.h"
#include "runtime/engine/cpu/arena.h"
#include "runtime/engine/cpu/testing/forward_compare.h"
#include "runtime/engine/cpu/testing/mini_host.h"
#include "runtime/engine/cpu/testing/spec_runs.h"
#include "runtime/engine/cpu/testing/test_engine.h"
#include "runtime/engine/cpu/testing/test_models.h"
#include "runtime/engine/cpu/transformer.h"
#include "runtime/engine/graph_buckets.h"
#include "runtime/engine/model/model_config.h"
#include "runtime/engine/model/safetensors.h"
#include "runtime/engine/model/weight_plan.h"

namespace lockstep::cuda {
namespace {

using ::lockstep::testing::IsOk;
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

// A tiny DeepSeek-V3 without q_lora_rank (q_proj), YaRN over an original context of 16.
std::string NoQLoraModelDir() {
  absl::StatusOr<engine::ModelConfig> config = engine::ParseModelConfig(
      R"({"model_type": "deepseek_v3", "vocab_size": 300, "hidden_size": 64,
      "intermediate_size": 96, "moe_intermediate_size": 24, "num_hidden_layers": 3,
      "num_attention_heads": 4, "num_key_value_heads": 4, "n_shared_experts": 2,
      "n_routed_experts": 8, "routed_scaling_factor": 2.5, "kv_lora_rank": 24,
      "qk_rope_head_dim": 8, "v_head_dim": 12, "qk_nope_head_dim": 16, "n_group": 4,
      "topk_group": 2, "num_experts_per_tok": 3, "first_k_dense_replace": 1,
      "norm_topk_prob": true, "max_position_embeddings": 256, "bos_token_id": 256,
      "eos_token_id": 257, "q_lora_rank": null, "rope_scaling": {"type": "yarn",
      "factor": 4.0, "original_max_position_embeddings": 16, "beta_fast": 32,
      "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}})",
      "tiny-deepseek-no-q-lora");
  LOCKSTEP_CHECK_OK(config.status());
  return et::CustomModelDir(*config, "deepseek_no_q_lora", 7);
}

struct Run {
  et::CompareReport report;
  int64_t compared_kv = 0;  // cache values compared
  double worst_kv_error = 0.0;
};

// The comparison of `dir` in f32, then both pools' latent caches value by value.
absl::StatusOr<Run> Compare(const std::string& dir, const std::string& name) {
  ASSIGN_OR_RETURN(std::unique_ptr<engine::Transformer> cpu,
                   engine::Transformer::Load(dir, "target", engine::ExpertGroup{}));
  ASSIGN_OR_RETURN(std::unique_ptr<CudaTransformer> gpu, CudaTransformer::Load(dir, Options(4)));
  const kv::BlockLayout layout = cpu->Layout(kTokensPerBlock);
  const kv::BlockLayout gpu_layout = gpu->Layout(kTokensPerBlock);
  if (gpu_layout.num_kv_heads != layout.num_kv_heads || gpu_layout.head_dim != layout.head_dim ||
      gpu_layout.num_layers != layout.num_layers) {
    return absl::InternalError("the CUDA engine's cache layout is not the CPU engine's");
  }
  et::HostPool host(layout, kBlocks, 1);
  ASSIGN_OR_RETURN(DeviceKvPool device, MakeDeviceKvPool(0, gpu_layout, kBlocks));
  const auto prompts = et::RandomPrompts({37, 5, 70}, cpu->config().vocab_size, 11);
  Run run;
  ASSIGN_OR_RETURN(run.report, et::CompareForwards(*cpu, host, *gpu, device.view, prompts,
                                                   et::CompareOptions{}));
  std::cout << "[" << name << " f32] " << run.report.ToString() << "\n";
  // Every value the CPU engine wrote (free blocks hold the sentinel) against the device's.
  const size_t values = static_cast<size_t>(kBlocks) * layout.BlockElements();
  std::vector<float> on_device(values);
  if (cudaMemcpy(on_device.data(), device.view.storage, values * sizeof(float),
                 cudaMemcpyDeviceToHost) != cudaSuccess) {
    return absl::InternalError("copying the device pool back");
  }
  for (size_t i = 0; i < values; ++i) {
    const float want = host.storage()[i];
    if (want == et::HostPool::kSentinel || std::isnan(want)) continue;
    ++run.compared_kv;
    run.worst_kv_error = std::max(
        run.worst_kv_error, std::fabs(static_cast<double>(on_device[i]) - want) / (1.0 + std::fabs(want)));
  }
  return run;
}

void ExpectMatches(const std::string& dir, const std::string& name) {
  SCOPED_TRACE(name);
  absl::StatusOr<Run> run = Compare(dir, name);
  ASSERT_THAT(run, IsOk());
  EXPECT_LE(run->report.worst_rel_l2, 1e-4) << run->report.ToString();
  EXPECT_EQ(run->report.argmax_mismatches, 0) << run->report.ToString();
  EXPECT_GT(run->report.rows, 20) << run->report.ToString();
  EXPECT_GT(run->compared_kv, 1000);
  EXPECT_LE(run->worst_kv_error, 1e-5) << "of " << run->compared_kv << " cached values";
}

TEST(CudaDeepseekTest, TinyDsv3F32MatchesTheCpuEngine) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  ExpectMatches(et::PresetModelDir("tiny-dsv3"), "tiny-dsv3");
}

TEST(CudaDeepseekTest, TinyDsv3Fp8F32MatchesTheCpuEngine) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  ExpectMatches(et::PresetModelDir("tiny-dsv3-fp8"), "tiny-dsv3-fp8");
}

TEST(CudaDeepseekTest, WithoutQLoraPastYarnsOriginalContextMatchesTheCpuEngine) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  ExpectMatches(NoQLoraModelDir(), "no q_lora, YaRN past 16");
}

// The latent cache's size: one head of cache_head_dim per K and V plane per layer.
TEST(CudaDeepseekTest, CachesTheLatentVectorOnly) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  absl::StatusOr<std::unique_ptr<CudaTransformer>> gpu =
      CudaTransformer::Load(et::PresetModelDir("tiny-dsv3"), Options(2));
  ASSERT_THAT(gpu, IsOk());
  const engine::ModelConfig& c = (*gpu)->config();
  const kv::BlockLayout layout = (*gpu)->Layout(kTokensPerBlock);
  EXPECT_EQ(layout.num_kv_heads, 1);
  EXPECT_EQ(2 * layout.head_dim, c.mla_dims.kv_lora_rank + c.mla_dims.qk_rope_head_dim);
  EXPECT_EQ(layout.element_bytes, 2);
}

// FP8 weights are dequantized at load: on the device (bf16) the FP8 checkpoint's
// weights take what the same model's f32 checkpoint's take, more than the FP8
// checkpoint stores them in. The figures are in docs/gpu.md ("FP8 weight memory").
TEST(CudaDeepseekTest, Fp8WeightsTakeTheirBf16BytesOnTheDevice) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  std::vector<size_t> device, stored;
  for (const std::string preset : {"tiny-dsv3", "tiny-dsv3-fp8"}) {
    const std::string dir = et::PresetModelDir(preset);
    absl::StatusOr<std::unique_ptr<CudaTransformer>> gpu = CudaTransformer::Load(dir, Options(2));
    ASSERT_THAT(gpu, IsOk());
    device.push_back((*gpu)->weight_bytes());
    // The stored bytes of every weight the engine loads (FP8 scales included).
    absl::StatusOr<std::unique_ptr<engine::SafetensorsModel>> tensors =
        engine::SafetensorsModel::Open(dir);
    ASSERT_THAT(tensors, IsOk());
    const engine::ModelPlan plan = engine::PlanWeights((*gpu)->config(), 0, 1);
    for (const engine::WeightSource* w : plan.All()) {
      ASSERT_THAT(engine::ReadWeight(**tensors, *w).status(), IsOk());
    }
    stored.push_back((*tensors)->BytesRead());
    std::cout << "[" << preset << "] stored " << stored.back() << " bytes, on the device (bf16) "
              << device.back() << " bytes\n";
  }
  EXPECT_EQ(device[1], device[0]) << "the FP8 model's device weights are not the f32 model's";
  EXPECT_LT(stored[1], device[1]) << "the FP8 checkpoint stores fewer bytes than the device holds";
}

// The same decode step eagerly and from its graph (bucket 4 for 3 rows: a pad row).
TEST(CudaDeepseekTest, AGraphReplayGivesTheEagerBits) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  absl::StatusOr<std::unique_ptr<CudaTransformer>> gpu =
      CudaTransformer::Load(et::PresetModelDir("tiny-dsv3"), Options(2, /*batch_invariant=*/true));
  ASSERT_THAT(gpu, IsOk());
  absl::StatusOr<DeviceKvPool> pool =
      MakeDeviceKvPool(0, (*gpu)->Layout(kTokensPerBlock), kBlocks);
  ASSERT_THAT(pool, IsOk());
  absl::StatusOr<engine::GraphBuckets> buckets = engine::GraphBuckets::Plan(8, 3, {1, 4, 8});
  ASSERT_THAT(buckets, IsOk());
  ASSERT_THAT((*gpu)->CaptureGraphs(pool->view, *buckets), IsOk());
  const int vocab = (*gpu)->config().vocab_size;
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
  engine::Arena arena;
  ASSERT_THAT((*gpu)->Forward({rows, seqs, {19, 39}}, pool->view, arena, nullptr).status(),
              IsOk());
  const std::vector<engine::ForwardRow> step = {{7, 20, 0}, {8, 21, 0}, {9, 20, 1}};
  const std::vector<int32_t> all = {0, 1, 2};
  absl::StatusOr<const float*> e = (*gpu)->Forward(
      {step, seqs, all, engine::StepAgreement{3, /*any_context=*/true, false}}, pool->view, arena,
      nullptr);
  ASSERT_THAT(e, IsOk());
  const std::vector<float> eager(*e, *e + 3 * vocab);
  absl::StatusOr<const float*> g = (*gpu)->Forward(
      {step, seqs, all, engine::StepAgreement{3, /*any_context=*/false, false}}, pool->view,
      arena, nullptr);
  ASSERT_THAT(g, IsOk());
  EXPECT_EQ((*gpu)->graph_replays(), 1) << "the step did not replay its graph";
  EXPECT_EQ(std::memcmp(eager.data(), *g, 3 * vocab * sizeof(float)), 0)
      << "the 4-row graph's logits for 3 rows differ from the eager step's";
}

// The CUDA engine (ModelEngine contract, CUDA graphs on) serving tiny-dsv3 in f32 gives
// the CPU engine's greedy tokens.
TEST(CudaDeepseekTest, EngineGreedyTokensEqualTheCpuEngines) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const std::string dir = et::PresetModelDir("tiny-dsv3");
  const std::vector<et::HostRequest> requests = et::SpecPrompts(4, 5, 16, /*stochastic=*/false);
  et::HostOptions h;
  h.chunk_size = 24;
  engine::DeviceEngineOptions o;
  o.name = "dsv3";
  o.model_dir = dir;
  o.dtype = engine::DeviceDtype::kF32;
  o.batch_invariant = true;
  o.graphs = true;
  o.tokens_per_block = kTokensPerBlock;
  o.max_batch_size = 8;
  o.max_num_tokens = 8 * 24;
  testing::DeviceTestEngine device(kBlocks * 4);
  ASSERT_THAT(device.Start(o), IsOk());
  const kv::BlockLayout bookkeeping{1, 1, 1, kTokensPerBlock};
  et::HostPool blocks(bookkeeping, kBlocks * 4, 1);
  et::MiniHost gpu(device.engine(), &blocks, nullptr, h);
  et::TestEngineOptions cpu_options;
  cpu_options.model_dir = dir;
  et::TestEngine cpu_engine = et::MakeTestEngine(cpu_options);
  et::MiniHost cpu(cpu_engine.engine.get(), cpu_engine.target.get(), nullptr, h);
  for (const et::HostRequest& r : requests) {
    gpu.Add(r);
    cpu.Add(r);
  }
  ASSERT_THAT(gpu.Run(), IsOk());
  ASSERT_THAT(cpu.Run(), IsOk());
  for (const et::HostRequest& r : requests) {
    EXPECT_EQ(gpu.output(r.id).tokens, cpu.output(r.id).tokens) << "request " << r.id;
    EXPECT_EQ(gpu.output(r.id).tokens.size(), 16u);
  }
}

// Greedy tokens of tiny-dsv3 on the CUDA engine (bf16, batch-invariant GEMMs) from
// `requests` with graphs on or off and speculation (the draft's K/V in spec buffers of
// the latent layout for the target's verification).
std::vector<std::vector<int32_t>> ServeOnDevice(const std::vector<et::HostRequest>& requests,
                                                bool graphs, spec::Method method, int k) {
  const std::string dir = et::PresetModelDir("tiny-dsv3");
  engine::DeviceEngineOptions o;
  o.name = "dsv3";
  o.model_dir = dir;
  if (method != spec::Method::kNone) o.speculative = {.method = method, .num_draft_tokens = k};
  if (method == spec::Method::kDraftModel) o.draft_model_dir = dir + "/draft";
  o.dtype = engine::DeviceDtype::kBf16;
  o.batch_invariant = true;
  o.graphs = graphs;
  o.tokens_per_block = kTokensPerBlock;
  o.max_batch_size = 8;
  o.max_num_tokens = 8 * 24;
  testing::DeviceTestEngine device(kBlocks * 4);
  const absl::Status started = device.Start(o);
  EXPECT_THAT(started, IsOk());
  if (!started.ok()) return {};
  const kv::BlockLayout bookkeeping{1, 1, 1, kTokensPerBlock};
  et::HostPool target(bookkeeping, kBlocks * 4, 1);
  et::HostPool draft(bookkeeping, kBlocks * 4, 2);
  et::HostOptions h;
  h.chunk_size = 24;
  h.num_draft_tokens = k;
  h.spec_method = method == spec::Method::kNone ? spec::Method::kDraftModel : method;
  h.overlap = true;
  et::MiniHost host(device.engine(), &target,
                    method == spec::Method::kDraftModel ? &draft : nullptr, h);
  for (const et::HostRequest& r : requests) host.Add(r);
  EXPECT_THAT(host.Run(), IsOk());
  std::vector<std::vector<int32_t>> tokens;
  for (const et::HostRequest& r : requests) tokens.push_back(host.output(r.id).tokens);
  return tokens;
}

TEST(CudaDeepseekTest, GraphsAndSpeculationLeaveTheTokensAlone) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const std::vector<et::HostRequest> requests =
      et::SpecPrompts(4, 3, 12, /*stochastic=*/false, /*repeating=*/true);
  const auto base = ServeOnDevice(requests, true, spec::Method::kNone, 0);
  ASSERT_EQ(base.size(), requests.size());
  EXPECT_EQ(ServeOnDevice(requests, false, spec::Method::kNone, 0), base) << "graphs off";
  EXPECT_EQ(ServeOnDevice(requests, true, spec::Method::kNgram, 3), base) << "n-gram K=3";
  EXPECT_EQ(ServeOnDevice(requests, true, spec::Method::kDraftModel, 2), base)
      << "draft model K=2";
}

}  // namespace
}  // namespace lockstep::cuda
