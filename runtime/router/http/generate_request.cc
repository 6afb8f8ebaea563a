#include "runtime/router/http/generate_request.h"

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "runtime/router/http/exchange_sinks.h"

namespace lockstep::router {
namespace {

using nlohmann::json;

uint64_t RandomSeed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) | device();
}

// The n choices of one request: what each runs and writes, how it ended, the threads
// that run them and the admission places they hold.
struct Choices {
  std::vector<RouterRequest> requests;
  std::vector<uint64_t> ids;
  std::vector<std::unique_ptr<OpenAiResponseWriter>> writers;
  std::vector<RequestResult> results;
  std::unique_ptr<ChoiceThreads> threads;
  Admission::Ticket ticket;         // the first choice's place
  Admission::Ticket extra_tickets;  // the other choices' places
};

// A one-choice request run without a thread (RequestRunner::Start): it owns what the
// runner uses until its end, and answers the exchange there.
struct AsyncChoice {
  GenerateContext context;
  std::shared_ptr<async_http::HttpExchange> exchange;
  RouterRequest request;
  std::unique_ptr<OpenAiResponseWriter> writer;
  Admission::Ticket ticket;
  std::unique_ptr<SseChannel> channel;  // streaming only
  std::unique_ptr<TokenSink> sink;
  std::shared_ptr<void> tracked;  // counts the request as running (the frontend's Stop)

  // On whichever thread the runner ends it. The place is given back before the last
  // bytes are queued.
  void End(const RequestResult& result) {
    ticket.reset();
    if (channel == nullptr) {
      if (!result.status.ok()) return SendError(*exchange, result.status);
      std::vector<json> bodies = {writer->FinishedChoice(result)};
      exchange->Respond(200, "application/json", writer->Body(bodies, {result}));
      return;
    }
    if (result.status.ok()) {
      channel->Queue(writer->StreamFinish(result));
      channel->Queue(writer->StreamTail({result}));
    } else {
      channel->Queue(ErrorEvent(result.status));
    }
    exchange->End();
  }
};

// Runs the one choice of a parsed request without a thread.
void StartAsyncChoice(const GenerateContext& context, const OpenAiRequest& parsed,
                      const std::shared_ptr<async_http::HttpExchange>& exchange,
                      Admission::Ticket ticket, ApiKind kind) {
  RequestRunner& runner = context.runner;
  auto choice = std::make_shared<AsyncChoice>(AsyncChoice{.context = context,
                                                          .exchange = exchange,
                                                          .request = parsed.request,
                                                          .ticket = std::move(ticket),
                                                          .tracked = context.track()});
  choice->request.sampling.seed = ChoiceSeed(parsed.request.sampling.seed, 0);
  const uint64_t id = runner.NewRequestId();
  choice->writer = std::make_unique<OpenAiResponseWriter>(
      parsed, fmt::format("{}-{}", kind == ApiKind::kChat ? "chatcmpl" : "cmpl", id),
      absl::ToUnixSeconds(context.clock.Now()), context.tokenizer, 0);
  if (!parsed.stream) {
    choice->sink = std::make_unique<CollectSink>(*choice->writer, *exchange);
  } else {
    exchange->StartStream(200, "text/event-stream");
    choice->channel = std::make_unique<SseChannel>(*exchange, context.clock,
                                                   context.keepalive_interval,
                                                   context.write_timeout);
    choice->sink = std::make_unique<SseSink>(*choice->channel, *choice->writer);
  }
  runner.Start(choice->request, id, *choice->sink,
               [choice](RequestResult result) { choice->End(result); });
}

// The n > 1 choices of a parsed request, on a request thread.
void RunChoices(const GenerateContext& context, ApiKind kind,
                const std::shared_ptr<async_http::HttpExchange>& exchange, OpenAiRequest& request,
                Choices& choices);

}  // namespace

void RunGenerateRequest(const GenerateContext& context, ApiKind kind,
                        const std::shared_ptr<async_http::HttpExchange>& exchange,
                        Admission::Ticket ticket) {
  async_http::HttpExchange& ex = *exchange;
  Choices choices;
  choices.ticket = std::move(ticket);
  // The places are given back before the last bytes are queued: a client that sends
  // its next request as soon as it has the answer finds them free.
  const auto release = [&choices] {
    choices.ticket.reset();
    choices.extra_tickets.reset();
  };
  Admission& admission = context.admission;
  absl::StatusOr<OpenAiRequest> parsed =
      ParseOpenAiRequest(kind, ex.request().body, context.tokenizer, context.sampling_defaults,
                         RequestJsonBounds(context.limits));
  absl::Status status =
      parsed.ok() ? ValidateRouterRequest(parsed->request, context.limits) : parsed.status();
  if (status.ok() && parsed->n > 1 && admission.max_in_flight() > 0 &&
      parsed->n > admission.max_in_flight()) {
    status = absl::InvalidArgumentError(
        fmt::format("n = {} choices: each counts as a request, and {} allows {} at once", parsed->n,
                    admission.limit_name(), admission.max_in_flight()));
  }
  if (status.ok() && parsed->n > 1) {
    choices.extra_tickets = admission.TryAdmit(parsed->n - 1);
    if (choices.extra_tickets == nullptr) {
      const absl::Status refused = admission.RefusalStatus();
      context.metrics.Refused(kAdmissionReason);
      context.metrics.RequestFinished(refused);
      release();
      SendError(ex, refused);
      return;
    }
  }
  if (status.ok()) status = context.runner.CheckRoute(context.limits.model);
  if (status.ok() && parsed->n == 1) {
    if (!parsed->has_seed) parsed->request.sampling.seed = RandomSeed();
    return StartAsyncChoice(context, *parsed, exchange, std::move(choices.ticket), kind);
  }
  if (!status.ok()) {
    context.metrics.RequestFinished(status);
    release();
    SendError(ex, status);
    return;
  }
  // n choices hold threads (choice_threads.h): the rest runs on a request thread.
  auto moved = std::make_shared<std::pair<OpenAiRequest, Choices>>(*std::move(parsed),
                                                                   std::move(choices));
  status = context.run_on_thread([&context, kind, exchange, moved] {
    RunChoices(context, kind, exchange, moved->first, moved->second);
  });
  if (!status.ok()) {
    context.metrics.RequestFinished(status);
    moved->second.ticket.reset();
    moved->second.extra_tickets.reset();
    SendError(ex, status);
  }
}

namespace {

void RunChoices(const GenerateContext& context, ApiKind kind,
                const std::shared_ptr<async_http::HttpExchange>& exchange, OpenAiRequest& openai,
                Choices& choices) {
  async_http::HttpExchange& ex = *exchange;
  OpenAiRequest* const parsed = &openai;
  const auto release = [&choices] {
    choices.ticket.reset();
    choices.extra_tickets.reset();
  };
  absl::Status status;
  {
    // Every other choice's thread starts before any choice runs (a refusal is a 503).
    absl::StatusOr<std::unique_ptr<ChoiceThreads>> threads =
        ChoiceThreads::Start(parsed->n, context.start_thread);
    if (threads.ok()) choices.threads = *std::move(threads);
    status = threads.status();
  }
  if (!status.ok()) {
    context.metrics.RequestFinished(status);
    release();
    SendError(ex, status);
    return;
  }
  if (!parsed->has_seed) parsed->request.sampling.seed = RandomSeed();
  // One worker request per choice, each with its own id and seed.
  RequestRunner& runner = context.runner;
  const uint64_t first_id = runner.NewRequestId();
  const std::string id =
      fmt::format("{}-{}", kind == ApiKind::kChat ? "chatcmpl" : "cmpl", first_id);
  const int64_t created = absl::ToUnixSeconds(context.clock.Now());
  for (int32_t i = 0; i < parsed->n; ++i) {
    RouterRequest request = parsed->request;
    request.sampling.seed = ChoiceSeed(parsed->request.sampling.seed, i);
    choices.requests.push_back(std::move(request));
    choices.ids.push_back(i == 0 ? first_id : runner.NewRequestId());
    choices.writers.push_back(
        std::make_unique<OpenAiResponseWriter>(*parsed, id, created, context.tokenizer, i));
  }
  choices.results.resize(parsed->n);
  if (!parsed->stream) {
    std::vector<json> bodies(parsed->n);
    choices.threads->Run([&](int32_t i) {
      CollectSink sink(*choices.writers[i], ex);
      choices.results[i] = runner.Run(choices.requests[i], choices.ids[i], sink);
      if (choices.results[i].status.ok()) {
        bodies[i] = choices.writers[i]->FinishedChoice(choices.results[i]);
      }
    });
    release();
    for (const RequestResult& result : choices.results) {
      if (!result.status.ok()) {
        SendError(ex, result.status);
        return;
      }
    }
    ex.Respond(200, "application/json", choices.writers[0]->Body(bodies, choices.results));
    return;
  }
  ex.StartStream(200, "text/event-stream");
  SseChannel channel(ex, context.clock, context.keepalive_interval, context.write_timeout);
  choices.threads->Run([&](int32_t i) {
    SseSink sink(channel, *choices.writers[i]);
    RequestResult& result = choices.results[i];
    result = runner.Run(choices.requests[i], choices.ids[i], sink);
    if (result.status.ok()) channel.Write(choices.writers[i]->StreamFinish(result));
  });
  absl::Status failure;
  for (const RequestResult& result : choices.results) {
    if (failure.ok()) failure = result.status;
  }
  release();
  channel.Write(failure.ok() ? choices.writers[0]->StreamTail(choices.results)
                             : ErrorEvent(failure));
  ex.End();
}

}  // namespace
}  // namespace lockstep::router
