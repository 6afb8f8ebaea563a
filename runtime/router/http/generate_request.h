// One POST /v1/completions or /v1/chat/completions on the router's HTTP surface, once
// the I/O thread admitted it: parses and checks the body (on one of the frontend's
// parse threads), runs its n choices as n worker requests (each holds an admission
// place; one choice runs on no thread of its own, n > 1 on request threads,
// choice_threads.h) and answers the exchange: one JSON body, or server-sent
// events written as tokens arrive (exchange_sinks.h). A refusal or a bad request is
// answered before any choice runs; a stream that failed after it began ends with an
// error event.
//
// Thread safety: Run may be called on many threads at once; the references are shared
// thread-safe objects that outlive it.
#ifndef LOCKSTEP_RUNTIME_ROUTER_HTTP_GENERATE_REQUEST_H_
#define LOCKSTEP_RUNTIME_ROUTER_HTTP_GENERATE_REQUEST_H_

#include <functional>
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
  // Runs a body on a request thread (RequestThreads::Run).
  std::function<absl::Status(std::function<void()>)> run_on_thread;
  // Counts a request running without a thread (RequestThreads::Track).
  std::function<std::shared_ptr<void>()> track;
};

// Parses and checks the request of `exchange` and runs it to its end: one choice without
// a thread (RequestRunner::Start: the call returns once it started), n > 1 choices on
// request threads. `ticket` is its first choice's place.
void RunGenerateRequest(const GenerateContext& context, ApiKind kind,
                        const std::shared_ptr<async_http::HttpExchange>& exchange,
                        Admission::Ticket ticket);

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_HTTP_GENERATE_REQUEST_H_
