// The OpenAI options the router implements itself, end to end over real HTTP against
// fake workers: stop strings (whole and streamed, aggregated and two-leg), n choices,
// echo, and /v1/tokenize + /v1/detokenize.
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/config/role_wire.h"
#include "runtime/router/router_daemon.h"
#include "runtime/router/testing/fake_worker.h"
#include "runtime/router/testing/router_harness.h"

namespace lockstep::router {
namespace {

using config::InstanceRole;
using ::lockstep::testing::IsOk;
using nlohmann::json;
using testing::FakeWorker;
using testing::HttpClient;
using testing::HttpResult;

class OpenAiOptionsTest : public ::testing::Test {
 protected:
  // Aggregated: one instance "agg0"; otherwise "ctx0" and "gen0".
  void Start(bool aggregated) {
    std::vector<std::pair<std::string, InstanceRole>> instances;
    if (aggregated) {
      instances = {{"agg0", InstanceRole::kAggregated}};
    } else {
      instances = {{"ctx0", InstanceRole::kContext}, {"gen0", InstanceRole::kGeneration}};
    }
    absl::StatusOr<std::unique_ptr<RouterDaemon>> router =
        testing::StartRouter(testing::TestConfig(instances));
    ASSERT_THAT(router, IsOk());
    router_ = *std::move(router);
    http_ = std::make_unique<HttpClient>(router_->http_address());
    for (const auto& [name, role] : instances) {
      absl::StatusOr<std::unique_ptr<FakeWorker>> worker =
          testing::StartWorker(*router_, name, config::RoleToWire(role));
      ASSERT_THAT(worker, IsOk());
      workers_[name] = *std::move(worker);
    }
  }

  std::unique_ptr<RouterDaemon> router_;
  std::unique_ptr<HttpClient> http_;
  std::map<std::string, std::unique_ptr<FakeWorker>> workers_;
};

json Body(const std::string& prompt, int max_tokens) {
  return {{"model", testing::kModel},
          {"prompt", prompt},
          {"max_tokens", max_tokens},
          {"temperature", 0}};
}

// A stop string inside the fake's output ends the request with "stop" before the text
// it would have generated, whole and streamed, and the worker is told to stop (it
// stalls after 8 tokens: only the stop string can end the request).
TEST_F(OpenAiOptionsTest, StopStringEndsTheRequestWholeAndStreamed) {
  for (const bool aggregated : {true, false}) {
    SCOPED_TRACE(aggregated ? "aggregated" : "two legs");
    workers_.clear();
    router_.reset();
    Start(aggregated);
    FakeWorker& decoder = *workers_[aggregated ? "agg0" : "gen0"];
    decoder.SetStallAfter(aggregated ? 8 : 7);
    const std::string full = FakeWorker::ExpectedText("stop me", 30);
    const std::string stop = full.substr(4, 2);
    const std::string want = full.substr(0, full.find(stop));
    for (const bool stream : {false, true}) {
      SCOPED_TRACE(stream ? "stream" : "whole");
      json body = Body("stop me", 30);
      body["stop"] = {stop, "never-generated"};
      body["stream"] = stream;
      HttpResult result = stream ? http_->PostStream("/v1/completions", body.dump())
                                 : http_->Post("/v1/completions", body.dump());
      ASSERT_EQ(result.status, 200) << result.body;
      if (stream) {
        EXPECT_EQ(testing::SseText(result.body), want);
        const std::vector<std::string> events = testing::SseData(result.body);
        ASSERT_GE(events.size(), 2u);
        EXPECT_EQ(json::parse(events[events.size() - 2])["choices"][0]["finish_reason"], "stop");
      } else {
        EXPECT_EQ(result.json["choices"][0]["text"], want);
        EXPECT_EQ(result.json["choices"][0]["finish_reason"], "stop");
      }
      const uint64_t id = decoder.requests().back().request_id();
      EXPECT_TRUE(decoder.AwaitCancelRpc(id, absl::Seconds(10)));
    }
  }
}

TEST_F(OpenAiOptionsTest, NChoicesRunAsSeparateRequestsWithDerivedSeeds) {
  Start(/*aggregated=*/true);
  for (const bool stream : {false, true}) {
    SCOPED_TRACE(stream ? "stream" : "whole");
    json body = Body("many", 4);
    body["n"] = 3;
    body["seed"] = 7;
    body["stream"] = stream;
    body["stream_options"] = {{"include_usage", true}};
    const size_t before = workers_["agg0"]->requests().size();
    HttpResult result = stream ? http_->PostStream("/v1/completions", body.dump())
                               : http_->Post("/v1/completions", body.dump());
    ASSERT_EQ(result.status, 200) << result.body;
    const std::vector<v1::GenerateRequest> requests = workers_["agg0"]->requests();
    ASSERT_EQ(requests.size(), before + 3);
    std::set<uint64_t> seeds, ids;
    for (size_t i = before; i < requests.size(); ++i) {
      seeds.insert(requests[i].sampling().seed());
      ids.insert(requests[i].request_id());
    }
    EXPECT_EQ(seeds, (std::set<uint64_t>{ChoiceSeed(7, 0), ChoiceSeed(7, 1), ChoiceSeed(7, 2)}));
    EXPECT_EQ(ids.size(), 3u);
    const std::string text = FakeWorker::ExpectedText("many", 4);
    json usage;
    if (stream) {
      std::map<int, std::string> texts;
      std::map<int, std::string> finish;
      for (const std::string& data : testing::SseData(result.body)) {
        if (data == "[DONE]") continue;
        const json event = json::parse(data);
        if (event.contains("usage")) usage = event["usage"];
        for (const json& choice : event["choices"]) {
          texts[choice["index"]] += choice["text"].get<std::string>();
          if (!choice["finish_reason"].is_null()) finish[choice["index"]] = choice["finish_reason"];
        }
      }
      EXPECT_EQ(texts, (std::map<int, std::string>{{0, text}, {1, text}, {2, text}}));
      EXPECT_EQ(finish.size(), 3u);
    } else {
      ASSERT_EQ(result.json["choices"].size(), 3u);
      for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(result.json["choices"][i]["index"], i);
        EXPECT_EQ(result.json["choices"][i]["text"], text);
      }
      usage = result.json["usage"];
    }
    EXPECT_EQ(usage, (json{{"prompt_tokens", 4},
                           {"completion_tokens", 12},
                           {"total_tokens", 16},
                           {"prompt_tokens_details", {{"cached_tokens", 0}}}}));
  }
}

TEST_F(OpenAiOptionsTest, EchoPrependsThePrompt) {
  Start(/*aggregated=*/true);
  json body = Body("say", 3);
  body["echo"] = true;
  HttpResult result = http_->Post("/v1/completions", body.dump());
  ASSERT_EQ(result.status, 200) << result.body;
  EXPECT_EQ(result.json["choices"][0]["text"], "say" + FakeWorker::ExpectedText("say", 3));
}

TEST_F(OpenAiOptionsTest, TokenizeAndDetokenizeNeedNoWorker) {
  Start(/*aggregated=*/true);
  HttpResult result = http_->Post("/v1/tokenize", R"({"model": "tiny", "prompt": "ab"})");
  ASSERT_EQ(result.status, 200) << result.body;
  EXPECT_EQ(result.json["tokens"], json({'a', 'b'}));
  EXPECT_EQ(result.json["count"], 2);
  result = http_->Post("/v1/detokenize", R"({"model": "tiny", "tokens": [104, 105]})");
  ASSERT_EQ(result.status, 200) << result.body;
  EXPECT_EQ(result.json["prompt"], "hi");
  result = http_->Post("/v1/detokenize", R"({"model": "other", "tokens": [1]})");
  EXPECT_EQ(result.status, 404);
  result = http_->Get("/v1/tokenize");
  EXPECT_EQ(result.status, 405);
  EXPECT_TRUE(workers_["agg0"]->requests().empty());
}

}  // namespace
}  // namespace lockstep::router
