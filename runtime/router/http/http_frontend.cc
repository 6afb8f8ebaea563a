#include "runtime/router/http/http_frontend.h"

#include <atomic>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/host_port.h"
#include "common/log.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "runtime/router/http/choice_threads.h"
#include "runtime/router/http/tokenize_api.h"

namespace lockstep::router {
namespace {

using nlohmann::json;

void SendError(httplib::Response& res, const absl::Status& status) {
  res.status = HttpStatusOf(status);
  // A refusal for overload (429): when to try again.
  if (res.status == 429) res.set_header("Retry-After", std::to_string(kAdmissionRetryAfterSeconds));
  res.set_content(ErrorBody(status), "application/json");
}

// A JSON body, or the error.
void Respond(httplib::Response& res, const absl::StatusOr<std::string>& body) {
  if (!body.ok()) {
    SendError(res, body.status());
    return;
  }
  res.set_content(*body, "application/json");
}

// 405 for a method an endpoint does not take, with Allow and an OpenAI error body.
void MethodNotAllowed(const httplib::Request& req, httplib::Response& res, const char* allow) {
  res.status = 405;
  res.set_header("Allow", allow);
  res.set_content(ErrorBody(absl::InvalidArgumentError(fmt::format(
                      "Invalid method for URL ({} {}); use {}", req.method, req.path, allow))),
                  "application/json");
}

// What a sink does after its writer took new tokens.
SinkAction AfterTokens(const OpenAiResponseWriter& writer, bool client_ok) {
  if (!client_ok) return SinkAction::kClientGone;
  return writer.stopped() ? SinkAction::kStop : SinkAction::kContinue;
}

// Collects a non-streaming response. OnTokens runs on the choice's thread,
// ClientConnected on the sweeper thread: it looks whether the client closed `socket`
// (the connection of the request, open while its handler runs; -1: unknown), so that a
// request whose client left is cancelled at its worker.
class CollectSink : public TokenSink {
 public:
  CollectSink(OpenAiResponseWriter& writer, int socket) : writer_(writer), socket_(socket) {}
  SinkAction OnTokens(const TokenDelta& delta) override {
    writer_.Append(delta);
    return AfterTokens(writer_, true);
  }
  bool ClientConnected() override {
    return socket_ < 0 || !BoundedHttpServer::ClientLeft(socket_);
  }

 private:
  OpenAiResponseWriter& writer_;
  const int socket_;
};

// One HTTP response of server-sent events, shared by the choices of a request: each
// choice's thread writes its events, the sweeper thread keep-alive comments; the mutex
// serializes the writes.
class SseChannel {
 public:
  SseChannel(httplib::DataSink& sink, Clock& clock, absl::Duration keepalive)
      : sink_(sink), clock_(clock), keepalive_(keepalive) {
    last_write_ = clock_.Now();
  }

  // Writes `data` (nothing when empty); false once the client is gone. A keep-alive
  // (`only_if_idle`) never waits for the mutex: while an event's write holds it (for up
  // to the write timeout when the client stopped reading), the sweeper, which serves
  // every stream, goes on; that write finds out whether the client is gone.
  bool Write(const std::string& data, bool only_if_idle) ABSL_LOCKS_EXCLUDED(mu_) {
    if (only_if_idle) {
      if (!mu_.TryLock()) return !broken_.load();
    } else {
      mu_.Lock();
    }
    const bool ok = WriteLocked(data, only_if_idle);
    mu_.Unlock();
    return ok;
  }

 private:
  bool WriteLocked(const std::string& data, bool only_if_idle) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (broken_.load()) return false;
    const absl::Time now = clock_.Now();
    if (data.empty() || (only_if_idle && now - last_write_ < keepalive_)) return true;
    if (!sink_.write(data.data(), data.size())) broken_.store(true);
    last_write_ = now;
    return !broken_.load();
  }

  absl::Mutex mu_;
  httplib::DataSink& sink_ ABSL_GUARDED_BY(mu_);
  Clock& clock_;
  const absl::Duration keepalive_;
  absl::Time last_write_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> broken_{false};  // written under mu_; read without it by keep-alives
};

// Streams one choice to an SseChannel. OnTokens runs on the choice's thread,
// ClientConnected on the sweeper thread.
class SseSink : public TokenSink {
 public:
  SseSink(SseChannel& channel, OpenAiResponseWriter& writer) : channel_(channel), writer_(writer) {}

  SinkAction OnTokens(const TokenDelta& delta) override {
    const bool ok = channel_.Write(writer_.StreamEvent(delta), /*only_if_idle=*/false);
    return AfterTokens(writer_, ok);
  }

  bool ClientConnected() override { return channel_.Write(": keep-alive\n\n", true); }

 private:
  SseChannel& channel_;
  OpenAiResponseWriter& writer_;
};

// The n choices of one request: what each runs and writes, how it ended, the threads
// that run them and the admission places they hold. Shared by the handler and, when
// streaming, the content provider.
struct Choices {
  std::vector<RouterRequest> requests;
  std::vector<uint64_t> ids;
  std::vector<std::unique_ptr<OpenAiResponseWriter>> writers;
  std::vector<RequestResult> results;
  std::unique_ptr<ChoiceThreads> threads;
  Admission::Ticket ticket;         // the first choice's place
  Admission::Ticket extra_tickets;  // the other choices' places
};

uint64_t RandomSeed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) | device();
}

}  // namespace

HttpFrontend::HttpFrontend(Options options, RequestRunner& runner, InstanceRegistry& registry,
                           RouterMetrics& metrics, const ServingTokenizer& tokenizer, Clock& clock)
    : options_(std::move(options)),
      runner_(runner),
      registry_(registry),
      metrics_(metrics),
      tokenizer_(tokenizer),
      clock_(clock),
      server_(options_.server) {
  // Each SSE event is a small write: without TCP_NODELAY, Nagle + delayed ACK add
  // ~40 ms to responses.
  server_.set_tcp_nodelay(true);
  server_.set_tls(options_.tls);
  server_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    HandleGenerate(ApiKind::kCompletion, req, res);
  });
  server_.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    HandleGenerate(ApiKind::kChat, req, res);
  });
  // Also at /tokenize and /detokenize, the paths vLLM's clients call.
  for (const char* path : {"/v1/tokenize", "/tokenize"}) {
    server_.Post(path, [this](const httplib::Request& req, httplib::Response& res) {
      if (Authorized(req, res)) Respond(res, Tokenize(req.body, tokenizer_, options_.limits));
    });
  }
  for (const char* path : {"/v1/detokenize", "/detokenize"}) {
    server_.Post(path, [this](const httplib::Request& req, httplib::Response& res) {
      if (Authorized(req, res)) Respond(res, Detokenize(req.body, tokenizer_, options_.limits));
    });
  }
  // Other methods on the POST-only endpoints get 405, not the 404 of an unknown route.
  for (const char* path : {"/v1/completions", "/v1/chat/completions", "/v1/tokenize",
                           "/v1/detokenize", "/tokenize", "/detokenize"}) {
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
  server_.Get("/health", [this](const httplib::Request& req, httplib::Response& res) {
    if (!options_.api_key_for_health_and_metrics || Authorized(req, res)) Health(res);
  });
  server_.Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
    if (options_.api_key_for_health_and_metrics && !Authorized(req, res)) return;
    res.set_content(metrics_.Render(registry_.Snapshot()), "text/plain; version=0.0.4");
  });
  server_.set_fallback_error_handler([](const httplib::Request& req, httplib::Response& res) {
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
  const int port = server_.Bind(host, address->port);
  if (port <= 0) {
    return absl::UnavailableError(fmt::format("cannot listen for HTTP on {}", listen));
  }
  thread_ = std::thread([this] { server_.listen_after_bind(); });
  // httplib's stop() does nothing until the listening loop has begun: a Stop right
  // after Start would otherwise leave the thread accepting forever.
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (!server_.is_running() && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  return port;
}

void HttpFrontend::Stop() {
  if (!thread_.joinable()) return;
  server_.stop();
  thread_.join();
}

bool HttpFrontend::Authorized(const httplib::Request& req, httplib::Response& res) {
  if (options_.api_keys.AllowsAuthorization(req.get_header_value("Authorization"))) return true;
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
  Admission& admission = *options_.admission;
  const auto refuse = [&] {
    const absl::Status refused = admission.RefusalStatus();
    metrics_.Refused(kAdmissionReason);
    metrics_.RequestFinished(refused);
    SendError(res, refused);
  };
  // Each choice holds a place until the response is over (for a stream: captured by its
  // provider); the first is taken before the body is parsed.
  auto choices = std::make_shared<Choices>();
  choices->ticket = admission.TryAdmit();
  if (choices->ticket == nullptr) return refuse();
  absl::StatusOr<OpenAiRequest> parsed = ParseOpenAiRequest(
      kind, req.body, tokenizer_, options_.sampling_defaults, RequestJsonBounds(options_.limits));
  absl::Status status =
      parsed.ok() ? ValidateRouterRequest(parsed->request, options_.limits) : parsed.status();
  if (status.ok() && parsed->n > 1 && admission.max_in_flight() > 0 &&
      parsed->n > admission.max_in_flight()) {
    status = absl::InvalidArgumentError(
        fmt::format("n = {} choices: each counts as a request, and {} allows {} at once", parsed->n,
                    admission.limit_name(), admission.max_in_flight()));
  }
  if (status.ok() && parsed->n > 1) {
    choices->extra_tickets = admission.TryAdmit(parsed->n - 1);
    if (choices->extra_tickets == nullptr) return refuse();
  }
  if (status.ok()) status = runner_.CheckRoute(options_.limits.model);
  if (status.ok()) {
    // Every choice's thread starts before any choice runs (a refusal is a 503 here).
    absl::StatusOr<std::unique_ptr<ChoiceThreads>> threads =
        ChoiceThreads::Start(parsed->n, options_.start_thread);
    if (threads.ok()) choices->threads = *std::move(threads);
    status = threads.status();
  }
  if (!status.ok()) {
    metrics_.RequestFinished(status);
    SendError(res, status);
    return;
  }
  if (!parsed->has_seed) parsed->request.sampling.seed = RandomSeed();
  // One worker request per choice, each with its own id and seed.
  const uint64_t first_id = runner_.NewRequestId();
  const std::string id =
      fmt::format("{}-{}", kind == ApiKind::kChat ? "chatcmpl" : "cmpl", first_id);
  const int64_t created = absl::ToUnixSeconds(clock_.Now());
  for (int32_t i = 0; i < parsed->n; ++i) {
    RouterRequest request = parsed->request;
    request.sampling.seed = ChoiceSeed(parsed->request.sampling.seed, i);
    choices->requests.push_back(std::move(request));
    choices->ids.push_back(i == 0 ? first_id : runner_.NewRequestId());
    choices->writers.push_back(
        std::make_unique<OpenAiResponseWriter>(*parsed, id, created, tokenizer_, i));
  }
  choices->results.resize(parsed->n);
  if (!parsed->stream) {
    std::vector<json> bodies(parsed->n);
    const int socket = BoundedHttpServer::CurrentSocket();
    choices->threads->Run([&](int32_t i) {
      CollectSink sink(*choices->writers[i], socket);
      choices->results[i] = runner_.Run(choices->requests[i], choices->ids[i], sink);
      if (choices->results[i].status.ok()) {
        bodies[i] = choices->writers[i]->FinishedChoice(choices->results[i]);
      }
    });
    for (const RequestResult& result : choices->results) {
      if (!result.status.ok()) {
        SendError(res, result.status);
        return;
      }
    }
    res.set_content(choices->writers[0]->Body(bodies, choices->results), "application/json");
    return;
  }
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream", [this, choices](size_t, httplib::DataSink& data_sink) {
        SseChannel channel(data_sink, clock_, options_.keepalive_interval);
        choices->threads->Run([&](int32_t i) {
          SseSink sink(channel, *choices->writers[i]);
          RequestResult& result = choices->results[i];
          result = runner_.Run(choices->requests[i], choices->ids[i], sink);
          if (result.status.ok()) channel.Write(choices->writers[i]->StreamFinish(result), false);
        });
        absl::Status failure;
        for (const RequestResult& result : choices->results) {
          if (failure.ok()) failure = result.status;
        }
        channel.Write(
            failure.ok() ? choices->writers[0]->StreamTail(choices->results) : ErrorEvent(failure),
            /*only_if_idle=*/false);
        data_sink.done();
        return true;
      });
}

}  // namespace lockstep::router
