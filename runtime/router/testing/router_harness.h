// Test harness for the router: a RouterDaemon on 127.0.0.1 free ports with fake
// workers, and small HTTP and SSE helpers with deadlines on every wait.
#ifndef LOCKSTEP_RUNTIME_ROUTER_TESTING_ROUTER_HARNESS_H_
#define LOCKSTEP_RUNTIME_ROUTER_TESTING_ROUTER_HARNESS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "runtime/config/deployment_config.h"
#include "runtime/router/router_daemon.h"
#include "runtime/router/testing/fake_worker.h"

namespace lockstep::router::testing {

inline constexpr char kModel[] = "tiny";

// A config for model "tiny" with `instances` (name, role) and fast timers.
config::DeploymentConfig TestConfig(
    const std::vector<std::pair<std::string, config::InstanceRole>>& instances,
    config::RoutingPolicy policy = config::RoutingPolicy::kRoundRobin);

// Starts a router for `config` with a 300-token byte tokenizer, a 20 ms sweeper and a
// 50 ms SSE keep-alive, on `clock` (null: the system clock; not owned).
absl::StatusOr<std::unique_ptr<RouterDaemon>> StartRouter(const config::DeploymentConfig& config,
                                                          Clock* clock = nullptr);

// Starts a fake worker for `name` with `role` (and `world_size` ranks), registers it with
// `router`, and starts its heartbeats (every 50 ms).
absl::StatusOr<std::unique_ptr<FakeWorker>> StartWorker(RouterDaemon& router,
                                                        const std::string& name,
                                                        v1::InstanceRole role,
                                                        int32_t world_size = 1);

struct HttpResult {
  int status = 0;  // 0: no response (transport error)
  std::string body;
  nlohmann::json json;  // parsed body when it is JSON
};

class HttpClient {
 public:
  // Every request is bounded by `timeout` (connect, read and write). `address` is
  // host:port or a URL (https://host:port: the certificate checked against `ca_file`).
  explicit HttpClient(const std::string& address, absl::Duration timeout = absl::Seconds(10),
                      const std::string& ca_file = "");

  HttpResult Get(const std::string& path, const httplib::Headers& headers = {});
  HttpResult Post(const std::string& path, const std::string& body,
                  const httplib::Headers& headers = {});
  // Streams the response body; `on_data(all_so_far)` returns false to hang up.
  HttpResult PostStream(const std::string& path, const std::string& body,
                        const std::function<bool(const std::string&)>& on_data = nullptr);

 private:
  std::unique_ptr<httplib::Client> client_;
};

// The data payloads of an SSE stream, in order ("[DONE]" kept as is).
std::vector<std::string> SseData(const std::string& stream);
// The concatenated choices[0] text (completions) or delta.content (chat) of the events.
std::string SseText(const std::string& stream);

}  // namespace lockstep::router::testing

#endif  // LOCKSTEP_RUNTIME_ROUTER_TESTING_ROUTER_HARNESS_H_
