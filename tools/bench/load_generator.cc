#include "tools/bench/load_generator.h"

#include <atomic>
#include <cstdio>
#include <memory>
#include <random>
#include <thread>

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "runtime/router/http/router_http_client.h"
#include "tools/bench/http_error.h"

namespace lockstep::bench {
namespace {

using nlohmann::json;

struct Planned {
  std::string prompt;
  int64_t max_tokens = 0;
  uint64_t seed = 0;
};

std::vector<Planned> Plan(const LoadOptions& o) {
  std::mt19937_64 rng(o.seed);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return lo +
           static_cast<int64_t>(rng() % static_cast<uint64_t>(std::max<int64_t>(1, hi - lo + 1)));
  };
  std::vector<Planned> out;
  for (int64_t i = 0; i < o.requests; ++i) {
    Planned p;
    const int64_t n = uniform(o.min_prompt_bytes, o.max_prompt_bytes);
    if (o.workload == LoadOptions::Workload::kRepetitive) {
      std::string span;
      for (int64_t c = uniform(8, 24); c > 0; --c) span.push_back(static_cast<char>('a' + rng() % 26));
      while (static_cast<int64_t>(p.prompt.size()) < n) p.prompt += span;
      p.prompt.resize(static_cast<size_t>(n));
    } else {
      for (int64_t c = 0; c < n; ++c) p.prompt.push_back(static_cast<char>('a' + rng() % 26));
    }
    p.max_tokens = uniform(o.min_output_tokens, o.max_output_tokens);
    p.seed = rng();
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace

absl::StatusOr<LoadOptions::Workload> ParseWorkload(absl::string_view name) {
  if (name == "default") return LoadOptions::Workload::kDefault;
  if (name == "repetitive") return LoadOptions::Workload::kRepetitive;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown workload '", name, "' (default or repetitive)"));
}

const char* WorkloadName(LoadOptions::Workload workload) {
  return workload == LoadOptions::Workload::kRepetitive ? "repetitive" : "default";
}

namespace {

// One streaming completion; parses the server-sent events as they arrive.
RequestOutcome RunOne(const LoadOptions& o, const Planned& p) {
  RequestOutcome out;
  absl::StatusOr<std::unique_ptr<httplib::Client>> made =
      router::NewRouterHttpClient(o.http_address, o.ca_file);
  if (!made.ok()) {
    out.error = std::string(made.status().message());
    return out;
  }
  httplib::Client& client = **made;
  client.set_connection_timeout(absl::ToChronoMicroseconds(o.connect_timeout));
  client.set_read_timeout(absl::ToChronoMicroseconds(o.request_timeout));
  client.set_write_timeout(absl::ToChronoMicroseconds(o.request_timeout));
  json body = {{"model", o.model},
                     {"prompt", p.prompt},
                     {"max_tokens", p.max_tokens},
                     {"temperature", 0},
                     {"seed", p.seed},
                     {"ignore_eos", true},
                     {"stream", true},
                     {"stream_options", {{"include_usage", true}}}};
  if (o.record_token_times) body["logprobs"] = 0;
  httplib::Headers headers;
  if (!o.api_key.empty()) headers.emplace("Authorization", "Bearer " + o.api_key);
  const absl::Time start = absl::Now();
  absl::Time last_byte = start;  // a read error this long after it was a timeout
  std::string pending;
  bool first = true;
  bool done = false;
  auto on_line = [&](absl::string_view line) {
    if (!absl::ConsumePrefix(&line, "data: ")) return;
    if (line == "[DONE]") {
      done = true;
      return;
    }
    const json event = json::parse(line, nullptr, false);
    if (!event.is_object()) return;
    if (event.contains("error")) {
      out.error = event["error"].value("message", "error event");
      return;
    }
    if (event.contains("usage") && event["usage"].is_object()) {
      out.prompt_tokens = event["usage"].value("prompt_tokens", 0);
      out.output_tokens = event["usage"].value("completion_tokens", 0);
    }
    if (out.id.empty() && event.contains("id")) out.id = event.value("id", "");
    if (!event.contains("choices") || event["choices"].empty()) return;
    const json& choice = event["choices"][0];
    if (first && !choice.value("text", "").empty()) {
      out.ttft = absl::Now() - start;
      first = false;
    }
    if (o.record_token_times && choice.contains("logprobs") && choice["logprobs"].is_object()) {
      const size_t n = choice["logprobs"].value("tokens", json::array()).size();
      out.token_times.insert(out.token_times.end(), n, absl::Now());
      if (o.tokens_received != nullptr) *o.tokens_received += static_cast<int64_t>(n);
    }
  };
  httplib::Request request;
  request.method = "POST";
  request.path = "/v1/completions";
  request.headers = headers;
  request.body = body.dump();
  request.set_header("Content-Type", "application/json");
  request.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    last_byte = absl::Now();
    pending.append(data, n);
    size_t pos;
    while ((pos = pending.find('\n')) != std::string::npos) {
      on_line(absl::string_view(pending).substr(0, pos));
      pending.erase(0, pos + 1);
    }
    return true;
  };
  httplib::Response response;
  httplib::Error error = httplib::Error::Success;
  const bool sent = client.send(request, response, error);
  out.latency = absl::Now() - start;
  if (!sent) {
    out.error =
        DescribeHttpError(error, absl::Now() - last_byte, o.request_timeout, o.connect_timeout);
  } else if (response.status != 200) {
    out.error = absl::StrCat("HTTP ", response.status, " ", pending.substr(0, 200));
  } else if (out.error.empty() && !done) {
    out.error = "the stream ended without [DONE]";
  }
  out.ok = out.error.empty() && out.output_tokens > 0;
  if (out.error.empty() && !out.ok) out.error = "no tokens";
  if (first) out.ttft = out.latency;
  return out;
}

void DrawProgress(int64_t done, int64_t total, int64_t failed, absl::Duration elapsed) {
  const int width = 30;
  const int filled = total > 0 ? static_cast<int>(width * done / total) : width;
  std::fprintf(stderr, "\r  [%s%s] %lld/%lld requests, %lld failed, %.1f s ",
               std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(),
               static_cast<long long>(done), static_cast<long long>(total),
               static_cast<long long>(failed), absl::ToDoubleSeconds(elapsed));
  std::fflush(stderr);
}

}  // namespace

LoadResult RunLoad(const LoadOptions& options) {
  const std::vector<Planned> plan = Plan(options);
  LoadResult result;
  result.outcomes.resize(plan.size());
  std::atomic<int64_t> next{0}, done{0}, failed{0};
  const absl::Time start = absl::Now();
  std::vector<std::thread> clients;
  const int64_t threads =
      std::max<int64_t>(1, std::min<int64_t>(options.concurrency, options.requests));
  for (int64_t t = 0; t < threads; ++t) {
    clients.emplace_back([&] {
      for (int64_t i = next++; i < static_cast<int64_t>(plan.size()); i = next++) {
        result.outcomes[i] = RunOne(options, plan[i]);
        if (!result.outcomes[i].ok) ++failed;
        ++done;
      }
    });
  }
  if (options.progress) {
    // On a terminal the bar redraws in place; in a log, a line per tenth of the work.
    const bool tty = isatty(STDERR_FILENO) != 0;
    int64_t shown = -1;
    while (done.load() < static_cast<int64_t>(plan.size())) {
      const int64_t tenth = 10 * done.load() / static_cast<int64_t>(plan.size());
      if (tty || tenth != shown) {
        DrawProgress(done.load(), static_cast<int64_t>(plan.size()), failed.load(),
                     absl::Now() - start);
        if (!tty) std::fprintf(stderr, "\n");
        shown = tenth;
      }
      absl::SleepFor(absl::Milliseconds(200));
    }
  }
  for (std::thread& t : clients) t.join();
  result.wall = absl::Now() - start;
  if (options.progress) {
    DrawProgress(done.load(), static_cast<int64_t>(plan.size()), failed.load(), result.wall);
    std::fprintf(stderr, "\n");
  }
  return result;
}

}  // namespace lockstep::bench
