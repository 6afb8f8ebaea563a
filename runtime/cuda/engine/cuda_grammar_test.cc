// GPU checks of constrained decoding on the CUDA engine (the tiny preset, its byte-level
// tokenizer): requests under a JSON Schema, sampled at temperature 1 (and some greedy),
// produce text an independent JSON parser (nlohmann) accepts, of the schema's shape
// (values in the schema's enum and range), ending with EOS; with n-gram speculation the tokens are the same. A grammar that
// reaches a dead end fails the request naming it. Skips without a GPU.
#include <string>
#include <vector>

#include "common/testing/seed.h"
#include "grammar/grammar_spec.h"
#include "gtest/gtest.h"
#include "kvcache/block_layout.h"
#include "nlohmann/json.hpp"
#include "runtime/cuda/engine/device_test_engine.h"
#include "runtime/cuda/gpu_test_env.h"
#include "runtime/engine/cpu/testing/mini_host.h"
#include "runtime/engine/cpu/testing/spec_runs.h"
#include "runtime/engine/cpu/testing/test_models.h"

namespace lockstep::cuda {
namespace {

using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;
namespace et = ::lockstep::engine::testing;

constexpr int32_t kBlocks = 512;
constexpr int kTokensPerBlock = 8;

constexpr char kSchema[] = R"({"type": "object", "properties": {
  "answer": {"enum": ["yes", "no"]}, "score": {"type": "integer", "minimum": 0, "maximum": 99}},
  "required": ["answer", "score"], "additionalProperties": false})";

struct Generated {
  absl::Status status;
  std::vector<std::vector<int32_t>> tokens;
  int32_t eos = -1;
};

Generated Generate(const std::vector<et::HostRequest>& requests, int k) {
  engine::DeviceEngineOptions o;
  o.name = "grammar";
  o.model_dir = et::PresetModelDir("tiny");
  if (k > 0) o.speculative = {.method = spec::Method::kNgram, .num_draft_tokens = k};
  o.dtype = engine::DeviceDtype::kF32;
  o.batch_invariant = true;
  o.graphs = true;
  o.tokens_per_block = kTokensPerBlock;
  o.max_batch_size = 8;
  o.max_num_tokens = 8 * 24;
  Generated run;
  testing::DeviceTestEngine device(kBlocks);
  run.status = device.Start(o);
  if (!run.status.ok()) return run;
  run.eos = device.engine()->info().eos_token_id;
  const kv::BlockLayout layout{1, 1, 1, kTokensPerBlock};  // block bookkeeping only
  et::HostPool pool(layout, kBlocks, 1);
  et::HostOptions h;
  h.chunk_size = 24;
  h.max_batch = 8;
  h.num_draft_tokens = k;
  h.spec_method = spec::Method::kNgram;
  h.overlap = false;  // an overlapped launch past EOS is refused by the grammar
  h.eos_token_id = run.eos;
  et::MiniHost host(device.engine(), &pool, nullptr, h);
  for (const et::HostRequest& r : requests) host.Add(r);
  run.status = host.Run();
  if (!run.status.ok()) return run;
  for (const et::HostRequest& r : requests) run.tokens.push_back(host.output(r.id).tokens);
  return run;
}

TEST(CudaGrammarTest, JsonSchemaOutputParsesWithAndWithoutSpeculation) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  // Room for the longest text the schema allows (json_rules.h: at most 16 whitespace
  // bytes in a row, about ten places for them), so every request ends by EOS.
  std::vector<et::HostRequest> requests =
      et::SpecPrompts(6, seed, 224, /*stochastic=*/true, /*repeating=*/true);
  for (size_t i = 0; i < requests.size(); ++i) {
    et::HostRequest& r = requests[i];
    r.sampling.ignore_eos = false;
    if (i % 4 == 3) r.sampling.temperature = 0.0f;  // greedy too
    r.sampling.grammar = grammar::GrammarSpec{grammar::GrammarSpec::Kind::kJsonSchema, kSchema};
  }
  const Generated plain = Generate(requests, 0);
  ASSERT_TRUE(plain.status.ok()) << plain.status;
  ASSERT_EQ(plain.tokens.size(), requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const std::vector<int32_t>& tokens = plain.tokens[i];
    ASSERT_FALSE(tokens.empty());
    EXPECT_EQ(tokens.back(), plain.eos) << "request " << i << " ends where the grammar does";
    std::string text;
    for (size_t j = 0; j + 1 < tokens.size(); ++j) {
      ASSERT_LT(tokens[j], 256) << "request " << i << ": a special token inside the text";
      text += static_cast<char>(tokens[j]);
    }
    const nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(value.is_discarded()) << "request " << i << ": '" << text << "' is no JSON";
    ASSERT_TRUE(value.is_object()) << text;
    EXPECT_EQ(value.size(), 2u) << text;
    ASSERT_TRUE(value.contains("answer") && value["answer"].is_string()) << text;
    EXPECT_TRUE(value["answer"] == "yes" || value["answer"] == "no") << text;
    ASSERT_TRUE(value.contains("score") && value["score"].is_number_integer()) << text;
    EXPECT_GE(value["score"].get<int>(), 0) << text;
    EXPECT_LE(value["score"].get<int>(), 99) << text;
  }
  const Generated speculative = Generate(requests, 3);
  ASSERT_TRUE(speculative.status.ok()) << speculative.status;
  EXPECT_EQ(speculative.tokens, plain.tokens);
}

TEST(CudaGrammarTest, DeadEndFailsTheRequestNamingIt) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  std::vector<et::HostRequest> requests = et::SpecPrompts(1, 7, 8, /*stochastic=*/false);
  requests[0].sampling.ignore_eos = true;  // past the grammar's end nothing may follow
  requests[0].sampling.grammar = grammar::GrammarSpec{grammar::GrammarSpec::Kind::kRegex, "ok"};
  const Generated run = Generate(requests, 0);
  EXPECT_EQ(run.status.code(), absl::StatusCode::kFailedPrecondition) << run.status;
  EXPECT_NE(run.status.message().find("dead end after 3 generated tokens"), std::string::npos)
      << run.status;
}

}  // namespace
}  // namespace lockstep::cuda
