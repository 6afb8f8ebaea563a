#include "runtime/engine/cpu/cpu_engine.h"

#include <random>
#include <string>
#include <vector>

#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/engine/cpu/testing/mini_host.h"
#include "runtime/engine/cpu/testing/test_engine.h"
#include "runtime/engine/cpu/testing/test_models.h"
#include "runtime/engine/model/make_model.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::engine {
namespace {

using ::lockstep::engine::testing::HostOptions;
using ::lockstep::engine::testing::HostOutput;
using ::lockstep::engine::testing::HostRequest;
using ::lockstep::engine::testing::MakeTestEngine;
using ::lockstep::engine::testing::MiniHost;
using ::lockstep::engine::testing::PresetModelDir;
using ::lockstep::engine::testing::TestEngine;
using ::lockstep::engine::testing::TestEngineOptions;
using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::StatusIs;
using ::lockstep::testing::TestSeed;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::vector<HostRequest> RandomRequests(int n, uint64_t seed, int max_tokens, int logprobs) {
  std::mt19937_64 rng(seed);
  std::vector<HostRequest> requests;
  for (int i = 0; i < n; ++i) {
    HostRequest request;
    request.id = 100 + i;
    const int length = 3 + static_cast<int>(rng() % 90);
    request.prompt.push_back(kByteBosToken);
    for (int t = 1; t < length; ++t) request.prompt.push_back(static_cast<int32_t>(rng() % 256));
    request.sampling.max_tokens = max_tokens;
    request.sampling.logprobs = logprobs;
    request.sampling.ignore_eos = true;
    if (i % 3 == 2) {  // some stochastic requests
      request.sampling.temperature = 0.9f;
      request.sampling.top_p = 0.95f;
      request.sampling.seed = 1000 + i;
    }
    requests.push_back(std::move(request));
  }
  return requests;
}

struct Configuration {
  int tokens_per_block;
  int num_threads;
  HostOptions host;
};

// Every request's tokens and logprobs (so its logits, bitwise) are the same whatever
// shares its batches, the chunking, the block size, overlap and the thread count.
TEST(CpuEngineTest, OutputIsIndependentOfBatchingChunkingOverlapAndThreads) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  const std::vector<HostRequest> requests = RandomRequests(12, seed, 12, 2);
  for (const char* preset : {"tiny", "tiny-moe"}) {
    const Configuration setups[] = {
        {8, 1, {.chunk_size = 512, .max_batch = 1}},
        {8, 2, {.chunk_size = 13, .max_batch = 12, .overlap = true}},
        {3, 1, {.chunk_size = 32, .max_batch = 5}},
        {16, 3, {.chunk_size = 7, .max_batch = 7, .overlap = true}},
    };
    std::vector<std::vector<HostOutput>> outputs;
    for (const Configuration& setup : setups) {
      TestEngine engine = MakeTestEngine({.model_dir = PresetModelDir(preset),
                                          .tokens_per_block = setup.tokens_per_block,
                                          .num_threads = setup.num_threads,
                                          .pool_seed = seed + outputs.size()});
      MiniHost host(engine.engine.get(), engine.target.get(), nullptr, setup.host);
      for (const HostRequest& request : requests) host.Add(request);
      ASSERT_THAT(host.Run(), IsOk());
      EXPECT_TRUE(host.pools_clean()) << "the engine wrote outside its grant or into a free block";
      std::vector<HostOutput>& out = outputs.emplace_back();
      for (const HostRequest& request : requests) out.push_back(host.output(request.id));
    }
    for (size_t s = 1; s < outputs.size(); ++s) {
      for (size_t r = 0; r < requests.size(); ++r) {
        ASSERT_EQ(outputs[s][r].tokens.size(), 12u);
        EXPECT_EQ(outputs[s][r].tokens, outputs[0][r].tokens)
            << preset << " setup " << s << " request " << r;
        ASSERT_EQ(outputs[s][r].logprobs.size(), outputs[0][r].logprobs.size());
        for (size_t t = 0; t < outputs[0][r].logprobs.size(); ++t) {
          for (size_t j = 0; j < outputs[0][r].logprobs[t].size(); ++j) {
            EXPECT_EQ(outputs[s][r].logprobs[t][j].token, outputs[0][r].logprobs[t][j].token);
            EXPECT_EQ(outputs[s][r].logprobs[t][j].logprob, outputs[0][r].logprobs[t][j].logprob)
                << preset << " setup " << s << " request " << r << " token " << t;
          }
        }
      }
    }
  }
}

TEST(CpuEngineTest, InfoDescribesTheModel) {
  TestEngine engine = MakeTestEngine({.model_dir = PresetModelDir("tiny")});
  const EngineInfo info = engine.engine->info();
  EXPECT_EQ(info.vocab_size, 272);
  EXPECT_EQ(info.eos_token_id, kByteEosToken);
  EXPECT_EQ(info.max_position, 4096);
}

absl::StatusOr<BatchResult> RunBatch(ModelEngine& engine, Batch batch) {
  const StepId step = batch.step;
  engine.Launch(std::move(batch));
  return engine.Collect(step, absl::Seconds(30));
}

ContextChunk Chunk(int64_t id, std::vector<BlockId> blocks, std::vector<int32_t> tokens) {
  ContextChunk chunk;
  chunk.kv = kv::BlockRefs{RequestId(id), 1, std::move(blocks)};
  chunk.tokens = std::move(tokens);
  chunk.last_chunk = true;
  return chunk;
}

// The status of the one sequence of a batch: the engine refuses a sequence alone.
absl::Status SequenceStatus(const absl::StatusOr<BatchResult>& result) {
  if (!result.ok()) return result.status();
  if (result->sequences.size() != 1) return absl::InternalError("not one sequence");
  return result->sequences[0].status;
}

TEST(CpuEngineTest, InvalidSequencesAreRefusedWithTheRequestNamed) {
  TestEngine engine = MakeTestEngine({.model_dir = PresetModelDir("tiny"), .num_blocks = 8});
  ModelEngine& e = *engine.engine;
  int64_t step = 0;
  auto batch_of = [&](ContextChunk chunk) {
    Batch batch;
    batch.step = StepId(step++);
    batch.context.push_back(std::move(chunk));
    return batch;
  };
  const std::vector<BlockId> two = {BlockId(3), BlockId(5)};
  EXPECT_THAT(SequenceStatus(RunBatch(
                  e, batch_of(Chunk(7, {BlockId(3), BlockId(8)}, std::vector<int32_t>(12, 65))))),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("request 7"), HasSubstr("block id 8"))));
  EXPECT_THAT(
      SequenceStatus(RunBatch(e, batch_of(Chunk(7, {BlockId(3)}, std::vector<int32_t>(12, 65))))),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("block table")));
  EXPECT_THAT(SequenceStatus(RunBatch(e, batch_of(Chunk(7, two, {65, 272})))),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("token 272")));
  EXPECT_THAT(SequenceStatus(RunBatch(e, batch_of(Chunk(7, two, {})))),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("empty")));
  // A batch naming a request twice is the host's mistake: the whole batch fails.
  Batch duplicate = batch_of(Chunk(7, two, {65}));
  duplicate.context.push_back(Chunk(7, {BlockId(1)}, {66}));
  EXPECT_THAT(RunBatch(e, std::move(duplicate)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("twice")));

  GenerationStep unknown;
  unknown.kv = kv::BlockRefs{RequestId(9), 4, two};
  Batch gen;
  gen.step = StepId(step++);
  gen.generation.push_back(unknown);
  EXPECT_THAT(SequenceStatus(RunBatch(e, gen)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("request 9"), HasSubstr("no engine state"))));

  // The engine still works after refusals; the state lives until released.
  absl::StatusOr<BatchResult> ok = RunBatch(e, batch_of(Chunk(9, two, {256, 72, 105})));
  ASSERT_THAT(ok, IsOk());
  ASSERT_EQ(ok->sequences.size(), 1u);
  EXPECT_THAT(ok->sequences[0].status, IsOk());
  EXPECT_EQ(ok->sequences[0].tokens.size(), 1u);
  unknown.kv.generation = 1;
  gen.step = StepId(step++);
  gen.generation = {unknown};
  EXPECT_THAT(SequenceStatus(RunBatch(e, gen)), IsOk());
  gen.step = StepId(step++);
  gen.released = {unknown.kv};
  gen.generation.clear();
  EXPECT_THAT(RunBatch(e, gen), IsOk());
  gen.step = StepId(step++);
  gen.released.clear();
  gen.generation = {unknown};
  EXPECT_THAT(SequenceStatus(RunBatch(e, gen)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no engine state")));
}

// One sequence of a batch the engine refuses (here a step whose drafts would pass the
// model's last position) fails alone: its batch-mates' tokens and logprobs are what
// they are without it, and they go on from their state.
TEST(CpuEngineTest, ARefusedSequenceLeavesItsBatchMatesAlone) {
  auto run = [](bool with_refused) {
    TestEngine engine = MakeTestEngine({.model_dir = PresetModelDir("tiny"), .num_blocks = 16});
    std::vector<BlockId> blocks;
    EXPECT_THAT(engine.target->Cover(blocks, 16), IsOk());
    ContextChunk chunk = Chunk(1, blocks, {kByteBosToken, 72, 105, 33, 72});
    chunk.sampling.logprobs = 2;
    Batch first;
    first.step = StepId(0);
    first.context.push_back(chunk);
    if (with_refused) {
      // Seeded at history 4093 with 3 drafts: positions [4093, 4097) pass the 4096.
      GenerationStep late;
      late.kv = kv::BlockRefs{RequestId(2), 1, {BlockId(0)}};
      late.seed = SequenceSeed{4093, 72, {72, 72, 72}, {}};
      late.num_draft_tokens = 3;
      first.generation.push_back(late);
    }
    std::vector<SequenceResult> out;
    absl::StatusOr<BatchResult> result = RunBatch(*engine.engine, first);
    EXPECT_THAT(result, IsOk());
    if (!result.ok()) return out;
    EXPECT_EQ(result->sequences.size(), with_refused ? 2u : 1u);
    out.push_back(result->sequences[0]);
    if (with_refused) {
      EXPECT_THAT(
          result->sequences[1].status,
          StatusIs(absl::StatusCode::kInvalidArgument,
                   AllOf(HasSubstr("request 2"), HasSubstr("[4093, 4097)"), HasSubstr("4096"))));
      EXPECT_TRUE(result->sequences[1].tokens.empty());
    }
    // The batch-mate's next step continues from its own state.
    Batch second;
    second.step = StepId(1);
    GenerationStep next;
    next.kv = chunk.kv;
    next.sampling = chunk.sampling;
    second.generation.push_back(next);
    result = RunBatch(*engine.engine, second);
    EXPECT_THAT(SequenceStatus(result), IsOk());
    if (result.ok()) out.push_back(result->sequences[0]);
    return out;
  };
  const std::vector<SequenceResult> alone = run(false);
  const std::vector<SequenceResult> shared = run(true);
  ASSERT_EQ(alone.size(), 2u);
  ASSERT_EQ(shared.size(), 2u);
  for (size_t i = 0; i < alone.size(); ++i) {
    EXPECT_THAT(shared[i].status, IsOk());
    EXPECT_EQ(shared[i].tokens, alone[i].tokens) << "step " << i;
    ASSERT_EQ(shared[i].logprobs.size(), alone[i].logprobs.size());
    for (size_t t = 0; t < alone[i].logprobs.size(); ++t) {
      EXPECT_EQ(shared[i].logprobs[t][0].logprob, alone[i].logprobs[t][0].logprob);
    }
  }
}

TEST(CpuEngineTest, CollectChecksTheStepOrder) {
  TestEngine engine = MakeTestEngine({.model_dir = PresetModelDir("tiny")});
  EXPECT_THAT(engine.engine->Collect(StepId(1), absl::Seconds(1)),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no batch")));
  Batch first;
  first.step = StepId(1);
  Batch second;
  second.step = StepId(2);
  engine.engine->Launch(first);
  engine.engine->Launch(second);
  EXPECT_THAT(engine.engine->Collect(StepId(2), absl::Seconds(1)),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("step 1")));
  absl::StatusOr<BatchResult> one = engine.engine->Collect(StepId(1), absl::Seconds(30));
  ASSERT_THAT(one, IsOk());
  EXPECT_EQ(one->step, StepId(1));
  EXPECT_TRUE(one->sequences.empty());
  EXPECT_THAT(engine.engine->Collect(StepId(2), absl::Seconds(30)), IsOk());
}

TEST(CpuEngineTest, CreateRejectsBadOptionsNamingThem) {
  const std::string dir = PresetModelDir("tiny");
  std::vector<float> slab(1 << 16);
  CpuEngineOptions options;
  options.model_dir = dir;
  options.target_storage = slab.data();
  options.target_layout = kv::BlockLayout{4, 2, 16, 8};  // head_dim 16: wrong
  options.target_num_blocks = 1;
  EXPECT_THAT(CreateCpuEngine(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("head_dim=16"), HasSubstr("head_dim=32"), HasSubstr(dir))));
  options.target_layout = *ModelBlockLayout(dir, 8);
  options.target_storage = nullptr;
  EXPECT_THAT(CreateCpuEngine(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("target_storage")));
  options.target_storage = slab.data();
  options.speculative = {.method = spec::Method::kDraftModel, .num_draft_tokens = 2};
  EXPECT_THAT(CreateCpuEngine(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("draft_model_dir")));
  // The speculative block's own rules, in its words.
  options.speculative = {.method = spec::Method::kNone, .num_draft_tokens = 2};
  EXPECT_THAT(CreateCpuEngine(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_draft_tokens")));
  options.speculative = {.method = spec::Method::kNgram, .num_draft_tokens = 2, .ngram_max = 0};
  EXPECT_THAT(CreateCpuEngine(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("ngram_max")));
  options.speculative = {};
  options.world_size = 2;
  EXPECT_THAT(CreateCpuEngine(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("communicator")));
  options.world_size = 1;
  options.model_dir = dir + "/nonexistent";
  EXPECT_THAT(CreateCpuEngine(options),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("config.json")));
  options.model_dir = dir;
  EXPECT_THAT(CreateCpuEngine(options), IsOk());
}

}  // namespace
}  // namespace lockstep::engine
