// Constrained decoding through the CPU engine (the tiny preset, its byte-level
// tokenizer): seeded sampling at temperature 1 under a grammar gives only output the
// grammar accepts, ending with EOS; with n-gram speculation the output is token for
// token the same (launches not overlapped: MiniHost fails on the refused step an
// overlapped launch makes past EOS, which the executor ignores); a grammar that reaches
// a dead end fails the request naming it.
#include <regex>
#include <string>
#include <vector>

#include "common/testing/seed.h"
#include "gtest/gtest.h"
#include "runtime/engine/cpu/testing/mini_host.h"
#include "runtime/engine/cpu/testing/spec_runs.h"
#include "runtime/engine/cpu/testing/test_engine.h"
#include "runtime/engine/cpu/testing/test_models.h"

namespace lockstep::engine {
namespace {

using ::lockstep::engine::testing::HostRequest;
using ::lockstep::engine::testing::MakeTestEngine;
using ::lockstep::engine::testing::MiniHost;
using ::lockstep::engine::testing::PresetModelDir;
using ::lockstep::engine::testing::SpecPrompts;
using ::lockstep::engine::testing::TestEngine;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;

constexpr char kRegex[] = "(yes|no|[0-9]{1,3}(,[0-9]{1,3}){0,4})";

struct Generated {
  absl::Status status;
  std::vector<std::vector<int32_t>> tokens;
  int32_t eos = -1;
  int64_t accepted = 0;
};

Generated Generate(const std::vector<HostRequest>& requests, int k, uint64_t seed) {
  const spec::Method method = k > 0 ? spec::Method::kNgram : spec::Method::kDraftModel;
  TestEngine engine = MakeTestEngine({.model_dir = PresetModelDir("tiny"),
                                      .num_draft_tokens = k,
                                      .spec_method = method,
                                      .num_blocks = 1024,
                                      .pool_seed = seed});
  Generated run;
  run.eos = engine.engine->info().eos_token_id;
  MiniHost host(engine.engine.get(), engine.target.get(), nullptr,
                {.chunk_size = 24,
                 .max_batch = 8,
                 .num_draft_tokens = k,
                 .spec_method = method,
                 .overlap = false,
                 .eos_token_id = run.eos});
  for (const HostRequest& request : requests) host.Add(request);
  run.status = host.Run();
  if (!run.status.ok()) return run;
  for (const HostRequest& request : requests) {
    run.tokens.push_back(host.output(request.id).tokens);
    run.accepted += host.output(request.id).accepted;
  }
  return run;
}

TEST(SamplerGrammarEngineTest, SampledOutputMatchesTheGrammarWithAndWithoutSpeculation) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::vector<HostRequest> requests =
      SpecPrompts(16, seed, 48, /*stochastic=*/true, /*repeating=*/true);
  for (size_t i = 0; i < requests.size(); ++i) {
    HostRequest& r = requests[i];
    r.sampling.ignore_eos = false;
    if (i % 4 == 3) r.sampling.temperature = 0.0f;  // greedy too
    r.sampling.grammar = grammar::GrammarSpec{grammar::GrammarSpec::Kind::kRegex, kRegex};
  }
  const Generated plain = Generate(requests, 0, seed);
  ASSERT_TRUE(plain.status.ok()) << plain.status;
  const std::regex pattern(kRegex);
  for (size_t i = 0; i < requests.size(); ++i) {
    const std::vector<int32_t>& tokens = plain.tokens[i];
    ASSERT_FALSE(tokens.empty());
    EXPECT_EQ(tokens.back(), plain.eos) << "request " << i << " ends where the grammar does";
    std::string text;
    for (size_t j = 0; j + 1 < tokens.size(); ++j) {
      ASSERT_LT(tokens[j], 256) << "request " << i << ": a special token inside the text";
      text += static_cast<char>(tokens[j]);
    }
    EXPECT_TRUE(std::regex_match(text, pattern)) << "request " << i << ": '" << text << "'";
  }
  const Generated speculative = Generate(requests, 3, seed + 1);
  ASSERT_TRUE(speculative.status.ok()) << speculative.status;
  EXPECT_EQ(speculative.tokens, plain.tokens);
}

TEST(SamplerGrammarEngineTest, DeadEndFailsTheRequestNamingIt) {
  std::vector<HostRequest> requests = SpecPrompts(1, 7, 8, /*stochastic=*/false);
  requests[0].sampling.ignore_eos = true;  // past the grammar's end nothing may follow
  requests[0].sampling.grammar = grammar::GrammarSpec{grammar::GrammarSpec::Kind::kRegex, "ok"};
  const Generated run = Generate(requests, 0, 3);
  EXPECT_EQ(run.status.code(), absl::StatusCode::kFailedPrecondition) << run.status;
  EXPECT_NE(run.status.message().find("dead end after 3 generated tokens"), std::string::npos)
      << run.status;
}

}  // namespace
}  // namespace lockstep::engine
