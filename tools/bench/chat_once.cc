#include "tools/bench/chat_once.h"

#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "runtime/router/http/router_http_client.h"
#include "tools/bench/http_error.h"

namespace lockstep::bench {

using nlohmann::json;

absl::StatusOr<ChatReply> ChatOnce(const ChatOptions& o) {
  absl::StatusOr<std::unique_ptr<httplib::Client>> made =
      router::NewRouterHttpClient(o.http_address, o.ca_file);
  if (!made.ok()) return made.status();
  httplib::Client& client = **made;
  client.set_connection_timeout(absl::ToChronoMicroseconds(o.timeout));
  client.set_read_timeout(absl::ToChronoMicroseconds(o.timeout));
  client.set_write_timeout(absl::ToChronoMicroseconds(o.timeout));
  json messages = json::array();
  if (!o.system.empty()) messages.push_back({{"role", "system"}, {"content", o.system}});
  messages.push_back({{"role", "user"}, {"content", o.user}});
  const json body = {{"model", o.model},
                     {"messages", messages},
                     {"max_tokens", o.max_tokens},
                     {"temperature", 0}};
  httplib::Headers headers;
  if (!o.api_key.empty()) headers.emplace("Authorization", "Bearer " + o.api_key);
  const absl::Time start = absl::Now();
  httplib::Result result =
      client.Post("/v1/chat/completions", headers, body.dump(), "application/json");
  if (!result) {
    return absl::UnavailableError(
        absl::StrCat("chat completion: ",
                     DescribeHttpError(result.error(), absl::Now() - start, o.timeout,
                                       o.timeout)));
  }
  const json response = json::parse(result->body, nullptr, false);
  if (result->status != 200) {
    std::string message = result->body.substr(0, 200);
    if (response.is_object() && response.contains("error") && response["error"].is_object()) {
      message = response["error"].value("message", message);
    }
    return absl::FailedPreconditionError(
        absl::StrCat("chat completion: HTTP ", result->status, ": ", message));
  }
  if (!response.is_object() || !response.contains("choices") ||
      !response["choices"].is_array() || response["choices"].empty() ||
      !response["choices"][0].contains("message") || !response.contains("usage")) {
    return absl::DataLossError(absl::StrCat("chat completion: a response without choices[0]."
                                            "message or usage: ",
                                            result->body.substr(0, 200)));
  }
  const json& choice = response["choices"][0];
  ChatReply reply;
  const json& content = choice["message"].value("content", json());
  if (content.is_string()) reply.content = content.get<std::string>();
  if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) {
    reply.finish_reason = choice["finish_reason"].get<std::string>();
  }
  reply.prompt_tokens = response["usage"].value("prompt_tokens", int64_t{0});
  reply.completion_tokens = response["usage"].value("completion_tokens", int64_t{0});
  return reply;
}

}  // namespace lockstep::bench
