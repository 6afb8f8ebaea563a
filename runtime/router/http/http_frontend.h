// The router's OpenAI-compatible HTTP API (cpp-httplib):
//
//   POST /v1/completions, /v1/chat/completions   (streaming as server-sent events;
//                                                n choices run as n worker requests,
//                                                each holding an admission place and
//                                                a thread: choice_threads.h)
//   POST /v1/tokenize, /v1/detokenize            (tokenize_api.h)
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
// head and body sizes, timeouts, a client that stopped reading) are
// http_frontend_server.h's. A bad
// request gets 400 with an OpenAI error body, an unknown model 404 (code
// "model_not_found"), another method than POST on the generation endpoints 405 (with
// `Allow: POST`); no route to any instance gets 503.
// While a stream is idle, an SSE comment (": keep-alive") is written every
// `keepalive_interval` from the sweeper thread, so a client that left is noticed and
// its request cancelled even before the next token. For a non-streaming request the
// sweeper looks whether the client closed its connection (nothing is written), and
// cancels it at its worker the same way.
//
// Thread safety: handlers run on the HTTP server's threads and share only thread-safe
// objects. Start and Stop are called by the owner's thread.
#ifndef LOCKSTEP_RUNTIME_ROUTER_HTTP_HTTP_FRONTEND_H_
#define LOCKSTEP_RUNTIME_ROUTER_HTTP_HTTP_FRONTEND_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "httplib.h"
#include "runtime/router/core/instance_registry.h"
#include "runtime/router/core/request_runner.h"
#include "runtime/router/core/request_validation.h"
#include "runtime/router/core/router_metrics.h"
#include "runtime/router/http/choice_threads.h"
#include "runtime/router/http/http_frontend_server.h"
#include "runtime/router/http/openai_api.h"
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
    // Threads, connection, size and time bounds of the listener.
    HttpServerLimits server;
    // HTTPS with this server context (http_frontend_server.h); null: plain HTTP.
    std::shared_ptr<const security::TlsContext> tls;
    // /health and /metrics need the API key too (else they are open).
    bool api_key_for_health_and_metrics = false;
    absl::Duration keepalive_interval = absl::Seconds(1);
    RequestLimits limits;
    // The model's sampling defaults (generation_config.json) for omitted fields.
    SamplingDefaults sampling_defaults;
    // Starts the threads of choices beyond the first (tests inject failures).
    ThreadStarter start_thread = StartThread;
  };

  // Every reference must outlive the frontend.
  HttpFrontend(Options options, RequestRunner& runner, InstanceRegistry& registry,
               RouterMetrics& metrics, const ServingTokenizer& tokenizer, Clock& clock);
  ~HttpFrontend();

  // Binds `listen` (host:port; port 0 picks one) and serves on a thread of its own.
  // Returns the bound port.
  absl::StatusOr<int> Start(const std::string& listen);
  // Stops accepting and waits for the handlers to return.
  void Stop();

 private:
  void HandleGenerate(ApiKind kind, const httplib::Request& req, httplib::Response& res);
  bool Authorized(const httplib::Request& req, httplib::Response& res);
  void Health(httplib::Response& res);
  void Models(httplib::Response& res);

  const Options options_;
  RequestRunner& runner_;
  InstanceRegistry& registry_;
  RouterMetrics& metrics_;
  const ServingTokenizer& tokenizer_;
  Clock& clock_;
  BoundedHttpServer server_;
  std::thread thread_;
};

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_HTTP_HTTP_FRONTEND_H_
