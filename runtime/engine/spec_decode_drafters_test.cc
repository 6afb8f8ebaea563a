// The equivalence property for every drafter and for dynamic K: through the CPU
// engine, greedy and seeded-sampling output with speculation equals output without,
// token for token, over 100 prompts — for the n-gram drafter (fixed K = 1..4 and
// dynamic K) and the draft model with dynamic K (fixed K: spec_decode_test.cc).
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/testing/seed.h"
#include "gtest/gtest.h"
#include "runtime/engine/file_io.h"
#include "runtime/engine/make_model.h"
#include "runtime/engine/model_engine.h"
#include "runtime/engine/testing/mini_host.h"
#include "runtime/engine/testing/test_engine.h"
#include "runtime/engine/testing/test_models.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::engine {
namespace {

using ::lockstep::engine::testing::HostRequest;
using ::lockstep::engine::testing::MakeTestEngine;
using ::lockstep::engine::testing::MiniHost;
using ::lockstep::engine::testing::PresetModelDir;
using ::lockstep::engine::testing::TestEngine;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;

// Half the prompts repeat a short span (what the n-gram drafter can copy), half are
// random bytes.
std::vector<HostRequest> Prompts(int n, uint64_t seed, int max_tokens, bool stochastic) {
  std::mt19937_64 rng(seed);
  std::vector<HostRequest> requests;
  for (int i = 0; i < n; ++i) {
    HostRequest request;
    request.id = i;
    request.prompt.push_back(kByteBosToken);
    const int length = 8 + static_cast<int>(rng() % 40);
    std::vector<int32_t> span(2 + rng() % 6);
    for (int32_t& t : span) t = static_cast<int32_t>(rng() % 256);
    for (int t = 1; t < length; ++t) {
      request.prompt.push_back(i % 2 == 0 ? span[t % span.size()]
                                          : static_cast<int32_t>(rng() % 256));
    }
    request.sampling.max_tokens = max_tokens;
    request.sampling.ignore_eos = true;
    if (stochastic) {
      request.sampling.temperature = 1.0f;
      request.sampling.top_k = 40;
      request.sampling.seed = rng();
    }
    requests.push_back(std::move(request));
  }
  return requests;
}

struct RunSetup {
  spec::Method method = spec::Method::kNone;
  int k = 0;
  bool dynamic = false;
  bool overlap = false;
};

struct RunOutput {
  std::vector<std::vector<int32_t>> tokens;
  int64_t proposed = 0;
  int64_t accepted = 0;
  int64_t steps = 0;
};

RunOutput Generate(const std::string& dir, const RunSetup& s, const std::vector<HostRequest>& requests,
                   uint64_t seed) {
  const bool draft_model = s.method == spec::Method::kDraftModel && s.k > 0;
  TestEngine engine = MakeTestEngine({.model_dir = dir,
                                      .draft_dir = draft_model ? JoinPath(dir, "draft") : "",
                                      .num_draft_tokens = s.k,
                                      .spec_method = s.method,
                                      .num_blocks = 2048,
                                      .pool_seed = seed});
  MiniHost host(engine.engine.get(), engine.target.get(), engine.draft.get(),
                {.chunk_size = 24,
                 .max_batch = 16,
                 .num_draft_tokens = s.k,
                 .spec_method = s.method == spec::Method::kNone ? spec::Method::kDraftModel
                                                                : s.method,
                 .dynamic = s.dynamic,
                 .overlap = s.overlap});
  for (const HostRequest& request : requests) host.Add(request);
  LOCKSTEP_CHECK_OK(host.Run());
  EXPECT_TRUE(host.pools_clean()) << "the engine wrote outside its grant or into a free block ("
                                  << spec::MethodName(s.method) << " K=" << s.k << ")";
  RunOutput out;
  for (const HostRequest& request : requests) {
    const testing::HostOutput& o = host.output(request.id);
    out.tokens.push_back(o.tokens);
    out.proposed += o.proposed;
    out.accepted += o.accepted;
    out.steps += o.steps;
  }
  return out;
}

void ExpectSameTokens(const RunOutput& spec, const RunOutput& plain, const RunSetup& s) {
  ASSERT_EQ(spec.tokens.size(), plain.tokens.size());
  for (size_t r = 0; r < plain.tokens.size(); ++r) {
    ASSERT_EQ(spec.tokens[r], plain.tokens[r])
        << spec::MethodName(s.method) << " K=" << s.k << (s.dynamic ? " dynamic" : "")
        << " request " << r;
  }
  std::printf("%s K=%d%s: %lld of %lld drafts accepted, %lld steps\n", spec::MethodName(s.method),
              s.k, s.dynamic ? " dynamic" : "", static_cast<long long>(spec.accepted),
              static_cast<long long>(spec.proposed), static_cast<long long>(spec.steps));
}

TEST(SpecDecodeDraftersTest, GreedyNgramAndDynamicKEqualNoSpeculation) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  const std::string dir = PresetModelDir("tiny");
  const std::vector<HostRequest> requests = Prompts(100, seed, 24, false);
  const RunOutput plain = Generate(dir, {}, requests, seed);
  for (int k = 1; k <= 4; ++k) {
    const RunSetup s{spec::Method::kNgram, k, false, k % 2 == 0};
    const RunOutput ngram = Generate(dir, s, requests, seed + k);
    ExpectSameTokens(ngram, plain, s);
    EXPECT_GT(ngram.accepted, 0) << "repeating prompts give the n-gram drafter matches";
    EXPECT_LT(ngram.steps, plain.steps) << "accepted drafts save steps";
  }
  for (const RunSetup& s : {RunSetup{spec::Method::kNgram, 4, true, true},
                         RunSetup{spec::Method::kDraftModel, 4, true, false}}) {
    const RunOutput dynamic = Generate(dir, s, requests, seed + 11);
    ExpectSameTokens(dynamic, plain, s);
    EXPECT_GT(dynamic.accepted, 0);
  }
}

TEST(SpecDecodeDraftersTest, SeededSamplingNgramAndDynamicKEqualNoSpeculation) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  const std::string dir = PresetModelDir("tiny");
  const std::vector<HostRequest> requests = Prompts(100, seed + 1, 16, true);
  const RunOutput plain = Generate(dir, {}, requests, seed);
  for (const RunSetup& s : {RunSetup{spec::Method::kNgram, 3, false, true},
                         RunSetup{spec::Method::kNgram, 4, true, false},
                         RunSetup{spec::Method::kDraftModel, 3, true, true}}) {
    ExpectSameTokens(Generate(dir, s, requests, seed + 5), plain, s);
  }
}

}  // namespace
}  // namespace lockstep::engine
