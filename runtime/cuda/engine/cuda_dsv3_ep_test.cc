// GPU check of the DeepSeek-V3 family under expert parallelism on CudaTransformer:
// tiny-dsv3 (8 routed experts, shared experts on every rank) over two and four ranks,
// each a thread with its own device and NcclGroup (one in-process rendezvous), with
// batch-invariant GEMMs in f32 (and bf16 on two ranks). Every rank prefills its own
// prompt (of its own length) and decodes greedily in lockstep, its MoE rows crossing
// ranks in every layer; each rank's logits equal a one-rank model's on the same rows
// bit for bit (so its tokens do), and in f32 the tokens equal the CPU engine's. Skips
// without a GPU per rank.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "runtime/comm/rendezvous_client.h"
#include "runtime/comm/rendezvous_service.h"
#include "runtime/cuda/cuda_status.h"
#include "runtime/cuda/engine/cuda_transformer.h"
#include "runtime/cuda/engine/device_kv_pool.h"
#include "runtime/cuda/gpu_test_env.h"
#include "runtime/cuda/nccl_group.h"
#include "runtime/engine/cpu/arena.h"
#include "runtime/engine/cpu/forward_model.h"
#include "runtime/engine/cpu/testing/forward_compare.h"
#include "runtime/engine/cpu/testing/test_models.h"
#include "runtime/engine/cpu/transformer.h"

namespace lockstep::cuda {
namespace {

using ::lockstep::testing::IsOk;
namespace et = ::lockstep::engine::testing;

constexpr int kBlocks = 32;
constexpr int kTokensPerBlock = 8;
constexpr int kSteps = 6;

// Greedy decoding of one sequence: its tokens and the logits they were chosen from.
struct Greedy {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
};

// Prefills `prompt` in one forward, then kSteps single-row decode forwards.
absl::StatusOr<Greedy> Decode(const engine::ForwardModel& model, const engine::KvPoolView& pool,
                              const std::vector<int32_t>& prompt) {
  et::HostPool ids(model.Layout(kTokensPerBlock), kBlocks, 1);  // block ids only
  std::vector<BlockId> table;
  RETURN_IF_ERROR(ids.Cover(table, static_cast<int64_t>(prompt.size()) + kSteps + 1));
  const std::vector<engine::SequenceKv> seqs = {engine::SequenceKv{table}};
  const int vocab = model.config().vocab_size;
  std::vector<engine::ForwardRow> rows;
  for (size_t p = 0; p < prompt.size(); ++p)
    rows.push_back({prompt[p], static_cast<int64_t>(p), 0});
  Greedy out;
  engine::Arena arena;
  for (int step = 0; step <= kSteps; ++step) {
    const std::vector<int32_t> logit_rows = {static_cast<int32_t>(rows.size()) - 1};
    ASSIGN_OR_RETURN(const float* logits,
                     model.Forward({rows, seqs, logit_rows}, pool, arena, nullptr));
    out.logits.emplace_back(logits, logits + vocab);
    const int32_t token = static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
    out.tokens.push_back(token);
    const int64_t position = rows.back().position + 1;
    rows = {{token, position, 0}};
  }
  return out;
}

CudaModelOptions Options(int device, NcclGroup* group, int element_bytes) {
  CudaModelOptions o;
  o.device = device;
  o.element_bytes = element_bytes;
  o.batch_invariant = true;
  o.max_rows = 64;
  o.max_seqs = 2;
  o.max_decode_rows = 8;
  o.tokens_per_block = kTokensPerBlock;
  o.group = group;
  o.timeout = absl::Seconds(120);
  return o;
}

// One rank of `world` (world 1: no group) on device `rank`, from its own thread.
absl::StatusOr<Greedy> RunRank(const std::string& dir, int rank, int world,
                               const std::string& rendezvous, const std::vector<int32_t>& prompt,
                               int element_bytes) {
  RETURN_IF_ERROR(CudaStatus(cudaSetDevice(rank), "selecting the rank's device"));
  std::unique_ptr<comm::RendezvousClient> client;
  std::unique_ptr<NcclGroup> group;
  if (world > 1) {
    client = comm::RendezvousClient::Connect(rendezvous, "cuda_dsv3_ep_test");
    NcclGroupOptions g;
    g.name = absl::StrCat("cuda_dsv3_ep_test/world", world);
    g.rank = rank;
    g.world_size = world;
    g.local_rank = rank;
    g.rendezvous = client.get();
    g.uid_key = absl::StrCat("world", world, "/nccl/uid");
    g.bootstrap_timeout = absl::Seconds(120);
    ASSIGN_OR_RETURN(group, NcclGroup::Create(g));
  }
  absl::StatusOr<Greedy> out;
  {
    ASSIGN_OR_RETURN(std::unique_ptr<CudaTransformer> model,
                     CudaTransformer::Load(dir, Options(rank, group.get(), element_bytes)));
    ASSIGN_OR_RETURN(DeviceKvPool pool,
                     MakeDeviceKvPool(rank, model->Layout(kTokensPerBlock), kBlocks));
    out = Decode(*model, pool.view, prompt);
  }
  return out;
}

// f32 (4 bytes) also against the CPU engine's tokens.
void ExpectRanksEqualOneRank(int world, int element_bytes) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  if (devices < world) GTEST_SKIP() << world << " ranks need as many GPUs";
  const std::string dir = et::PresetModelDir("tiny-dsv3");
  std::vector<int> lengths;
  for (int r = 0; r < world; ++r) lengths.push_back(9 + 7 * r);
  const auto prompts = et::RandomPrompts(lengths, 256, 17 + world);
  absl::StatusOr<std::unique_ptr<comm::RendezvousServer>> server = comm::RendezvousServer::Start();
  ASSERT_THAT(server, IsOk());
  std::vector<absl::StatusOr<Greedy>> ranks(world, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      ranks[r] = RunRank(dir, r, world, (*server)->address(), prompts[r], element_bytes);
    });
  }
  for (std::thread& t : threads) t.join();
  absl::StatusOr<std::unique_ptr<engine::Transformer>> cpu =
      engine::Transformer::Load(dir, "target", engine::ExpertGroup{});
  ASSERT_THAT(cpu, IsOk());
  for (int r = 0; r < world; ++r) {
    SCOPED_TRACE(::testing::Message() << "rank " << r << " of " << world);
    ASSERT_THAT(ranks[r], IsOk());
    const absl::StatusOr<Greedy> alone = RunRank(dir, 0, 1, "", prompts[r], element_bytes);
    ASSERT_THAT(alone, IsOk());
    EXPECT_EQ(ranks[r]->tokens, alone->tokens);
    for (size_t step = 0; step < alone->logits.size(); ++step) {
      EXPECT_EQ(ranks[r]->logits[step], alone->logits[step]) << "logits of step " << step;
    }
    if (element_bytes != 4) continue;
    et::HostPool host((*cpu)->Layout(kTokensPerBlock), kBlocks, 3);
    const absl::StatusOr<Greedy> on_cpu = Decode(**cpu, host.view(), prompts[r]);
    ASSERT_THAT(on_cpu, IsOk());
    EXPECT_EQ(ranks[r]->tokens, on_cpu->tokens) << "the CPU engine's tokens";
  }
}

TEST(CudaDeepseekEpTest, TwoRanksEqualOneRankBitwise) { ExpectRanksEqualOneRank(2, 4); }

TEST(CudaDeepseekEpTest, FourRanksEqualOneRankBitwise) { ExpectRanksEqualOneRank(4, 4); }

TEST(CudaDeepseekEpTest, TwoRanksInBf16EqualOneRankBitwise) { ExpectRanksEqualOneRank(2, 2); }

}  // namespace
}  // namespace lockstep::cuda
