// Speculative decoding with the model's own MTP layer on the CUDA engine (make-model's
// tiny-dsv3-mtp; runs on the CPU execution layer), through the ModelEngine contract:
//  * f32: greedy tokens with MTP (K = 2, graphs on) equal the CUDA engine's without
//    speculation and the CPU engine's, token for token; the drafts are accepted about as
//    often as the CPU engine's MTP drafts.
//  * bf16, batch-invariant GEMMs: more requests than the batch holds, so sequences grow,
//    drafts are rolled back and finished requests' target and draft blocks go to new
//    ones; the MTP layer's decode passes replay the graphs captured at start-up (before
//    any of those blocks or spec buffers existed) and draft exactly what eager passes
//    draft (the same proposals and acceptances), the tokens unchanged.
//  * The MTP layer's graphs, captured over an empty pool at start-up, replay later
//    steps on newly drawn blocks and spec buffers with the eager pass's bits.
//  * A draft model directory with method mtp is refused by name.
// Skips without a GPU.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/ids.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "kvcache/block_layout.h"
#include "runtime/cuda/engine/cuda_transformer.h"
#include "runtime/cuda/engine/device_kv_pool.h"
#include "runtime/cuda/engine/device_test_engine.h"
#include "runtime/cuda/gpu_test_env.h"
#include "runtime/engine/cpu/testing/mini_host.h"
#include "runtime/engine/cpu/testing/spec_runs.h"
#include "runtime/engine/cpu/testing/test_engine.h"
#include "runtime/engine/cpu/testing/test_models.h"
#include "runtime/engine/cpu/arena.h"
#include "runtime/engine/cpu/forward_model.h"
#include "runtime/engine/device_engine.h"
#include "runtime/engine/graph_buckets.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::cuda {
namespace {

using ::lockstep::testing::IsOk;
namespace et = ::lockstep::engine::testing;

constexpr int kTokensPerBlock = 4;
constexpr int kBlocks = 160;

struct Served {
  std::vector<std::vector<int32_t>> tokens;  // per request, in order
  int64_t proposed = 0;
  int64_t accepted = 0;
  int64_t mtp_forwards = 0;
  int64_t mtp_replays = 0;
  int mtp_graphs = 0;
};

// `requests` on tiny-dsv3-mtp on the CUDA engine, `max_batch` sequences per step.
Served ServeOnDevice(const std::vector<et::HostRequest>& requests, engine::DeviceDtype dtype,
                     bool graphs, int k, int max_batch) {
  engine::DeviceEngineOptions o;
  o.name = "mtp";
  o.model_dir = et::PresetModelDir("tiny-dsv3-mtp");
  if (k > 0) o.speculative = {.method = spec::Method::kMtp, .num_draft_tokens = k};
  o.dtype = dtype;
  o.batch_invariant = true;
  o.graphs = graphs;
  o.tokens_per_block = kTokensPerBlock;
  o.max_batch_size = max_batch;
  o.max_num_tokens = max_batch * 16;
  testing::DeviceTestEngine device(kBlocks);
  Served served;
  const absl::Status started = device.Start(o);
  EXPECT_THAT(started, IsOk());
  if (!started.ok()) return served;
  const kv::BlockLayout bookkeeping{1, 1, 1, kTokensPerBlock};
  et::HostPool target(bookkeeping, kBlocks, 3);  // blocks handed out in a seeded order
  et::HostPool draft(bookkeeping, kBlocks, 4);
  et::HostOptions h;
  h.chunk_size = 16;
  h.max_batch = max_batch;
  h.num_draft_tokens = k;
  h.spec_method = spec::Method::kMtp;
  et::MiniHost host(device.engine(), &target, k > 0 ? &draft : nullptr, h);
  for (const et::HostRequest& r : requests) host.Add(r);
  EXPECT_THAT(host.Run(), IsOk());
  EXPECT_TRUE(host.pools_clean());
  for (const et::HostRequest& r : requests) {
    served.tokens.push_back(host.output(r.id).tokens);
    served.proposed += host.output(r.id).proposed;
    served.accepted += host.output(r.id).accepted;
  }
  if (CudaTransformer* mtp = device.mtp_model(); mtp != nullptr) {
    served.mtp_forwards = mtp->forwards();
    served.mtp_replays = mtp->graph_replays();
    served.mtp_graphs = mtp->captured_graphs();
  }
  return served;
}

TEST(CudaMtpTest, GreedyTokensEqualNoSpeculationAndTheCpuEngines) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const std::vector<et::HostRequest> requests = et::SpecPrompts(3, 7, 10, /*stochastic=*/false);
  const Served plain = ServeOnDevice(requests, engine::DeviceDtype::kF32, true, 0, 4);
  const Served mtp = ServeOnDevice(requests, engine::DeviceDtype::kF32, true, 2, 4);
  ASSERT_EQ(plain.tokens.size(), requests.size());
  EXPECT_EQ(mtp.tokens, plain.tokens) << "MTP K=2 changed the greedy tokens";

  const std::string dir = et::PresetModelDir("tiny-dsv3-mtp");
  const et::SpecRunOutput cpu = et::RunSpec(dir, et::SpecRun{}, requests, 7);
  const et::SpecRunOutput cpu_mtp =
      et::RunSpec(dir, {.method = spec::Method::kMtp, .k = 2}, requests, 7);
  EXPECT_EQ(plain.tokens, cpu.tokens) << "the CUDA engine's tokens are not the CPU engine's";
  EXPECT_EQ(cpu_mtp.tokens, cpu.tokens);

  std::printf("CUDA MTP K=2: %lld / %lld accepted; CPU engine: %lld / %lld\n",
              static_cast<long long>(mtp.accepted), static_cast<long long>(mtp.proposed),
              static_cast<long long>(cpu_mtp.accepted), static_cast<long long>(cpu_mtp.proposed));
  ASSERT_GT(mtp.proposed, 0) << "MTP proposed nothing";
  ASSERT_GT(cpu_mtp.proposed, 0);
  // The same module in f32: its drafts are accepted about as often as the CPU's.
  const double rate = static_cast<double>(mtp.accepted) / static_cast<double>(mtp.proposed);
  const double cpu_rate =
      static_cast<double>(cpu_mtp.accepted) / static_cast<double>(cpu_mtp.proposed);
  EXPECT_GE(rate, 0.8 * cpu_rate);
  EXPECT_GT(mtp.mtp_forwards, 0);
}

TEST(CudaMtpTest, GraphReplaysAfterBlockReuseDraftWhatEagerPassesDraft) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const std::vector<et::HostRequest> requests = et::SpecPrompts(5, 11, 8, /*stochastic=*/false);
  const Served eager = ServeOnDevice(requests, engine::DeviceDtype::kBf16, false, 3, 2);
  const Served graphs = ServeOnDevice(requests, engine::DeviceDtype::kBf16, true, 3, 2);
  const Served plain = ServeOnDevice(requests, engine::DeviceDtype::kBf16, true, 0, 2);
  ASSERT_EQ(plain.tokens.size(), requests.size());
  EXPECT_EQ(eager.tokens, plain.tokens);
  EXPECT_EQ(graphs.tokens, plain.tokens);
  EXPECT_EQ(eager.mtp_replays, 0);
  EXPECT_GT(graphs.mtp_graphs, 0) << "no MTP graph was captured at start-up";
  EXPECT_GT(graphs.mtp_replays, 0) << "no MTP pass replayed a graph";
  std::printf("MTP passes: %lld, %lld of them graph replays; %lld / %lld accepted\n",
              static_cast<long long>(graphs.mtp_forwards),
              static_cast<long long>(graphs.mtp_replays),
              static_cast<long long>(graphs.accepted), static_cast<long long>(graphs.proposed));
  // A replay that read another block, spec buffer or hidden state than the eager pass
  // would draft other tokens.
  EXPECT_EQ(graphs.proposed, eager.proposed);
  EXPECT_EQ(graphs.accepted, eager.accepted);
  EXPECT_GT(graphs.accepted, 0);
}

// The anchor's failure (a graph replay reading a draft-KV pointer that was not valid
// when the graph was captured), on the MTP layer itself: its graphs are captured over
// an empty pool before any sequence exists; then, round after round, sequences get
// blocks drawn anew (the last round's went back), grown tables and spec buffers made
// after the capture, and decode passes write and read K/V there, a draft position
// rewritten after a rollback included. Each pass from its graph gives the eager pass's
// logits and hidden states, bit for bit.
TEST(CudaMtpTest, LayerGraphsCapturedAtStartUpReadTheBlocksOfLaterSteps) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const std::string dir = et::PresetModelDir("tiny-dsv3-mtp");
  CudaModelOptions o;
  o.element_bytes = 2;
  o.batch_invariant = true;
  o.max_rows = 64;
  o.max_seqs = 4;
  o.max_decode_rows = 16;
  o.tokens_per_block = kTokensPerBlock;
  o.max_spec_tokens = 3;
  absl::StatusOr<std::unique_ptr<CudaTransformer>> target = CudaTransformer::Load(dir, o);
  ASSERT_THAT(target, IsOk());
  absl::StatusOr<std::unique_ptr<CudaTransformer>> mtp =
      CudaTransformer::LoadMtp(dir, o, **target);
  ASSERT_THAT(mtp, IsOk());
  CudaTransformer& layer = **mtp;
  const kv::BlockLayout layout = layer.Layout(kTokensPerBlock);
  ASSERT_EQ(layout.num_layers, 1);
  absl::StatusOr<DeviceKvPool> pool = MakeDeviceKvPool(0, layout, 64);
  ASSERT_THAT(pool, IsOk());
  absl::StatusOr<engine::GraphBuckets> buckets = engine::GraphBuckets::Plan(4, 2, {1, 2, 4});
  ASSERT_THAT(buckets, IsOk());
  ASSERT_THAT(layer.CaptureGraphs(pool->view, *buckets), IsOk());

  const int hidden = layer.config().hidden_size;
  const int vocab = layer.config().vocab_size;
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  et::HostPool blocks(kv::BlockLayout{1, 1, 1, kTokensPerBlock}, 64, 9);
  engine::Arena arena;
  int64_t replays = 0;
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    const std::vector<int64_t> lengths = {9 + 5 * round, 14 - round};
    std::vector<std::vector<BlockId>> tables(2);
    std::vector<std::unique_ptr<engine::SpecBuffer>> spec;
    std::vector<engine::SequenceKv> seqs;
    for (int s = 0; s < 2; ++s) {
      ASSERT_THAT(blocks.Cover(tables[s], lengths[s]), IsOk());
      spec.push_back(layer.NewSpecBuffer(3));
    }
    // The prompt into the pool, eagerly (previous hidden states at random).
    std::vector<engine::ForwardRow> rows;
    for (int s = 0; s < 2; ++s) {
      seqs.push_back({tables[s], lengths[s], spec[s]->data(), 3});
      for (int64_t p = 0; p < lengths[s]; ++p) {
        rows.push_back({static_cast<int32_t>(rng() % vocab), p, s});
      }
    }
    std::vector<float> in(rows.size() * hidden), out(rows.size() * hidden);
    for (float& v : in) v = value(rng);
    ASSERT_THAT(layer
                    .Forward({rows, seqs, {}, engine::StepAgreement{}, in.data(), out.data()},
                             pool->view, arena, nullptr)
                    .status(),
                IsOk());
    // Decode passes into the spec buffers: positions len, len + 1, then len again (a
    // rolled-back draft) and len + 1, each eagerly and from its graph.
    for (const int64_t offset : {0, 1, 0, 1}) {
      std::vector<engine::ForwardRow> step;
      for (int s = 0; s < 2; ++s) {
        step.push_back({static_cast<int32_t>(rng() % vocab), lengths[s] + offset, s});
      }
      const std::vector<int32_t> logit_rows = {0, 1};
      std::vector<float> previous(2 * hidden);
      for (float& v : previous) v = value(rng);
      std::vector<float> eager_hidden(2 * hidden), graph_hidden(2 * hidden);
      absl::StatusOr<const float*> e = layer.Forward(
          {step, seqs, logit_rows, engine::StepAgreement{2, /*any_context=*/true, false},
           previous.data(), eager_hidden.data()},
          pool->view, arena, nullptr);
      ASSERT_THAT(e, IsOk());
      const std::vector<float> eager(*e, *e + 2 * vocab);
      absl::StatusOr<const float*> g = layer.Forward(
          {step, seqs, logit_rows, engine::StepAgreement{2, /*any_context=*/false, false},
           previous.data(), graph_hidden.data()},
          pool->view, arena, nullptr);
      ASSERT_THAT(g, IsOk());
      EXPECT_EQ(layer.graph_replays(), ++replays) << "the pass did not replay its graph";
      EXPECT_EQ(std::memcmp(eager.data(), *g, eager.size() * sizeof(float)), 0)
          << "position offset " << offset << ": the graph's logits differ from the eager pass's";
      EXPECT_EQ(graph_hidden, eager_hidden) << "position offset " << offset;
    }
    for (const auto& table : tables) {
      for (BlockId b : table) blocks.Free(b);
    }
  }
}

TEST(CudaMtpTest, ADraftModelDirectoryIsRefused) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  engine::DeviceEngineOptions o;
  o.name = "mtp";
  o.model_dir = et::PresetModelDir("tiny-dsv3-mtp");
  o.draft_model_dir = o.model_dir + "/draft";
  o.speculative = {.method = spec::Method::kMtp, .num_draft_tokens = 2};
  testing::DeviceTestEngine device(kBlocks);
  const absl::Status started = device.Start(o);
  ASSERT_FALSE(started.ok());
  EXPECT_NE(started.message().find("speculative.method mtp drafts with the MTP layer"),
            std::string::npos)
      << started;
}

}  // namespace
}  // namespace lockstep::cuda
