#include "runtime/router/http_frontend.h"

#include <memory>
#include <random>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/host_port.h"
#include "common/log.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace lockstep::router {
namespace {

using nlohmann::json;

void SendError(httplib::Response& res, const absl::Status& status) {
  res.status = HttpStatusOf(status);
  res.set_content(ErrorBody(status), "application/json");
}

// 405 for a method an endpoint does not take, with Allow and an OpenAI error body.
void MethodNotAllowed(const httplib::Request& req, httplib::Response& res, const char* allow) {
  res.status = 405;
  res.set_header("Allow", allow);
  res.set_content(ErrorBody(absl::InvalidArgumentError(fmt::format(
                      "Invalid method for URL ({} {}); use {}", req.method, req.path, allow))),
                  "application/json");
}

// Collects a non-streaming response.
class CollectSink : public TokenSink {
 public:
  explicit CollectSink(OpenAiResponseWriter& writer) : writer_(writer) {}
  bool OnTokens(const TokenDelta& delta) override {
    writer_.Append(delta);
    return true;
  }
  bool ClientConnected() override { return true; }

 private:
  OpenAiResponseWriter& writer_;
};

// Writes server-sent events to one HTTP response. OnTokens runs on the handler thread,
// ClientConnected on the sweeper thread; the mutex serializes their writes.
class SseSink : public TokenSink {
 public:
  SseSink(httplib::DataSink& sink, OpenAiResponseWriter& writer, Clock& clock,
          absl::Duration keepalive)
      : sink_(sink), writer_(writer), clock_(clock), keepalive_(keepalive) {
    last_write_ = clock_.Now();
  }

  bool OnTokens(const TokenDelta& delta) override {
    return Write(writer_.StreamEvent(delta), /*only_if_idle=*/false);
  }

  bool ClientConnected() override { return Write(": keep-alive\n\n", /*only_if_idle=*/true); }

  // Writes `data` (nothing when empty); false once the client is gone.
  bool Write(const std::string& data, bool only_if_idle) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (broken_) return false;
    const absl::Time now = clock_.Now();
    if (data.empty() || (only_if_idle && now - last_write_ < keepalive_)) return true;
    if (!sink_.write(data.data(), data.size())) broken_ = true;
    last_write_ = now;
    return !broken_;
  }

 private:
  absl::Mutex mu_;
  httplib::DataSink& sink_ ABSL_GUARDED_BY(mu_);
  OpenAiResponseWriter& writer_;
  Clock& clock_;
  const absl::Duration keepalive_;
  absl::Time last_write_ ABSL_GUARDED_BY(mu_);
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
};

uint64_t RandomSeed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) | device();
}

}  // namespace

HttpFrontend::HttpFrontend(Options options, RequestRunner& runner, InstanceRegistry& registry,
                           RouterMetrics& metrics, const tok::ByteTokenizer& tokenizer,
                           Clock& clock)
    : options_(std::move(options)),
      runner_(runner),
      registry_(registry),
      metrics_(metrics),
      tokenizer_(tokenizer),
      clock_(clock) {
  const int threads = options_.threads;
  server_.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server_.set_payload_max_length(16 << 20);
  // Each SSE event is a small write: without TCP_NODELAY, Nagle + delayed ACK add
  // ~40 ms to responses.
  server_.set_tcp_nodelay(true);
  server_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    HandleGenerate(ApiKind::kCompletion, req, res);
  });
  server_.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    HandleGenerate(ApiKind::kChat, req, res);
  });
  // Other methods on the POST-only endpoints get 405, not the 404 of an unknown route.
  for (const char* path : {"/v1/completions", "/v1/chat/completions"}) {
    const auto post_only = [](const httplib::Request& req, httplib::Response& res) {
      MethodNotAllowed(req, res, "POST");
    };
    server_.Get(path, post_only);
    server_.Put(path, post_only);
    server_.Patch(path, post_only);
    server_.Delete(path, post_only);
  }
  server_.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
    if (Authorized(req, res)) Models(res);
  });
  server_.Get("/health", [this](const httplib::Request&, httplib::Response& res) { Health(res); });
  server_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.Render(registry_.Snapshot()), "text/plain; version=0.0.4");
  });
  server_.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    SendError(res,
              res.status == 404
                  ? absl::NotFoundError(fmt::format("no route for {} {}", req.method, req.path))
                  : absl::InvalidArgumentError(fmt::format("HTTP error {}", res.status)));
  });
}

HttpFrontend::~HttpFrontend() { Stop(); }

absl::StatusOr<int> HttpFrontend::Start(const std::string& listen) {
  const absl::StatusOr<HostPort> address = ParseHostPort(listen);
  if (!address.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("http_listen: ", address.status().message()));
  }
  const std::string& host = address->host;
  int port = address->port;
  if (port == 0) {
    port = server_.bind_to_any_port(host);
  } else if (!server_.bind_to_port(host, port)) {
    port = -1;
  }
  if (port <= 0) {
    return absl::UnavailableError(fmt::format("cannot listen for HTTP on {}", listen));
  }
  thread_ = std::thread([this] { server_.listen_after_bind(); });
  return port;
}

void HttpFrontend::Stop() {
  if (!thread_.joinable()) return;
  server_.stop();
  thread_.join();
}

bool HttpFrontend::Authorized(const httplib::Request& req, httplib::Response& res) {
  if (options_.api_key.empty()) return true;
  if (req.get_header_value("Authorization") == "Bearer " + options_.api_key) return true;
  metrics_.Unauthorized();
  SendError(res, absl::UnauthenticatedError(
                     "Incorrect or missing API key; send 'Authorization: Bearer <key>'"));
  return false;
}

void HttpFrontend::Models(httplib::Response& res) {
  json model = {
      {"id", options_.limits.model}, {"object", "model"}, {"created", 0}, {"owned_by", "lockstep"}};
  res.set_content(json{{"object", "list"}, {"data", json::array({model})}}.dump(),
                  "application/json");
}

void HttpFrontend::Health(httplib::Response& res) {
  json instances = json::array();
  for (const InstanceState& state : registry_.Snapshot()) {
    instances.push_back(
        {{"name", state.name},
         {"role", std::string(config::InstanceRoleName(state.role))},
         {"state", std::string(InstanceHealthName(state.health))},
         {"reason", state.reason},
         {"unhealthy_since_ms", state.unhealthy_since == absl::InfinitePast()
                                    ? json()
                                    : json(absl::ToUnixMillis(state.unhealthy_since))},
         {"address", state.address}});
  }
  json body = {{"status", runner_.CanRoute() ? "ok" : "no_route"}, {"instances", instances}};
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void HttpFrontend::HandleGenerate(ApiKind kind, const httplib::Request& req,
                                  httplib::Response& res) {
  if (!Authorized(req, res)) return;
  absl::StatusOr<OpenAiRequest> parsed = ParseOpenAiRequest(kind, req.body, tokenizer_);
  absl::Status status =
      parsed.ok() ? ValidateRouterRequest(parsed->request, options_.limits) : parsed.status();
  if (status.ok() && !runner_.CanRoute()) {
    status = absl::UnavailableError(fmt::format(
        "no healthy instance can serve model '{}' now; retry later", options_.limits.model));
  }
  if (!status.ok()) {
    metrics_.RequestFinished(status);
    SendError(res, status);
    return;
  }
  if (!parsed->has_seed) parsed->request.sampling.seed = RandomSeed();
  const uint64_t id = runner_.NewRequestId();
  const int64_t created = absl::ToUnixSeconds(clock_.Now());
  auto writer = std::make_shared<OpenAiResponseWriter>(
      *parsed, fmt::format("{}-{}", kind == ApiKind::kChat ? "chatcmpl" : "cmpl", id), created,
      tokenizer_);
  if (!parsed->stream) {
    CollectSink sink(*writer);
    const RequestResult result = runner_.Run(parsed->request, id, sink);
    if (!result.status.ok()) {
      SendError(res, result.status);
      return;
    }
    res.set_content(writer->Body(result), "application/json");
    return;
  }
  auto request = std::make_shared<RouterRequest>(std::move(parsed->request));
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream", [this, request, writer, id](size_t, httplib::DataSink& data_sink) {
        SseSink sink(data_sink, *writer, clock_, options_.keepalive_interval);
        const RequestResult result = runner_.Run(*request, id, sink);
        sink.Write(result.status.ok() ? writer->StreamEnd(result) : ErrorEvent(result.status),
                   /*only_if_idle=*/false);
        data_sink.done();
        return true;
      });
}

}  // namespace lockstep::router
