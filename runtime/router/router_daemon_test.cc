// The router end to end over real HTTP and gRPC against fake workers (real gRPC
// servers in this process): the OpenAI API, both policies, the two-leg flow, bad
// inputs, the API key, metrics, and RouterService.
#include "runtime/router/router_daemon.h"

#include <map>
#include <thread>

#include "common/host_port.h"
#include "common/testing/poll_until.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/router.grpc.pb.h"
#include "runtime/comm/rendezvous_client.h"
#include "runtime/config/role_wire.h"
#include "runtime/router/testing/prometheus_text.h"
#include "runtime/router/testing/router_harness.h"

namespace lockstep::router {
namespace {

using config::InstanceRole;
using ::lockstep::testing::IsOk;
using ::lockstep::testing::PollUntil;
using nlohmann::json;
using ::testing::ElementsAre;
using testing::FakeWorker;
using ::testing::HasSubstr;
using testing::HttpClient;
using testing::HttpResult;

std::string CompletionBody(const std::string& prompt, int max_tokens, bool stream = false) {
  return json{{"model", testing::kModel},
              {"prompt", prompt},
              {"max_tokens", max_tokens},
              {"temperature", 0},
              {"stream", stream}}
      .dump();
}

class RouterDaemonTest : public ::testing::Test {
 protected:
  void StartAggregated(int workers, config::RoutingPolicy policy, const std::string& api_key = "") {
    std::vector<std::pair<std::string, InstanceRole>> instances;
    for (int i = 0; i < workers; ++i) {
      instances.push_back({"agg" + std::to_string(i), InstanceRole::kAggregated});
    }
    config::DeploymentConfig config = testing::TestConfig(instances, policy);
    config.router.api_key = api_key;
    StartWith(config);
    for (const auto& [name, role] : instances) AddWorker(name, config::RoleToWire(role));
  }
  void StartWith(const config::DeploymentConfig& config) {
    absl::StatusOr<std::unique_ptr<RouterDaemon>> router = testing::StartRouter(config);
    ASSERT_THAT(router, IsOk());
    router_ = *std::move(router);
    http_ = std::make_unique<HttpClient>(router_->http_address());
  }
  FakeWorker& AddWorker(const std::string& name, v1::InstanceRole role) {
    absl::StatusOr<std::unique_ptr<FakeWorker>> worker = testing::StartWorker(*router_, name, role);
    EXPECT_THAT(worker, IsOk());
    workers_[name] = *std::move(worker);
    return *workers_[name];
  }

  std::unique_ptr<RouterDaemon> router_;
  std::unique_ptr<HttpClient> http_;
  std::map<std::string, std::unique_ptr<FakeWorker>> workers_;
};

TEST_F(RouterDaemonTest, CompletionsRoundRobinOverInstances) {
  StartAggregated(2, config::RoutingPolicy::kRoundRobin);
  for (int i = 0; i < 4; ++i) {
    const std::string prompt = "prompt " + std::to_string(i);
    HttpResult result = http_->Post("/v1/completions", CompletionBody(prompt, 5));
    ASSERT_EQ(result.status, 200) << result.body;
    EXPECT_EQ(result.json["object"], "text_completion");
    EXPECT_EQ(result.json["model"], testing::kModel);
    EXPECT_EQ(result.json["choices"][0]["text"], FakeWorker::ExpectedText(prompt, 5));
    EXPECT_EQ(result.json["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(result.json["usage"]["prompt_tokens"], prompt.size());
    EXPECT_EQ(result.json["usage"]["completion_tokens"], 5);
  }
  EXPECT_EQ(workers_["agg0"]->requests().size(), 2u);
  EXPECT_EQ(workers_["agg1"]->requests().size(), 2u);
  const v1::GenerateRequest sent = workers_["agg0"]->requests()[0];
  EXPECT_EQ(sent.type(), v1::REQUEST_TYPE_AGGREGATED);
  EXPECT_EQ(sent.model(), testing::kModel);
  EXPECT_EQ(sent.sampling().max_tokens(), 5);
  EXPECT_NE(sent.request_id(), workers_["agg0"]->requests()[1].request_id());
}

TEST_F(RouterDaemonTest, StreamingCompletionAndChat) {
  StartAggregated(1, config::RoutingPolicy::kRoundRobin);
  workers_["agg0"]->SetCachedPromptTokens(4);
  json body = json::parse(CompletionBody("stream me", 6, /*stream=*/true));
  body["stream_options"] = {{"include_usage", true}};
  HttpResult result = http_->PostStream("/v1/completions", body.dump());
  ASSERT_EQ(result.status, 200);
  const std::vector<std::string> events = testing::SseData(result.body);
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_EQ(testing::SseText(result.body), FakeWorker::ExpectedText("stream me", 6));
  EXPECT_EQ(json::parse(events[events.size() - 3])["choices"][0]["finish_reason"], "length");
  const json usage = json::parse(events[events.size() - 2])["usage"];
  EXPECT_EQ(usage["completion_tokens"], 6);
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], 4);

  const json chat = {{"model", testing::kModel},
                     {"messages", {{{"role", "user"}, {"content", "hello"}}}},
                     {"max_tokens", 4},
                     {"stream", true}};
  result = http_->PostStream("/v1/chat/completions", chat.dump());
  ASSERT_EQ(result.status, 200);
  const std::string templated = "<|user|>\nhello\n<|assistant|>\n";
  EXPECT_EQ(testing::SseText(result.body), FakeWorker::ExpectedText(templated, 4));
  EXPECT_EQ(json::parse(testing::SseData(result.body)[0])["object"], "chat.completion.chunk");
  // The worker saw the template's bytes.
  const v1::GenerateRequest sent = workers_["agg0"]->requests().back();
  EXPECT_EQ(std::string(sent.prompt_token_ids().begin(), sent.prompt_token_ids().end()), templated);

  json whole = chat;
  whole["stream"] = false;
  result = http_->Post("/v1/chat/completions", whole.dump());
  ASSERT_EQ(result.status, 200) << result.body;
  EXPECT_EQ(result.json["choices"][0]["message"]["content"],
            FakeWorker::ExpectedText(templated, 4));
}

TEST_F(RouterDaemonTest, StopTokenEndsWithStop) {
  StartAggregated(1, config::RoutingPolicy::kRoundRobin);
  const std::vector<int32_t> prompt = {'a', 'b'};
  json body = json::parse(CompletionBody("ab", 10));
  body["stop_token_ids"] = {FakeWorker::TokenAt(prompt, 2)};
  HttpResult result = http_->Post("/v1/completions", body.dump());
  ASSERT_EQ(result.status, 200) << result.body;
  EXPECT_EQ(result.json["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(result.json["choices"][0]["text"], FakeWorker::ExpectedText("ab", 3));
}

TEST_F(RouterDaemonTest, LeastLoadSendsTheNextRequestToTheIdleInstance) {
  StartAggregated(2, config::RoutingPolicy::kLeastLoad);
  for (auto& [name, worker] : workers_) worker->SetStallAfter(0);
  const std::string address = router_->http_address();
  std::thread first([&] { HttpClient(address).Post("/v1/completions", CompletionBody("x", 3)); });
  ASSERT_TRUE(PollUntil([&] {
    return workers_["agg0"]->AwaitStalled(1, absl::ZeroDuration()) ||
           workers_["agg1"]->AwaitStalled(1, absl::ZeroDuration());
  }));
  std::thread second([&] { HttpClient(address).Post("/v1/completions", CompletionBody("y", 3)); });
  EXPECT_TRUE(workers_["agg0"]->AwaitStalled(1, absl::Seconds(10)));
  EXPECT_TRUE(workers_["agg1"]->AwaitStalled(1, absl::Seconds(10)));
  for (auto& [name, worker] : workers_) worker->Shutdown();  // ends both requests
  first.join();
  second.join();
}

class DisaggregatedTest : public RouterDaemonTest {
 protected:
  void StartDisaggregated(int pairs, config::RoutingPolicy policy) {
    std::vector<std::pair<std::string, InstanceRole>> instances;
    for (int i = 0; i < pairs; ++i) {
      instances.push_back({"ctx" + std::to_string(i), InstanceRole::kContext});
      instances.push_back({"gen" + std::to_string(i), InstanceRole::kGeneration});
    }
    StartWith(testing::TestConfig(instances, policy));
    for (const auto& [name, role] : instances) {
      AddWorker(name, config::RoleToWire(role));
    }
  }
};

TEST_F(DisaggregatedTest, TwoLegFlowCarriesTheContextHandle) {
  StartDisaggregated(1, config::RoutingPolicy::kRoundRobin);
  HttpResult result = http_->Post("/v1/completions", CompletionBody("two legs", 7));
  ASSERT_EQ(result.status, 200) << result.body;
  EXPECT_EQ(result.json["choices"][0]["text"], FakeWorker::ExpectedText("two legs", 7));
  EXPECT_EQ(result.json["usage"]["completion_tokens"], 7);

  ASSERT_EQ(workers_["ctx0"]->requests().size(), 1u);
  ASSERT_EQ(workers_["gen0"]->requests().size(), 1u);
  const v1::GenerateRequest ctx = workers_["ctx0"]->requests()[0];
  const v1::GenerateRequest gen = workers_["gen0"]->requests()[0];
  EXPECT_EQ(ctx.type(), v1::REQUEST_TYPE_CONTEXT_ONLY);
  EXPECT_EQ(gen.type(), v1::REQUEST_TYPE_GENERATION_ONLY);
  EXPECT_EQ(gen.request_id(), ctx.request_id());
  EXPECT_EQ(gen.context().handle().instance(), "ctx0");
  EXPECT_EQ(gen.context().handle().transfer_address(), workers_["ctx0"]->address());
  EXPECT_EQ(gen.context().handle().context_request_id(), ctx.request_id());
  EXPECT_EQ(gen.context().draft_token_ids_size(), 3);
  EXPECT_EQ(gen.prompt_token_ids_size(), 8);             // the prompt goes to both legs
  EXPECT_TRUE(workers_["ctx0"]->cancel_rpcs().empty());  // a completed flow keeps no claim

  // One token: the context leg finishes the request, no generation leg.
  result = http_->Post("/v1/completions", CompletionBody("one", 1));
  ASSERT_EQ(result.status, 200) << result.body;
  EXPECT_EQ(result.json["choices"][0]["text"], FakeWorker::ExpectedText("one", 1));
  EXPECT_EQ(workers_["gen0"]->requests().size(), 1u);
}

// usage.prompt_tokens_details.cached_tokens: what the instance that prefilled reported
// (at most the prompt), never the generation leg's.
TEST_F(DisaggregatedTest, CachedPromptTokensComeFromThePrefillingLeg) {
  StartDisaggregated(1, config::RoutingPolicy::kRoundRobin);
  workers_["ctx0"]->SetCachedPromptTokens(3);
  workers_["gen0"]->SetCachedPromptTokens(6);
  HttpResult result = http_->Post("/v1/completions", CompletionBody("two legs", 4));
  ASSERT_EQ(result.status, 200) << result.body;
  EXPECT_EQ(result.json["usage"]["prompt_tokens"], 8);
  EXPECT_EQ(result.json["usage"]["prompt_tokens_details"]["cached_tokens"], 3);

  // A count outside [0, prompt] is bounded by it.
  workers_["ctx0"]->SetCachedPromptTokens(100);
  result = http_->Post("/v1/completions", CompletionBody("two legs", 4));
  ASSERT_EQ(result.status, 200) << result.body;
  EXPECT_EQ(result.json["usage"]["prompt_tokens_details"]["cached_tokens"], 8);
  workers_["ctx0"]->SetCachedPromptTokens(-5);
  result = http_->Post("/v1/completions", CompletionBody("two legs", 4));
  ASSERT_EQ(result.status, 200) << result.body;
  EXPECT_EQ(result.json["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
}

TEST_F(DisaggregatedTest, ContextAndGenerationInstancesArePickedIndependently) {
  StartDisaggregated(2, config::RoutingPolicy::kRoundRobin);
  for (int i = 0; i < 4; ++i) {
    HttpResult result = http_->Post("/v1/completions", CompletionBody("p" + std::to_string(i), 3));
    ASSERT_EQ(result.status, 200) << result.body;
  }
  for (const char* name : {"ctx0", "ctx1", "gen0", "gen1"}) {
    EXPECT_EQ(workers_[name]->requests().size(), 2u) << name;
  }
}

TEST_F(DisaggregatedTest, FirstTokenStreamsBeforeTheGenerationLegProduces) {
  StartDisaggregated(1, config::RoutingPolicy::kLeastLoad);
  workers_["gen0"]->SetStallAfter(0);
  const std::string first(1, static_cast<char>(FakeWorker::TokenAt({'a', 'b', 'c'}, 0)));
  absl::Mutex mu;
  std::string seen;
  HttpResult result;
  std::thread client([&] {
    result = HttpClient(router_->http_address())
                 .PostStream("/v1/completions", CompletionBody("abc", 5, /*stream=*/true),
                             [&](const std::string& data) {
                               absl::MutexLock lock(&mu);
                               seen = data;
                               return true;
                             });
  });
  ASSERT_TRUE(workers_["gen0"]->AwaitStalled(1, absl::Seconds(10)));
  EXPECT_TRUE(PollUntil([&] {
    absl::MutexLock lock(&mu);
    return testing::SseText(seen) == first;
  }));
  workers_["gen0"]->Shutdown();  // the generation leg fails: the client gets an error
  client.join();
  const std::vector<std::string> events = testing::SseData(result.body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_THAT(events[events.size() - 2], HasSubstr("gen0"));
  EXPECT_EQ(events.back(), "[DONE]");
  // The context instance is told to release its KV claim.
  const uint64_t id = workers_["ctx0"]->requests()[0].request_id();
  EXPECT_TRUE(workers_["ctx0"]->AwaitCancelRpc(id, absl::Seconds(10)));
}

struct BadRequest {
  std::string label;
  std::string path;
  std::string body;
  int status;
  std::string param;
  std::string message;
};

TEST_F(RouterDaemonTest, BadInputsGetOpenAiErrorsAndTheRouterKeepsServing) {
  StartAggregated(1, config::RoutingPolicy::kRoundRobin);
  const std::string long_prompt(65, 'x');
  const std::vector<BadRequest> cases = {
      {"malformed", "/v1/completions", "{\"model\": ", 400, "", "not valid JSON"},
      {"not_object", "/v1/completions", "42", 400, "", "JSON object"},
      {"unknown_model", "/v1/completions", R"({"model": "gpt-9", "prompt": "x"})", 404, "model",
       "does not exist"},
      {"max_tokens_zero", "/v1/completions", R"({"model": "tiny", "prompt": "x", "max_tokens": 0})",
       400, "max_tokens", "max_tokens must be >= 1"},
      {"max_tokens_type", "/v1/completions",
       R"({"model": "tiny", "prompt": "x", "max_tokens": "ten"})", 400, "max_tokens",
       "must be an integer"},
      {"too_long", "/v1/completions", json{{"model", "tiny"}, {"prompt", long_prompt}}.dump(), 400,
       "prompt", "The prompt has 65 tokens; the maximum is 64"},
      {"temperature", "/v1/completions", R"({"model": "tiny", "prompt": "x", "temperature": 7})",
       400, "temperature", "temperature must be in [0, 2]"},
      {"top_p", "/v1/completions", R"({"model": "tiny", "prompt": "x", "top_p": 0})", 400, "top_p",
       "top_p must be in (0, 1]"},
      {"token_range", "/v1/completions", R"({"model": "tiny", "prompt": [1, 5000]})", 400, "prompt",
       "outside the vocabulary"},
      {"n", "/v1/completions", R"({"model": "tiny", "prompt": "x", "n": 300})", 400, "n",
       "n must be in [1, 128]"},
      {"chat_messages", "/v1/chat/completions", R"({"model": "tiny", "messages": [{"role": 1}]})",
       400, "messages", "string role"},
      {"chat_empty", "/v1/chat/completions", R"({"model": "tiny", "messages": []})", 400,
       "messages", "must not be empty"},
      {"no_route", "/v1/nothing", "{}", 404, "", "no route for POST /v1/nothing"},
  };
  for (const BadRequest& c : cases) {
    SCOPED_TRACE(c.label);
    HttpResult result = http_->Post(c.path, c.body);
    EXPECT_EQ(result.status, c.status) << result.body;
    ASSERT_TRUE(result.json.is_object()) << result.body;
    const json& error = result.json["error"];
    EXPECT_THAT(error["message"].get<std::string>(), HasSubstr(c.message));
    EXPECT_EQ(error["type"], "invalid_request_error");
    EXPECT_EQ(error["param"], c.param.empty() ? json() : json(c.param));
  }
  HttpResult ok = http_->Post("/v1/completions", CompletionBody("still here", 2));
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(workers_["agg0"]->requests().size(), 1u);  // nothing bad reached the worker
  EXPECT_EQ(router_->metrics().RequestCount("invalid"), 12);
}

TEST_F(RouterDaemonTest, UnknownModelIs404AndGetOnPostEndpointsIs405) {
  StartAggregated(1, config::RoutingPolicy::kRoundRobin);
  for (const bool stream : {false, true}) {
    SCOPED_TRACE(stream ? "stream" : "whole");
    const HttpResult unknown = http_->Post(
        "/v1/chat/completions", json{{"model", "gpt-9"},
                                     {"messages", {{{"role", "user"}, {"content", "x"}}}},
                                     {"stream", stream}}
                                    .dump());
    EXPECT_EQ(unknown.status, 404) << unknown.body;
    EXPECT_EQ(unknown.json, json::parse(R"({"error": {
        "message": "The model 'gpt-9' does not exist; this router serves 'tiny'",
        "type": "invalid_request_error", "param": "model", "code": "model_not_found"}})"));
  }

  const std::string& address = router_->http_address();
  const HostPort endpoint = ParseHostPort(address).value();
  httplib::Client client(endpoint.host, endpoint.port);
  client.set_read_timeout(10, 0);
  for (const std::string path : {"/v1/completions", "/v1/chat/completions"}) {
    SCOPED_TRACE(path);
    for (const std::string method : {"GET", "PUT", "DELETE"}) {
      httplib::Result r = method == "GET"   ? client.Get(path.c_str())
                          : method == "PUT" ? client.Put(path.c_str(), "{}", "application/json")
                                            : client.Delete(path.c_str());
      ASSERT_TRUE(r) << method;
      EXPECT_EQ(r->status, 405) << method << " " << r->body;
      EXPECT_EQ(r->get_header_value("Allow"), "POST") << method;
      const json body = json::parse(r->body, nullptr, false);
      ASSERT_TRUE(body.is_object()) << r->body;
      EXPECT_EQ(body["error"]["type"], "invalid_request_error");
      EXPECT_EQ(body["error"]["message"],
                "Invalid method for URL (" + method + " " + path + "); use POST");
    }
  }
  EXPECT_EQ(http_->Get("/v1/nothing").status, 404);  // an unknown route stays 404
  EXPECT_EQ(http_->Post("/v1/completions", CompletionBody("ok", 1)).status, 200);
}

TEST_F(RouterDaemonTest, ApiKeyIsRequiredOnTheApi) {
  StartAggregated(1, config::RoutingPolicy::kRoundRobin, "sekret");
  EXPECT_EQ(http_->Post("/v1/completions", CompletionBody("x", 1)).status, 401);
  HttpResult wrong =
      http_->Post("/v1/completions", CompletionBody("x", 1), {{"Authorization", "Bearer nope"}});
  EXPECT_EQ(wrong.status, 401);
  EXPECT_EQ(wrong.json["error"]["type"], "authentication_error");
  EXPECT_EQ(http_->Get("/v1/models").status, 401);
  const httplib::Headers auth = {{"Authorization", "Bearer sekret"}};
  EXPECT_EQ(http_->Post("/v1/completions", CompletionBody("x", 1), auth).status, 200);
  HttpResult models = http_->Get("/v1/models", auth);
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(models.json["data"][0]["id"], testing::kModel);
  EXPECT_EQ(http_->Get("/health").status, 200);  // health and metrics stay open
  EXPECT_EQ(router_->metrics().RequestCount("unauthorized"), 3);
}

TEST_F(RouterDaemonTest, NoHealthyInstanceIs503) {
  StartWith(testing::TestConfig({{"agg0", InstanceRole::kAggregated}}));  // never registers
  HttpResult result = http_->Post("/v1/completions", CompletionBody("x", 1));
  EXPECT_EQ(result.status, 503);
  EXPECT_THAT(result.json["error"]["message"].get<std::string>(), HasSubstr("no healthy instance"));
  HttpResult health = http_->Get("/health");
  ASSERT_EQ(health.status, 200);
  EXPECT_EQ(health.json["status"], "no_route");
  EXPECT_EQ(health.json["instances"][0]["state"], "unknown");
}

TEST_F(RouterDaemonTest, MetricsParseAndCountRequestsAndInstanceStats) {
  StartAggregated(1, config::RoutingPolicy::kRoundRobin);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(http_->Post("/v1/completions", CompletionBody("m", 4)).status, 200);
  }
  ASSERT_EQ(http_->Post("/v1/completions", "{bad").status, 400);
  // Wait until a Stats poll has seen all 12 tokens.
  absl::StatusOr<testing::ParsedMetrics> metrics;
  ASSERT_TRUE(PollUntil([&] {
    HttpResult result = http_->Get("/metrics");
    metrics = testing::ParsePrometheusText(result.body);
    return metrics.ok() &&
           metrics->Value("lockstep_instance_steps_total", {{"instance", "agg0"}}) == 12;
  })) << (metrics.ok() ? "steps never reached 12" : metrics.status().ToString());
  EXPECT_THAT(testing::CheckHistograms(*metrics), IsOk());
  EXPECT_EQ(metrics->Value("lockstep_router_requests_total", {{"outcome", "ok"}}), 3);
  EXPECT_EQ(metrics->Value("lockstep_router_requests_total", {{"outcome", "invalid"}}), 1);
  EXPECT_EQ(metrics->Value("lockstep_router_prompt_tokens_total"), 3);
  EXPECT_EQ(metrics->Value("lockstep_router_generated_tokens_total"), 12);
  EXPECT_EQ(metrics->Value("lockstep_router_time_to_first_token_seconds_count"), 3);
  EXPECT_EQ(metrics->Value("lockstep_router_inter_token_latency_seconds_count"), 9);
  EXPECT_EQ(metrics->Value("lockstep_router_queue_length"), 0);
  EXPECT_EQ(metrics->Value("lockstep_router_requests_running"), 0);
  EXPECT_EQ(metrics->Value("lockstep_instance_healthy",
                           {{"instance", "agg0"}, {"role", "aggregated"}, {"state", "healthy"}}),
            1);
  EXPECT_EQ(metrics->Value("lockstep_instance_vetoed_steps_total", {{"instance", "agg0"}}), 1);
  EXPECT_EQ(metrics->Value("lockstep_instance_padded_steps_total", {{"instance", "agg0"}}), 2);
  EXPECT_EQ(metrics->Value("lockstep_instance_free_blocks",
                           {{"instance", "agg0"}, {"rank", "0"}, {"pool", "target"}}),
            100);
  EXPECT_EQ(metrics->types.at("lockstep_router_time_to_first_token_seconds"), "histogram");
}

class RouterGrpcTest : public RouterDaemonTest {
 protected:
  std::unique_ptr<v1::RouterService::Stub> Stub() {
    return v1::RouterService::NewStub(
        grpc::CreateChannel(router_->grpc_address(), grpc::InsecureChannelCredentials()));
  }
  static void Deadline(grpc::ClientContext& call) {
    call.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  }
};

TEST_F(RouterGrpcTest, GenerateStreamsTokensAndText) {
  StartAggregated(1, config::RoutingPolicy::kRoundRobin);
  workers_["agg0"]->SetCachedPromptTokens(2);
  auto stub = Stub();
  v1::RouterGenerateRequest request;
  request.set_model(testing::kModel);
  request.set_text("grpc");
  request.mutable_sampling()->set_max_tokens(4);
  grpc::ClientContext call;
  Deadline(call);
  auto reader = stub->Generate(&call, request);
  v1::RouterGenerateResponse response;
  std::string text;
  std::vector<int32_t> tokens;
  bool finished = false;
  while (reader->Read(&response)) {
    text += response.text();
    tokens.insert(tokens.end(), response.token_ids().begin(), response.token_ids().end());
    if (response.finished()) {
      finished = true;
      EXPECT_EQ(response.finish_reason(), v1::FINISH_REASON_LENGTH);
      EXPECT_EQ(response.prompt_tokens(), 4);
      EXPECT_EQ(response.cached_prompt_tokens(), 2);
      EXPECT_EQ(response.completion_tokens(), 4);
    }
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_TRUE(finished);
  EXPECT_EQ(text, FakeWorker::ExpectedText("grpc", 4));
  EXPECT_EQ(tokens.size(), 4u);

  // A token prompt is used as given.
  request.mutable_tokens()->add_ids('g');
  grpc::ClientContext call2;
  Deadline(call2);
  auto reader2 = stub->Generate(&call2, request);
  text.clear();
  while (reader2->Read(&response)) text += response.text();
  EXPECT_TRUE(reader2->Finish().ok());
  EXPECT_EQ(text, FakeWorker::ExpectedText("g", 4));
}

TEST_F(RouterGrpcTest, InvalidRequestsAndMembership) {
  StartAggregated(1, config::RoutingPolicy::kRoundRobin);
  auto stub = Stub();
  v1::RouterGenerateRequest request;
  request.set_model(testing::kModel);
  request.set_text("x");
  request.mutable_sampling()->set_max_tokens(0);
  grpc::ClientContext call;
  Deadline(call);
  auto reader = stub->Generate(&call, request);
  v1::RouterGenerateResponse response;
  EXPECT_FALSE(reader->Read(&response));
  grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("max_tokens: max_tokens must be >= 1"));

  v1::RegisterRequest bad;
  bad.set_instance("other");
  bad.set_role(v1::INSTANCE_ROLE_AGGREGATED);
  bad.set_world_size(1);
  bad.set_leader_address("127.0.0.1:1");
  bad.set_model("not-tiny");
  v1::RegisterResponse registered;
  grpc::ClientContext register_call;
  Deadline(register_call);
  status = stub->Register(&register_call, bad, &registered);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("not-tiny"));

  v1::ListInstancesResponse list;
  grpc::ClientContext list_call;
  Deadline(list_call);
  ASSERT_TRUE(stub->ListInstances(&list_call, v1::ListInstancesRequest(), &list).ok());
  ASSERT_EQ(list.instances_size(), 1);
  EXPECT_EQ(list.instances(0).name(), "agg0");
  EXPECT_TRUE(list.instances(0).healthy());
  EXPECT_TRUE(list.instances(0).registered());
  EXPECT_EQ(list.instances(0).leader_address(), workers_["agg0"]->address());

  v1::HeartbeatRequest heartbeat;
  heartbeat.set_instance("stranger");
  v1::HeartbeatResponse answer;
  grpc::ClientContext heartbeat_call;
  Deadline(heartbeat_call);
  ASSERT_TRUE(stub->Heartbeat(&heartbeat_call, heartbeat, &answer).ok());
  EXPECT_TRUE(answer.reregister());
}

TEST_F(RouterGrpcTest, HostsTheRendezvousServiceOnItsGrpcPort) {
  StartAggregated(1, config::RoutingPolicy::kRoundRobin);
  std::unique_ptr<comm::RendezvousClient> rank0 =
      comm::RendezvousClient::Connect(router_->grpc_address(), "agg0");
  std::unique_ptr<comm::RendezvousClient> rank1 =
      comm::RendezvousClient::Connect(router_->grpc_address(), "agg0");
  LOCKSTEP_ASSERT_OK(rank0->Set("rank0", "127.0.0.1:1234"));
  LOCKSTEP_ASSERT_OK(rank1->Wait({"rank0"}, absl::Seconds(10)));
  absl::StatusOr<std::string> value = rank1->Get("rank0");
  ASSERT_THAT(value, IsOk());
  EXPECT_EQ(*value, "127.0.0.1:1234");
}

// Shutting the router down ends the requests in flight with UNAVAILABLE: HTTP 503 (it was
// 499, the status of a client that closed its request) and gRPC UNAVAILABLE, and
// cancels each at its worker.
TEST_F(RouterGrpcTest, ShutdownEndsRequestsInFlightWith503AndCancelsThemAtTheWorker) {
  StartAggregated(1, config::RoutingPolicy::kRoundRobin);
  FakeWorker& worker = *workers_["agg0"];
  worker.SetStallAfter(1);
  HttpResult http_result;
  std::thread http([&] { http_result = http_->Post("/v1/completions", CompletionBody("bye", 8)); });
  grpc::Status grpc_status;
  std::thread grpc_call([&] {
    auto stub = Stub();
    v1::RouterGenerateRequest request;
    request.set_model(testing::kModel);
    request.set_text("bye");
    request.mutable_sampling()->set_max_tokens(8);
    grpc::ClientContext call;
    Deadline(call);
    auto reader = stub->Generate(&call, request);
    v1::RouterGenerateResponse response;
    while (reader->Read(&response)) {
    }
    grpc_status = reader->Finish();
  });
  EXPECT_TRUE(worker.AwaitStalled(2, absl::Seconds(10)));
  router_->Shutdown();
  http.join();
  grpc_call.join();
  EXPECT_EQ(http_result.status, 503) << http_result.body;
  EXPECT_THAT(http_result.json["error"]["message"].dump(), HasSubstr("shutting down"));
  EXPECT_EQ(grpc_status.error_code(), grpc::StatusCode::UNAVAILABLE) << grpc_status.error_message();
  EXPECT_THAT(grpc_status.error_message(), HasSubstr("shutting down"));
  EXPECT_TRUE(worker.AwaitStreamsCancelled(2, absl::Seconds(10)));
  for (const v1::GenerateRequest& request : worker.requests()) {
    EXPECT_TRUE(worker.AwaitCancelRpc(request.request_id(), absl::Seconds(10)));
  }
}

}  // namespace
}  // namespace lockstep::router
