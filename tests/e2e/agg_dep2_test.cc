// End to end, aggregated serving: the router and one aggregated DEP2 instance of the
// tiny-moe model as real processes on loopback. 200 requests over HTTP (completions,
// streaming and not, and chat) and gRPC (streaming), from several client threads; every
// greedy output equals what the in-process engine produces for the same model, prompt
// and seed.
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/launcher/local_deployment.h"
#include "runtime/router/http/chat_template.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/reference.h"
#include "tokenizer/byte_tokenizer.h"

namespace lockstep::e2e {
namespace {

using nlohmann::json;

std::string Yaml(const std::string& model_dir) {
  return absl::StrCat(R"(model:
  name: tiny-moe
  path: )",
                      model_dir, R"(
router:
  policy: round_robin
  heartbeat_interval_ms: 200
  heartbeat_timeout_ms: 2000
  health_check_interval_ms: 200
instances:
  - name: agg0
    role: aggregated
    world_size: 2
    engine: cpu
    executor: {max_batch_size: 8, max_num_tokens: 512, max_num_active_requests: 32,
               chunk_size: 64}
    kv: {tokens_per_block: 16, num_blocks: 512}
)",
                      CommSettings(kE2eComm));
}

enum class Kind { kHttp, kHttpStream, kChat, kGrpc };

struct Case {
  Kind kind;
  std::string text;  // the prompt text (chat: the user message)
  int max_tokens;
  uint64_t seed;
};

// Concatenated "text" of an SSE completion stream.
std::string StreamText(const std::string& body, bool* done) {
  std::string text;
  for (absl::string_view line : absl::StrSplit(body, '\n')) {
    if (!absl::ConsumePrefix(&line, "data: ")) continue;
    if (line == "[DONE]") {
      *done = true;
      continue;
    }
    const json chunk = json::parse(line, nullptr, false);
    if (chunk.is_object() && chunk.contains("choices")) {
      text += chunk["choices"][0].value("text", "");
    }
  }
  return text;
}

TEST(AggDep2Test, TwoHundredRequestsMatchTheInProcessEngine) {
  const std::string tmp = TestTmpDir();
  const std::string model = tmp + "/models/tiny-moe";
  ASSERT_TRUE(EnsureTinyMoe(model).ok());
  absl::StatusOr<tok::ByteTokenizer> tokenizer = tok::ByteTokenizer::LoadFromModelDir(model);
  ASSERT_TRUE(tokenizer.ok());

  std::mt19937_64 rng(2026);
  std::vector<Case> cases;
  for (int i = 0; i < 200; ++i) {
    std::string text;
    const int len = 8 + static_cast<int>(rng() % 56);
    for (int c = 0; c < len; ++c) text.push_back(static_cast<char>(' ' + rng() % 94));
    cases.push_back({static_cast<Kind>(i % 4), text, 4 + static_cast<int>(rng() % 20), rng()});
  }
  // The prompt tokens exactly as the router forms them.
  std::vector<ReferenceRequest> refs;
  for (const Case& c : cases) {
    std::string prompt = c.text;
    if (c.kind == Kind::kChat) {
      prompt = *router::RenderChatPrompt({{"user", c.text}});
    }
    ReferenceRequest r;
    r.prompt = tokenizer->Encode(prompt);
    r.sampling.max_tokens = c.max_tokens;
    r.sampling.seed = c.seed;
    refs.push_back(std::move(r));
  }
  absl::StatusOr<std::vector<std::vector<int32_t>>> expected =
      ReferenceGenerate(model, "", 0, refs);
  ASSERT_TRUE(expected.ok()) << expected.status();

  absl::StatusOr<std::unique_ptr<launcher::LocalDeployment>> d = launcher::LocalDeployment::Start(
      Yaml(model), tmp + "/run", LockstepBinary(), absl::Seconds(120));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(CheckTransport(**d, kE2eComm), "");

  absl::Mutex mu;
  std::vector<std::string> failures;
  auto fail = [&](size_t i, const std::string& what) {
    absl::MutexLock lock(&mu);
    failures.push_back(absl::StrCat("case ", i, ": ", what));
  };
  auto run = [&](size_t i) {
    const Case& c = cases[i];
    const std::string want_text = tokenizer->Decode((*expected)[i]);
    if (c.kind == Kind::kGrpc) {
      const launcher::GrpcResult r = (*d)->Generate(refs[i].prompt, c.max_tokens, c.seed);
      if (r.error_code != 0) return fail(i, absl::StrCat("grpc error ", r.error_message));
      if (r.tokens != (*expected)[i]) return fail(i, "grpc tokens differ");
      return;
    }
    json body = {
        {"model", "tiny-moe"}, {"max_tokens", c.max_tokens}, {"temperature", 0}, {"seed", c.seed}};
    std::string path = "/v1/completions";
    if (c.kind == Kind::kChat) {
      path = "/v1/chat/completions";
      body["messages"] = json::array({{{"role", "user"}, {"content", c.text}}});
    } else {
      body["prompt"] = c.text;
    }
    if (c.kind == Kind::kHttpStream) body["stream"] = true;
    const auto [status, text] = (*d)->Post(path, body.dump());
    if (status != 200) return fail(i, absl::StrCat("HTTP ", status, ": ", text));
    std::string got;
    if (c.kind == Kind::kHttpStream) {
      bool done = false;
      got = StreamText(text, &done);
      if (!done) return fail(i, "stream did not end with [DONE]");
    } else {
      const json r = json::parse(text, nullptr, false);
      if (!r.is_object()) return fail(i, "not JSON: " + text);
      got = c.kind == Kind::kChat ? r["choices"][0]["message"].value("content", "")
                                  : r["choices"][0].value("text", "");
      if (r["usage"].value("completion_tokens", -1) != static_cast<int>((*expected)[i].size())) {
        return fail(i, "usage.completion_tokens differs");
      }
    }
    if (got != want_text) return fail(i, "text differs");
  };
  std::vector<std::thread> clients;
  for (int t = 0; t < 8; ++t) {
    clients.emplace_back([&, t] {
      for (size_t i = t; i < cases.size(); i += 8) run(i);
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_TRUE(failures.empty()) << failures.size() << " failures, first: " << failures[0];
  EXPECT_TRUE((*d)->Reap().empty()) << "a process died";
}

}  // namespace
}  // namespace lockstep::e2e
