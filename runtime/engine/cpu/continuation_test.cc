// A continuation (the prompt followed by the first j generated tokens, with
// num_generated_in_prompt = j and j fewer tokens to generate) produces exactly the rest
// of the original output: what a request migrated to another instance relies on.
#include <random>
#include <vector>

#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "runtime/engine/cpu/testing/mini_host.h"
#include "runtime/engine/cpu/testing/test_engine.h"
#include "runtime/engine/cpu/testing/test_models.h"
#include "runtime/engine/model/make_model.h"

namespace lockstep::engine {
namespace {

using ::lockstep::engine::testing::HostRequest;
using ::lockstep::engine::testing::MakeTestEngine;
using ::lockstep::engine::testing::MiniHost;
using ::lockstep::engine::testing::PresetModelDir;
using ::lockstep::engine::testing::TestEngine;
using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;

constexpr int kMaxTokens = 10;

// Greedy and seeded sampling, with and without the penalties and min_tokens.
std::vector<HostRequest> Originals(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<HostRequest> requests;
  for (int i = 0; i < 4; ++i) {
    HostRequest request;
    request.id = 1 + i;
    request.prompt.push_back(kByteBosToken);
    const int length = 4 + static_cast<int>(rng() % 20);
    for (int t = 0; t < length; ++t) request.prompt.push_back(static_cast<int32_t>(rng() % 256));
    request.sampling.max_tokens = kMaxTokens;
    request.sampling.ignore_eos = true;
    if (i % 2 == 1) {
      request.sampling.temperature = 1.1f;
      request.sampling.top_p = 0.95f;
      request.sampling.seed = rng();
    }
    if (i >= 2) {
      request.sampling.presence_penalty = 0.8f;
      request.sampling.frequency_penalty = 0.6f;
      request.sampling.repetition_penalty = 1.3f;
      request.sampling.min_tokens = 6;
      request.sampling.stop_token_ids = {static_cast<int32_t>(rng() % 256)};
    }
    requests.push_back(std::move(request));
  }
  return requests;
}

std::vector<std::vector<int32_t>> RunAll(const std::vector<HostRequest>& requests) {
  TestEngine engine = MakeTestEngine({.model_dir = PresetModelDir("tiny")});
  MiniHost host(engine.engine.get(), engine.target.get(), nullptr, {.chunk_size = 7});
  for (const HostRequest& request : requests) host.Add(request);
  EXPECT_THAT(host.Run(), IsOk());
  std::vector<std::vector<int32_t>> outputs;
  for (const HostRequest& request : requests) outputs.push_back(host.output(request.id).tokens);
  return outputs;
}

TEST(ContinuationTest, AContinuationGeneratesTheRestOfTheOriginalOutput) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  const std::vector<HostRequest> originals = Originals(seed);
  const std::vector<std::vector<int32_t>> want = RunAll(originals);
  for (const std::vector<int32_t>& output : want) ASSERT_EQ(output.size(), size_t{kMaxTokens});
  // Without the offset the penalised requests would see their earlier output as prompt.
  bool offset_mattered = false;
  for (int j : {1, 3, 5, kMaxTokens - 1}) {
    std::vector<HostRequest> continuations;
    std::vector<HostRequest> naive;
    for (size_t r = 0; r < originals.size(); ++r) {
      HostRequest c = originals[r];
      c.prompt.insert(c.prompt.end(), want[r].begin(), want[r].begin() + j);
      c.sampling.max_tokens = kMaxTokens - j;
      naive.push_back(c);
      c.sampling.num_generated_in_prompt = j;
      ASSERT_THAT(c.sampling.Validate(300), IsOk());
      continuations.push_back(std::move(c));
    }
    const std::vector<std::vector<int32_t>> got = RunAll(continuations);
    const std::vector<std::vector<int32_t>> got_naive = RunAll(naive);
    for (size_t r = 0; r < originals.size(); ++r) {
      const std::vector<int32_t> rest(want[r].begin() + j, want[r].end());
      EXPECT_EQ(got[r], rest) << "request " << r << " continued after " << j << " tokens";
      offset_mattered |= got_naive[r] != rest;
    }
  }
  EXPECT_TRUE(offset_mattered) << "the penalised requests never depended on the offset";
}

}  // namespace
}  // namespace lockstep::engine
