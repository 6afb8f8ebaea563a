// The router's OpenAI-compatible HTTP API, served by the event-driven server of
// runtime/async_http (a few I/O threads for every connection and stream):
//
//   POST /v1/completions, /v1/chat/completions   (streaming as server-sent events;
//                                                generate_request.h: parsed on a parse
//                                                thread, then one choice runs on no
//                                                thread of its own, n > 1 choices on
//                                                request threads as n worker requests,
//                                                each holding an admission place)
//   POST /v1/tokenize, /v1/detokenize            (tokenize_api.h; also at /tokenize and
//                                                /detokenize; on a parse thread)
//   GET  /v1/models                              the served model
//   GET  /health                                 200 while the router runs, with each
//                                                instance's state (and, when unhealthy,
//                                                since when: "unhealthy_since_ms", Unix
//                                                milliseconds by the router's clock);
//                                                "status" is "ok" when some route
//                                                exists, else "no_route"
//   GET  /metrics                                Prometheus text
//
// With an API key, /v1/* (and, when configured, /health and /metrics) need
// `Authorization: Bearer <key>` (401 otherwise). The listener's bounds (connections,
// head and body sizes, timeouts, a client that stopped reading, TLS) are
// async_http_server.h's; its refusals name the router's config fields. A bad request
// gets 400 with an OpenAI error body, an unknown model 404 (code "model_not_found"),
// another method than POST on the POST endpoints 405 (with `Allow: POST`), an unknown
// path 404; no route to any instance gets 503.
// While a stream is idle, an SSE comment (": keep-alive") is written every
// `keepalive_interval` by the router's sweep (router_daemon.h). A request whose client
// left (its connection closed or was cut) is cancelled at its worker by the sweep.
//
// Thread safety: the handlers run on the server's I/O threads and never wait; parsing
// and tokenizing run on `parse_threads` threads, n > 1 choices on request threads.
// Start and Stop are called by the owner's thread.
#ifndef LOCKSTEP_RUNTIME_ROUTER_HTTP_HTTP_FRONTEND_H_
#define LOCKSTEP_RUNTIME_ROUTER_HTTP_HTTP_FRONTEND_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/async_http/async_http_server.h"
#include "runtime/router/core/instance_registry.h"
#include "runtime/router/core/request_runner.h"
#include "runtime/router/core/request_validation.h"
#include "runtime/router/core/router_metrics.h"
#include "runtime/router/http/choice_threads.h"
#include "runtime/router/http/generate_request.h"
#include "runtime/router/http/openai_api.h"
#include "runtime/router/http/parse_threads.h"
#include "runtime/router/http/request_threads.h"
#include "runtime/router/routing/admission.h"
#include "runtime/router/text/sampling_defaults.h"
#include "runtime/router/text/serving_tokenizer.h"
#include "runtime/security/api_keys.h"
#include "runtime/security/tls_session.h"

namespace lockstep::router {

class HttpFrontend {
 public:
  struct Options {
    security::ApiKeys api_keys;  // none: no authentication
    // Shared with the gRPC frontend; the default admits every request.
    std::shared_ptr<Admission> admission = std::make_shared<Admission>(0);
    // I/O threads, connection, size and time bounds of the listener.
    async_http::AsyncHttpLimits server;
    // HTTPS with this server context; null: plain HTTP.
    std::shared_ptr<const security::TlsContext> tls;
    // /health and /metrics need the API key too (else they are open).
    bool api_key_for_health_and_metrics = false;
    absl::Duration keepalive_interval = absl::Seconds(1);
    RequestLimits limits;
    // The model's sampling defaults (generation_config.json) for omitted fields.
    SamplingDefaults sampling_defaults;
    // Threads that parse generation requests before they start.
    int parse_threads = 2;
    // Starts the threads of choices beyond the first (tests inject failures).
    ThreadStarter start_thread = StartThread;
  };

  // Every reference must outlive the frontend.
  HttpFrontend(Options options, RequestRunner& runner, InstanceRegistry& registry,
               RouterMetrics& metrics, const ServingTokenizer& tokenizer, Clock& clock);
  ~HttpFrontend();

  // Binds `listen` (host:port; port 0 picks one) and serves. Returns the bound port.
  absl::StatusOr<int> Start(const std::string& listen);
  // Closes every connection (their requests see their clients gone) and waits for the
  // request threads.
  void Stop();

  // Requests running now (on request threads, or none: RequestRunner::Start).
  int64_t running_requests() const { return request_threads_.running(); }

 private:
  using Exchange = std::shared_ptr<async_http::HttpExchange>;

  // On an I/O thread: routes the request.
  void Handle(const Exchange& exchange);
  void Generate(ApiKind kind, const Exchange& exchange);
  // Runs `body` on a parse thread (503 once stopping).
  void OffLoop(const Exchange& exchange, std::function<void()> body);
  bool Authorized(async_http::HttpExchange& exchange);
  void Health(async_http::HttpExchange& exchange);
  void Models(async_http::HttpExchange& exchange);

  const Options options_;
  RequestRunner& runner_;
  InstanceRegistry& registry_;
  RouterMetrics& metrics_;
  const ServingTokenizer& tokenizer_;
  const GenerateContext generate_;
  RequestThreads request_threads_;
  // Parses generation requests off the I/O threads (tokenizing a large prompt takes a
  // while), then starts them: a fixed number of threads, whatever the streams in flight.
  ParseThreads parse_threads_;
  async_http::AsyncHttpServer server_;  // last: stopped first
  bool stopped_ = false;
};

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_HTTP_HTTP_FRONTEND_H_
