// The equivalence property for every drafter and for dynamic K: through the CPU
// engine, greedy and seeded-sampling output with speculation equals output without,
// token for token, over 100 prompts — for the n-gram drafter (fixed K = 1..4 and
// dynamic K) and the draft model with dynamic K (fixed K: spec_decode_test.cc).
#include <cstdio>
#include <string>
#include <vector>

#include "common/testing/seed.h"
#include "gtest/gtest.h"
#include "runtime/engine/cpu/testing/mini_host.h"
#include "runtime/engine/cpu/testing/spec_runs.h"
#include "runtime/engine/cpu/testing/test_models.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::engine {
namespace {

using ::lockstep::engine::testing::HostRequest;
using ::lockstep::engine::testing::PresetModelDir;
using ::lockstep::engine::testing::RunSpec;
using ::lockstep::engine::testing::SpecPrompts;
using ::lockstep::engine::testing::SpecRun;
using ::lockstep::engine::testing::SpecRunOutput;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;

void ExpectSameTokens(const SpecRunOutput& spec, const SpecRunOutput& plain, const SpecRun& s) {
  ASSERT_EQ(spec.tokens.size(), plain.tokens.size());
  for (size_t r = 0; r < plain.tokens.size(); ++r) {
    ASSERT_EQ(spec.tokens[r], plain.tokens[r]) << s.ToString() << " request " << r;
  }
  std::printf("%s: %lld of %lld drafts accepted, %lld steps\n", s.ToString().c_str(),
              static_cast<long long>(spec.accepted), static_cast<long long>(spec.proposed),
              static_cast<long long>(spec.steps));
}

TEST(SpecDecodeDraftersTest, GreedyNgramAndDynamicKEqualNoSpeculation) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  const std::string dir = PresetModelDir("tiny");
  const std::vector<HostRequest> requests = SpecPrompts(100, seed, 24, false, /*repeating=*/true);
  const SpecRunOutput plain = RunSpec(dir, {}, requests, seed);
  for (int k = 1; k <= 4; ++k) {
    const SpecRun s{spec::Method::kNgram, k, false, k % 2 == 0};
    const SpecRunOutput ngram = RunSpec(dir, s, requests, seed + k);
    ExpectSameTokens(ngram, plain, s);
    EXPECT_GT(ngram.accepted, 0) << "repeating prompts give the n-gram drafter matches";
    EXPECT_LT(ngram.steps, plain.steps) << "accepted drafts save steps";
  }
  for (const SpecRun& s : {SpecRun{spec::Method::kNgram, 4, true, true},
                           SpecRun{spec::Method::kDraftModel, 4, true, false}}) {
    const SpecRunOutput dynamic = RunSpec(dir, s, requests, seed + 11);
    ExpectSameTokens(dynamic, plain, s);
    EXPECT_GT(dynamic.accepted, 0);
  }
}

TEST(SpecDecodeDraftersTest, SeededSamplingNgramAndDynamicKEqualNoSpeculation) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  const std::string dir = PresetModelDir("tiny");
  const std::vector<HostRequest> requests =
      SpecPrompts(100, seed + 1, 16, true, /*repeating=*/true);
  const SpecRunOutput plain = RunSpec(dir, {}, requests, seed);
  for (const SpecRun& s : {SpecRun{spec::Method::kNgram, 3, false, true},
                           SpecRun{spec::Method::kNgram, 4, true, false},
                           SpecRun{spec::Method::kDraftModel, 3, true, true}}) {
    const SpecRunOutput sampled = RunSpec(dir, s, requests, seed + 5);
    ExpectSameTokens(sampled, plain, s);
    // Not vacuous: sampled drafts were accepted (the request's own draw agreed with
    // them), so the sampling side of the acceptance rule ran, not only rejections.
    EXPECT_GT(sampled.accepted, 0) << s.ToString();
  }
}

}  // namespace
}  // namespace lockstep::engine
