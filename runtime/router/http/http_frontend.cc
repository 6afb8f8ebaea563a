#include "runtime/router/http/http_frontend.h"

#include <algorithm>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/host_port.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "runtime/router/http/exchange_sinks.h"
#include "runtime/router/http/tokenize_api.h"

namespace lockstep::router {
namespace {

using nlohmann::json;

// How long Stop lets the requests in flight answer before it closes their connections.
constexpr absl::Duration kStopGrace = absl::Seconds(2);

// The config field behind each refusal of the listener's bounds.
std::string_view LimitField(int status) {
  switch (status) {
    case 408:
      return "router.http_read_timeout_ms";
    case 413:
      return "router.max_request_body_bytes";
    case 431:
      return "router.max_header_bytes / router.max_header_count";
    case 503:
      return "router.max_connections";
    default:
      return "";
  }
}

// The OpenAI error body of a refusal by the listener's bounds, naming the config field.
std::string ListenerErrorBody(int status, std::string_view message) {
  const std::string_view field = LimitField(status);
  const std::string text =
      field.empty() ? std::string(message) : fmt::format("{} ({})", message, field);
  switch (status) {
    case 408:
      return ErrorBody(absl::DeadlineExceededError(text));
    case 503:
      return ErrorBody(absl::UnavailableError(text));
    default:
      return ErrorBody(absl::InvalidArgumentError(text));
  }
}

// 405 for a method an endpoint does not take, with Allow and an OpenAI error body.
void MethodNotAllowed(async_http::HttpExchange& exchange, std::string_view path) {
  exchange.Respond(
      405, "application/json",
      ErrorBody(absl::InvalidArgumentError(fmt::format("Invalid method for URL ({} {}); use POST",
                                                       exchange.request().method, path))),
      {{"Allow", "POST"}});
}

bool IsOneOf(std::string_view path, std::initializer_list<std::string_view> paths) {
  for (std::string_view p : paths) {
    if (path == p) return true;
  }
  return false;
}

}  // namespace

HttpFrontend::HttpFrontend(Options options, RequestRunner& runner, InstanceRegistry& registry,
                           RouterMetrics& metrics, const ServingTokenizer& tokenizer, Clock& clock)
    : options_(std::move(options)),
      runner_(runner),
      registry_(registry),
      metrics_(metrics),
      tokenizer_(tokenizer),
      generate_{.runner = runner,
                .metrics = metrics,
                .tokenizer = tokenizer,
                .clock = clock,
                .admission = *options_.admission,
                .limits = options_.limits,
                .sampling_defaults = options_.sampling_defaults,
                .start_thread = options_.start_thread,
                .keepalive_interval = options_.keepalive_interval,
                .write_timeout = options_.server.write_timeout,
                .run_on_thread =
                    [this](std::function<void()> body) {
                      return request_threads_.Run(std::move(body));
                    },
                .track = [this] { return request_threads_.Track(); }},
      parse_threads_(options_.parse_threads),
      server_(
          options_.server, [this](Exchange exchange) { Handle(exchange); }, ListenerErrorBody) {
  if (options_.tls != nullptr) server_.UseTls(options_.tls->get());
}

HttpFrontend::~HttpFrontend() { Stop(); }

absl::StatusOr<int> HttpFrontend::Start(const std::string& listen) {
  const absl::StatusOr<HostPort> address = ParseHostPort(listen);
  if (!address.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("http_listen: ", address.status().message()));
  }
  absl::StatusOr<int> port = server_.Start(address->host, address->port);
  if (!port.ok()) {
    return absl::UnavailableError(fmt::format("cannot listen for HTTP on {}: {}", listen,
                                              std::string(port.status().message())));
  }
  return port;
}

void HttpFrontend::Stop() {
  if (stopped_) return;
  stopped_ = true;
  // The owner ended the requests in flight (their flows): their answers (a 503, a
  // stream's error event) are queued before the connections close, unless a request
  // takes longer than the grace (a stream waiting for a stuck client): it is aborted.
  request_threads_.AwaitIdle(kStopGrace);
  server_.Stop();
  parse_threads_.Stop();  // what they started is tracked by request_threads_
  request_threads_.JoinAll();
}

void HttpFrontend::Handle(const Exchange& exchange) {
  const async_http::HttpRequest& request = exchange->request();
  const std::string_view target = request.target;
  const std::string_view path = target.substr(0, target.find('?'));
  const bool post = request.method == "POST";
  const bool get = request.method == "GET";
  if (IsOneOf(path, {"/v1/completions", "/v1/chat/completions", "/v1/tokenize", "/tokenize",
                     "/v1/detokenize", "/detokenize"})) {
    if (!post) return MethodNotAllowed(*exchange, path);
    if (path == "/v1/completions") return Generate(ApiKind::kCompletion, exchange);
    if (path == "/v1/chat/completions") return Generate(ApiKind::kChat, exchange);
    if (!Authorized(*exchange)) return;
    const bool tokenize = path == "/v1/tokenize" || path == "/tokenize";
    return OffLoop(exchange, [this, exchange, tokenize] {
      const std::string& body = exchange->request().body;
      RespondJson(*exchange, tokenize ? Tokenize(body, tokenizer_, options_.limits)
                                      : Detokenize(body, tokenizer_, options_.limits));
    });
  }
  if (get && path == "/v1/models") {
    if (Authorized(*exchange)) Models(*exchange);
    return;
  }
  if (get && path == "/health") {
    if (!options_.api_key_for_health_and_metrics || Authorized(*exchange)) Health(*exchange);
    return;
  }
  if (get && path == "/metrics") {
    if (options_.api_key_for_health_and_metrics && !Authorized(*exchange)) return;
    exchange->Respond(200, "text/plain; version=0.0.4", metrics_.Render(registry_.Snapshot()));
    return;
  }
  SendError(*exchange,
            absl::NotFoundError(fmt::format("no route for {} {}", request.method, path)));
}

void HttpFrontend::OffLoop(const Exchange& exchange, std::function<void()> body) {
  // Short CPU work (tokenizing): a parse thread's, no thread of its own.
  if (!parse_threads_.Post(std::move(body))) {
    SendError(*exchange,
              absl::UnavailableError("the router is shutting down; retry on another router"));
  }
}

void HttpFrontend::Generate(ApiKind kind, const Exchange& exchange) {
  if (!Authorized(*exchange)) return;
  Admission& admission = *options_.admission;
  // The first choice's place is taken before the body is parsed; it is held until the
  // response is complete.
  Admission::Ticket ticket = admission.TryAdmit();
  if (ticket == nullptr) {
    const absl::Status refused = admission.RefusalStatus();
    metrics_.Refused(kAdmissionReason);
    metrics_.RequestFinished(refused);
    SendError(*exchange, refused);
    return;
  }
  // Parsed on a parse thread; a one-choice request then runs on no thread of its own.
  auto held = std::make_shared<Admission::Ticket>(std::move(ticket));
  const bool posted = parse_threads_.Post([this, kind, exchange, held] {
    RunGenerateRequest(generate_, kind, exchange, std::move(*held));
  });
  if (!posted) {
    const absl::Status stopping =
        absl::UnavailableError("the router is shutting down; retry on another router");
    metrics_.RequestFinished(stopping);
    SendError(*exchange, stopping);
  }
}

bool HttpFrontend::Authorized(async_http::HttpExchange& exchange) {
  if (options_.api_keys.AllowsAuthorization(exchange.request().Header("Authorization"))) {
    return true;
  }
  metrics_.Unauthorized();
  SendError(exchange, absl::UnauthenticatedError(
                          "Incorrect or missing API key; send 'Authorization: Bearer <key>'"));
  return false;
}

void HttpFrontend::Models(async_http::HttpExchange& exchange) {
  json model = {
      {"id", options_.limits.model}, {"object", "model"}, {"created", 0}, {"owned_by", "lockstep"}};
  exchange.Respond(200, "application/json",
                   json{{"object", "list"}, {"data", json::array({model})}}.dump());
}

void HttpFrontend::Health(async_http::HttpExchange& exchange) {
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
  exchange.Respond(200, "application/json",
                   body.dump(-1, ' ', false, json::error_handler_t::replace));
}

}  // namespace lockstep::router
