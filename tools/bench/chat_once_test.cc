// ChatOnce against a stand-in router (cpp-httplib server on a port the kernel picks):
// the request it sends, the reply it reads, and errors that name what failed.
#include "tools/bench/chat_once.h"

#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

namespace lockstep::bench {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

// A server answering POST /v1/chat/completions with `status` and `body`; records the
// last request's body and Authorization header.
class StandIn {
 public:
  StandIn(int status, std::string body) {
    server_.Post("/v1/chat/completions",
                 [this, status, body](const httplib::Request& req, httplib::Response& res) {
                   request_body_ = req.body;
                   authorization_ = req.get_header_value("Authorization");
                   res.status = status;
                   res.set_content(body, "application/json");
                 });
    port_ = server_.bind_to_any_port("127.0.0.1");  // listening: connects queue until accepted
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() is a no-op until the accept loop runs: wait for it (deadline 30 s).
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (!server_.is_running() && absl::Now() < deadline) std::this_thread::yield();
    EXPECT_TRUE(server_.is_running()) << "the stand-in router never started";
  }
  ~StandIn() {
    server_.stop();
    thread_.join();
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  const std::string& request_body() const { return request_body_; }
  const std::string& authorization() const { return authorization_; }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::string request_body_;  // written by the server thread before the response
  std::string authorization_;
};

ChatOptions Options(const std::string& address) {
  ChatOptions o;
  o.http_address = address;
  o.model = "tiny";
  o.api_key = "k1";
  o.system = "Be brief.";
  o.user = "Hello?";
  o.max_tokens = 7;
  o.timeout = absl::Seconds(30);
  return o;
}

TEST(ChatOnceTest, SendsTheMessagesGreedyAndReadsTheReply) {
  StandIn router(200, R"({"choices":[{"index":0,"message":{"role":"assistant",
      "content":"Hi."},"finish_reason":"length"}],
      "usage":{"prompt_tokens":21,"completion_tokens":7,"total_tokens":28}})");
  absl::StatusOr<ChatReply> reply = ChatOnce(Options(router.address()));
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->content, "Hi.");
  EXPECT_EQ(reply->finish_reason, "length");
  EXPECT_EQ(reply->prompt_tokens, 21);
  EXPECT_EQ(reply->completion_tokens, 7);
  const json sent = json::parse(router.request_body());
  EXPECT_EQ(sent["model"], "tiny");
  EXPECT_EQ(sent["max_tokens"], 7);
  EXPECT_EQ(sent["temperature"], 0);
  ASSERT_EQ(sent["messages"].size(), 2u);
  EXPECT_EQ(sent["messages"][0]["role"], "system");
  EXPECT_EQ(sent["messages"][1]["content"], "Hello?");
  EXPECT_EQ(router.authorization(), "Bearer k1");
}

TEST(ChatOnceTest, AnHttpErrorCarriesTheRoutersMessage) {
  StandIn router(400, R"({"error":{"message":"messages[0].role: unknown role 'x'",
      "type":"invalid_request_error"}})");
  absl::StatusOr<ChatReply> reply = ChatOnce(Options(router.address()));
  EXPECT_FALSE(reply.ok());
  EXPECT_THAT(reply.status().message(), HasSubstr("HTTP 400"));
  EXPECT_THAT(reply.status().message(), HasSubstr("unknown role 'x'"));
}

TEST(ChatOnceTest, AResponseWithoutChoicesIsDataLoss) {
  StandIn router(200, R"({"usage":{"prompt_tokens":1}})");
  absl::StatusOr<ChatReply> reply = ChatOnce(Options(router.address()));
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(reply.status().message(), HasSubstr("without choices"));
}

TEST(ChatOnceTest, NoRouterIsUnavailable) {
  std::string address;
  {
    StandIn gone(200, "{}");
    address = gone.address();
  }  // stopped: nothing listens on its port now
  absl::StatusOr<ChatReply> reply = ChatOnce(Options(address));
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(reply.status().message(), HasSubstr("chat completion"));
}

}  // namespace
}  // namespace lockstep::bench
