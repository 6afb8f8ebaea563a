#include "runtime/router/testing/router_harness.h"

#include "fmt/format.h"
#include "runtime/router/http/router_http_client.h"

namespace lockstep::router::testing {
namespace {

using nlohmann::json;

HttpResult ToResult(const httplib::Result& result, std::string body) {
  HttpResult out;
  if (!result) return out;
  out.status = result->status;
  out.body = body.empty() ? result->body : std::move(body);
  out.json = json::parse(out.body, nullptr, /*allow_exceptions=*/false);
  return out;
}

}  // namespace

config::DeploymentConfig TestConfig(
    const std::vector<std::pair<std::string, config::InstanceRole>>& instances,
    config::RoutingPolicy policy) {
  config::DeploymentConfig config;
  config.model.name = kModel;
  config.model.path = "unused";  // the tokenizer is given directly
  config.router.policy = policy;
  config.router.heartbeat_interval_ms = 50;
  config.router.heartbeat_timeout_ms = 1000;
  config.router.health_check_interval_ms = 50;
  config.router.request_timeout_s = 20;
  config.router.max_prompt_tokens = 64;
  config.router.http_threads = 16;
  for (const auto& [name, role] : instances) {
    config::InstanceConfig instance;
    instance.name = name;
    instance.role = role;
    config.instances.push_back(instance);
  }
  return config;
}

absl::StatusOr<std::unique_ptr<RouterDaemon>> StartRouter(const config::DeploymentConfig& config,
                                                          Clock* clock) {
  RouterDaemon::Options options;
  options.clock = clock;
  options.tokenizer = *tok::ByteTokenizer::Create(300, 256, 257);
  options.sweep_interval = absl::Milliseconds(20);
  options.keepalive_interval = absl::Milliseconds(50);
  return RouterDaemon::Start(config, std::move(options));
}

absl::StatusOr<std::unique_ptr<FakeWorker>> StartWorker(RouterDaemon& router,
                                                        const std::string& name,
                                                        v1::InstanceRole role, int32_t world_size) {
  absl::StatusOr<std::unique_ptr<FakeWorker>> worker =
      FakeWorker::Start({.name = name, .role = role, .world_size = world_size, .model = kModel});
  if (!worker.ok()) return worker.status();
  if (absl::Status status = (*worker)->Register(router.grpc_address()); !status.ok()) {
    return status;
  }
  // One heartbeat before returning, so the router knows every started worker's load
  // (free blocks) when the test sends its first request: routing does not depend on
  // which heartbeat thread ran first.
  if (absl::StatusOr<bool> beat = (*worker)->Heartbeat(router.grpc_address()); !beat.ok()) {
    return beat.status();
  }
  (*worker)->StartHeartbeats(router.grpc_address(), absl::Milliseconds(50));
  return worker;
}

HttpClient::HttpClient(const std::string& address, absl::Duration timeout,
                       const std::string& ca_file)
    : client_(*NewRouterHttpClient(address, ca_file)) {
  const time_t seconds = absl::ToInt64Seconds(timeout);
  client_->set_connection_timeout(seconds, 0);
  client_->set_read_timeout(seconds, 0);
  client_->set_write_timeout(seconds, 0);
}

HttpResult HttpClient::Get(const std::string& path, const httplib::Headers& headers) {
  return ToResult(client_->Get(path.c_str(), headers), "");
}

HttpResult HttpClient::Post(const std::string& path, const std::string& body,
                            const httplib::Headers& headers) {
  return ToResult(client_->Post(path.c_str(), headers, body, "application/json"), "");
}

HttpResult HttpClient::PostStream(const std::string& path, const std::string& body,
                                  const std::function<bool(const std::string&)>& on_data) {
  httplib::Request request;
  request.method = "POST";
  request.path = path;
  request.body = body;
  request.set_header("Content-Type", "application/json");
  std::string received;
  request.content_receiver = [&](const char* data, size_t length, uint64_t, uint64_t) {
    received.append(data, length);
    return on_data == nullptr || on_data(received);
  };
  httplib::Result result = client_->send(request);
  HttpResult out;
  out.status = result ? result->status : 0;
  out.body = received;
  return out;
}

std::vector<std::string> SseData(const std::string& stream) {
  std::vector<std::string> data;
  size_t pos = 0;
  while ((pos = stream.find("data: ", pos)) != std::string::npos) {
    const size_t end = stream.find("\n\n", pos);
    if (end == std::string::npos) break;
    data.push_back(stream.substr(pos + 6, end - pos - 6));
    pos = end + 2;
  }
  return data;
}

std::string SseText(const std::string& stream) {
  std::string text;
  for (const std::string& data : SseData(stream)) {
    const json event = json::parse(data, nullptr, false);
    if (event.is_discarded() || !event.contains("choices") || event["choices"].empty()) continue;
    const json& choice = event["choices"][0];
    if (choice.contains("text")) text += choice["text"].get<std::string>();
    if (choice.contains("delta") && choice["delta"].contains("content")) {
      text += choice["delta"]["content"].get<std::string>();
    }
  }
  return text;
}

}  // namespace lockstep::router::testing
