// What one request body may carry, over the router's real HTTP and gRPC listeners
// (docs/security.md §5 and §6): JSON nested ~100,000 levels deep (a 200 KB body) is a
// 400 on every endpoint that parses JSON while a stream in flight goes on (it used to
// overflow the router's stack and end every stream); a body of too many JSON values is
// a 400; oversized stop_token_ids / logit_bias are a 400 naming the field (they made the
// worker request exceed gRPC's 4 MiB, which the router took for a broken stream); a
// prompt of max_prompt_tokens ids is served over both APIs whatever its encoded size;
// /tokenize and /detokenize answer as /v1/tokenize and /v1/detokenize do.
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/router.grpc.pb.h"
#include "runtime/router/core/request_validation.h"
#include "runtime/router/router_daemon.h"
#include "runtime/router/testing/fake_worker.h"
#include "runtime/router/testing/router_harness.h"

namespace lockstep::router {
namespace {

using ::lockstep::testing::IsOk;
using ::testing::HasSubstr;

std::string Nested(int depth, bool objects = false) {
  std::string text;
  for (int i = 0; i < depth; ++i) text += objects ? R"({"a":)" : "[";
  text += "1";
  for (int i = 0; i < depth; ++i) text += objects ? "}" : "]";
  return text;
}

std::string Completion(const std::string& prompt, int max_tokens, const std::string& extra = "") {
  return absl::StrCat(R"({"model":")", testing::kModel, R"(","prompt":)", prompt,
                      R"(,"max_tokens":)", max_tokens, extra, "}");
}

class BodyLimitsTest : public ::testing::Test {
 protected:
  void Start(int64_t max_prompt_tokens = 2048) {
    config::DeploymentConfig config =
        testing::TestConfig({{"agg0", config::InstanceRole::kAggregated}});
    config.router.max_prompt_tokens = max_prompt_tokens;
    absl::StatusOr<std::unique_ptr<RouterDaemon>> router = testing::StartRouter(config);
    ASSERT_THAT(router, IsOk());
    router_ = *std::move(router);
    // Started as testing::StartWorker does, with the receive limit of a worker of this
    // deployment.
    absl::StatusOr<std::unique_ptr<testing::FakeWorker>> worker =
        testing::FakeWorker::Start({.name = "agg0",
                                    .role = v1::INSTANCE_ROLE_AGGREGATED,
                                    .model = testing::kModel,
                                    .max_prompt_tokens = max_prompt_tokens});
    ASSERT_THAT(worker, IsOk());
    worker_ = *std::move(worker);
    ASSERT_THAT(worker_->Register(router_->grpc_address()), IsOk());
    ASSERT_THAT(worker_->Heartbeat(router_->grpc_address()), IsOk());
    worker_->StartHeartbeats(router_->grpc_address(), absl::Milliseconds(50));
  }

  testing::HttpClient Client() {
    return testing::HttpClient(router_->http_address(), absl::Seconds(60));
  }

  std::unique_ptr<RouterDaemon> router_;
  std::unique_ptr<testing::FakeWorker> worker_;
};

TEST_F(BodyLimitsTest, DeepBodiesAre400WhileAStreamInFlightGoesOn) {
  Start();
  // A stream held at its worker before its first token, across all of it.
  worker_->SetHold(true);
  testing::HttpResult stream;
  std::thread streaming([&] {
    stream =
        Client().PostStream("/v1/completions", Completion("\"in flight\"", 4, R"(,"stream":true)"));
  });
  ASSERT_TRUE(worker_->AwaitHeld(1, absl::Seconds(30)));

  const std::string arrays = Nested(100000);
  const std::string objects = Nested(100000, /*objects=*/true);
  const std::string model = absl::StrCat(R"({"model":")", testing::kModel, "\"");
  for (const auto& [path, body] : std::vector<std::pair<std::string, std::string>>{
           // The issue's three examples.
           {"/v1/chat/completions",
            model + R"(,"messages":[{"role":"user","content":)" + arrays + "}]}"},
           {"/v1/completions", model + R"(,"prompt":[)" + objects + "]}"},
           {"/tokenize", R"({"model":)" + arrays + "}"},
           {"/v1/tokenize", R"({"model":)" + arrays + "}"},
           {"/detokenize", model + R"(,"tokens":)" + arrays + "}"},
           {"/v1/completions", Completion("\"x\"", 2, R"(,"logit_bias":{"1":)" + arrays + "}")},
           {"/v1/chat/completions", model + R"(,"messages":[{"role":"user","content":"x"}],)" +
                                        R"("tool_choice":)" + objects + "}"},
       }) {
    SCOPED_TRACE(path + " " + body.substr(0, 60));
    const testing::HttpResult result = Client().Post(path, body);
    EXPECT_EQ(result.status, 400) << result.body.substr(0, 300);
    EXPECT_THAT(result.json["error"]["message"].dump(), HasSubstr("nested deeper than 64 levels"));
  }
  // The stream goes on and completes; no deep body reached the worker.
  worker_->SetHold(false);
  streaming.join();
  EXPECT_EQ(stream.status, 200);
  EXPECT_EQ(testing::SseText(stream.body), testing::FakeWorker::ExpectedText("in flight", 4));
  EXPECT_EQ(worker_->requests().size(), 1u);
  const testing::HttpResult after = Client().Post("/v1/completions", Completion("\"ok\"", 3));
  EXPECT_EQ(after.status, 200) << after.body;
  EXPECT_EQ(after.json["choices"][0]["text"], testing::FakeWorker::ExpectedText("ok", 3));
}

// A 14 MiB body of small numbers (within the 16 MiB body limit) would expand to
// hundreds of MiB of JSON values.
TEST_F(BodyLimitsTest, TooManyJsonValuesAre400) {
  Start();
  std::string zeros = "[";
  for (int i = 0; i < (7 << 20); ++i) zeros += "0,";
  zeros += "0]";
  const testing::HttpResult result =
      Client().Post("/v1/completions", Completion("\"x\"", 2, R"(,"user":)" + zeros));
  EXPECT_EQ(result.status, 400) << result.body.substr(0, 300);
  EXPECT_THAT(result.json["error"]["message"].dump(), HasSubstr("JSON with more than"));
  EXPECT_TRUE(worker_->requests().empty());
}

std::string Ids(size_t n, int id) {
  std::string out = "[";
  for (size_t i = 0; i < n; ++i) absl::StrAppend(&out, i == 0 ? "" : ",", id);
  return out + "]";
}

TEST_F(BodyLimitsTest, OversizedSamplingListsAre400NamingTheField) {
  Start();
  testing::HttpResult result =
      Client().Post("/v1/completions",
                    Completion("\"x\"", 2, ",\"stop_token_ids\":" + Ids(kMaxStopTokenIds + 1, 7)));
  EXPECT_EQ(result.status, 400) << result.body;
  EXPECT_EQ(result.json["error"]["param"], "stop_token_ids");
  // Ids repeat past the vocabulary's 300; a JSON object keeps one value per key, so
  // each repeat is spelt with leading zeros.
  std::string bias = "{";
  for (size_t i = 0; i <= kMaxLogitBias; ++i) {
    absl::StrAppend(&bias, i == 0 ? "" : ",", "\"", std::string(i / 300, '0'), i % 300, "\":1");
  }
  bias += "}";
  result = Client().Post("/v1/completions", Completion("\"x\"", 2, ",\"logit_bias\":" + bias));
  EXPECT_EQ(result.status, 400) << result.body;
  EXPECT_EQ(result.json["error"]["param"], "logit_bias");
  EXPECT_TRUE(worker_->requests().empty());
  // At the bounds: served.
  result = Client().Post("/v1/completions",
                         Completion("\"x\"", 2, ",\"stop_token_ids\":" + Ids(kMaxStopTokenIds, 7)));
  EXPECT_EQ(result.status, 200) << result.body;
}

// 2,200,000 ids of 299 (two bytes each on the wire) make a worker request and a
// RouterService.Generate request of 4.4 MB, over gRPC's default 4 MiB: within
// max_prompt_tokens, both are served.
TEST_F(BodyLimitsTest, APromptOfMaxPromptTokensIdsIsServedOverHttpAndGrpc) {
  constexpr int kTokens = 2200000;
  Start(/*max_prompt_tokens=*/kTokens);
  const testing::HttpResult result =
      Client().Post("/v1/completions", Completion(Ids(kTokens, 299), 2));
  EXPECT_EQ(result.status, 200) << result.body.substr(0, 300);

  auto stub = v1::RouterService::NewStub(
      grpc::CreateChannel(router_->grpc_address(), grpc::InsecureChannelCredentials()));
  v1::RouterGenerateRequest request;
  request.set_model(testing::kModel);
  for (int i = 0; i < kTokens; ++i) request.mutable_tokens()->add_ids(299);
  request.mutable_sampling()->set_max_tokens(2);
  ASSERT_GT(request.ByteSizeLong(), size_t{4} << 20);
  grpc::ClientContext call;
  call.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto reader = stub->Generate(&call, request);
  v1::RouterGenerateResponse response;
  int tokens = 0;
  while (reader->Read(&response)) tokens += response.token_ids_size();
  const grpc::Status status = reader->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(tokens, 2);
  ASSERT_EQ(worker_->requests().size(), 2u);
  EXPECT_EQ(worker_->requests()[1].prompt_token_ids_size(), kTokens);
}

// The paths vLLM's clients call answer as the /v1/ ones; other methods get 405.
TEST_F(BodyLimitsTest, TokenizeAndDetokenizeAnswerWithoutV1) {
  Start();
  const std::string tokenize =
      absl::StrCat(R"({"model":")", testing::kModel, R"(","prompt":"hi"})");
  const testing::HttpResult v1 = Client().Post("/v1/tokenize", tokenize);
  const testing::HttpResult plain = Client().Post("/tokenize", tokenize);
  EXPECT_EQ(plain.status, 200) << plain.body;
  EXPECT_EQ(plain.body, v1.body);
  const std::string detokenize =
      absl::StrCat(R"({"model":")", testing::kModel, R"(","tokens":[104,105]})");
  const testing::HttpResult v1_text = Client().Post("/v1/detokenize", detokenize);
  const testing::HttpResult plain_text = Client().Post("/detokenize", detokenize);
  EXPECT_EQ(plain_text.status, 200) << plain_text.body;
  EXPECT_EQ(plain_text.json["prompt"], "hi");
  EXPECT_EQ(plain_text.body, v1_text.body);
  EXPECT_EQ(Client().Get("/tokenize").status, 405);
  EXPECT_EQ(Client().Get("/detokenize").status, 405);
}

}  // namespace
}  // namespace lockstep::router
