// One POST /v1/completions or /v1/chat/completions on the router's HTTP surface, run
// on a request thread (request_threads.h) once the I/O thread admitted it: parses and
// checks the body, runs its n choices as n worker requests (choice_threads.h; each
// holds an admission place) and answers the exchange: one JSON body, or server-sent
// events written as tokens arrive (exchange_sinks.h). A refusal or a bad request is
// answered before any choice runs; a stream that failed after it began ends with an
// error event.
//
// Thread safety: Run may be called on many threads at once; the references are shared
// thread-safe objects that outlive it.
#ifndef LOCKSTEP_RUNTIME_ROUTER_HTTP_GENERATE_REQUEST_H_
#define LOCKSTEP_RUNTIME_ROUTER_HTTP_GENERATE_REQUEST_H_

#include <memory>

#include "absl/time/time.h"
#include "common/clock.h"
#include "runtime/async_http/http_exchange.h"
#include "runtime/router/core/request_runner.h"
#include "runtime/router/core/request_validation.h"
#include "runtime/router/core/router_metrics.h"
#include "runtime/router/http/choice_threads.h"
#include "runtime/router/http/openai_api.h"
#include "runtime/router/routing/admission.h"
#include "runtime/router/text/sampling_defaults.h"
#include "runtime/router/text/serving_tokenizer.h"

namespace lockstep::router {

struct GenerateContext {
  RequestRunner& runner;
  RouterMetrics& metrics;
  const ServingTokenizer& tokenizer;
  Clock& clock;
  Admission& admission;
  const RequestLimits& limits;
  const SamplingDefaults& sampling_defaults;
  const ThreadStarter& start_thread;
  absl::Duration keepalive_interval;
  absl::Duration write_timeout;  // the server's
};

// Runs the request of `exchange` to its end; `ticket` is its first choice's place.
void RunGenerateRequest(const GenerateContext& context, ApiKind kind,
                        const std::shared_ptr<async_http::HttpExchange>& exchange,
                        Admission::Ticket ticket);

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_HTTP_GENERATE_REQUEST_H_
