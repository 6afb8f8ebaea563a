#include "tests/e2e/migration_load.h"

#include <signal.h>

#include <iostream>
#include <optional>
#include <random>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "proto/router.pb.h"
#include "runtime/router/core/migration.h"
#include "runtime/router/http/openai_api.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/reference.h"

namespace lockstep::e2e {
namespace {

using nlohmann::json;

// A stop string of two printable ASCII characters from the last third of `text` ("" when
// there is none), so that a stream usually stops late, after the kill.
std::string PickStop(const std::string& text) {
  auto printable = [](char ch) { return ch > ' ' && ch < 0x7f; };
  for (size_t p = text.size() * 2 / 3; p + 1 < text.size(); ++p) {
    if (printable(text[p]) && printable(text[p + 1])) return text.substr(p, 2);
  }
  return "";
}

}  // namespace

struct MigrationLoad::Case {
  Kind kind = Kind::kGrpcGreedy;
  std::string text;  // the prompt
  std::vector<int32_t> prompt;
  int max_tokens = 0;
  float temperature = 0;
  float top_p = 1;
  uint64_t seed = 0;
  int n = 1;
  std::string stop;                          // kSseStop
  std::vector<std::vector<int32_t>> output;  // per choice, from the reference engine

  // One reference request per choice (choice i samples with ChoiceSeed, as the router).
  std::vector<ReferenceRequest> References() const {
    std::vector<ReferenceRequest> out;
    for (int i = 0; i < n; ++i) {
      ReferenceRequest r;
      r.prompt = prompt;
      r.sampling.max_tokens = max_tokens;
      r.sampling.temperature = temperature;
      r.sampling.top_p = top_p;
      r.sampling.seed = n > 1 ? router::ChoiceSeed(seed, i) : seed;
      r.sampling.ignore_eos = true;
      out.push_back(std::move(r));
    }
    return out;
  }
};

MigrationLoad::MigrationLoad(tok::ByteTokenizer tokenizer) : tokenizer_(std::move(tokenizer)) {}

MigrationLoad::~MigrationLoad() {
  for (std::thread& t : clients_) {
    if (t.joinable()) t.join();
  }
}

absl::StatusOr<std::unique_ptr<MigrationLoad>> MigrationLoad::Plan(const std::string& model_dir,
                                                                   int requests, uint64_t seed) {
  absl::StatusOr<tok::ByteTokenizer> tokenizer = tok::ByteTokenizer::LoadFromModelDir(model_dir);
  if (!tokenizer.ok()) return tokenizer.status();
  std::unique_ptr<MigrationLoad> load(new MigrationLoad(*std::move(tokenizer)));
  std::mt19937_64 rng(seed);
  std::vector<ReferenceRequest> refs;
  load->cases_.resize(requests);
  for (int i = 0; i < requests; ++i) {
    Case& c = load->cases_[i];
    c.kind = static_cast<Kind>(i % 4);
    for (int len = 8 + static_cast<int>(rng() % 32); len > 0; --len) {
      c.text.push_back(static_cast<char>('!' + rng() % 94));
    }
    c.prompt = load->tokenizer_.Encode(c.text);
    c.max_tokens = 24 + static_cast<int>(rng() % 17);
    c.seed = rng() >> 1;  // OpenAI seeds are int64
    if (c.kind != Kind::kGrpcGreedy) {
      c.temperature = 0.8f;
      c.top_p = 0.95f;
    }
    if (c.kind == Kind::kSseTwoChoices) c.n = 2;
    for (ReferenceRequest& r : c.References()) refs.push_back(std::move(r));
  }
  absl::StatusOr<std::vector<std::vector<int32_t>>> expected =
      ReferenceGenerate(model_dir, "", 0, refs);
  if (!expected.ok()) return expected.status();
  size_t next = 0;
  for (Case& c : load->cases_) {
    for (int k = 0; k < c.n; ++k) c.output.push_back((*expected)[next++]);
    if (c.kind == Kind::kSseStop) c.stop = PickStop(load->tokenizer_.Decode(c.output[0]));
  }
  return load;
}

int MigrationLoad::requests() const { return static_cast<int>(cases_.size()); }

void MigrationLoad::Start(const launcher::LocalDeployment& d) {
  for (int i = 0; i < requests(); ++i) clients_.emplace_back([this, &d, i] { Run(d, i); });
}

std::vector<std::string> MigrationLoad::Finish() {
  for (std::thread& t : clients_) t.join();
  clients_.clear();
  absl::MutexLock lock(&mu_);
  return failures_;
}

void MigrationLoad::Fail(int i, const std::string& what) {
  absl::MutexLock lock(&mu_);
  failures_.push_back(absl::StrCat("request ", i, ": ", what));
}

void MigrationLoad::Run(const launcher::LocalDeployment& d, int i) {
  const Kind kind = cases_[i].kind;
  if (kind == Kind::kGrpcGreedy || kind == Kind::kGrpcSampled) {
    RunGrpc(d, i);
  } else {
    RunSse(d, i);
  }
}

void MigrationLoad::RunGrpc(const launcher::LocalDeployment& d, int i) {
  const Case& c = cases_[i];
  v1::RouterGenerateRequest request;
  for (int32_t t : c.prompt) request.mutable_tokens()->add_ids(t);
  v1::SamplingParams& s = *request.mutable_sampling();
  s.set_max_tokens(c.max_tokens);
  s.set_temperature(c.temperature);
  s.set_top_p(c.top_p);
  s.set_seed(c.seed);
  s.set_ignore_eos(true);
  const launcher::GrpcResult r =
      d.Generate(request, absl::Seconds(60), [&](const v1::RouterGenerateResponse& response) {
        grpc_tokens_ += response.token_ids_size();
      });
  if (r.error_code != 0) return Fail(i, absl::StrCat("gRPC error: ", r.error_message));
  if (r.tokens != c.output[0]) return Fail(i, "tokens differ from the reference");
  if (r.prompt_tokens != static_cast<int64_t>(c.prompt.size()) ||
      r.completion_tokens != c.max_tokens) {
    return Fail(i, absl::StrCat("usage ", r.prompt_tokens, " + ", r.completion_tokens));
  }
}

void MigrationLoad::RunSse(const launcher::LocalDeployment& d, int i) {
  const Case& c = cases_[i];
  json body = {{"model", d.config().model.name},
               {"prompt", c.text},
               {"max_tokens", c.max_tokens},
               {"temperature", c.temperature},
               {"top_p", c.top_p},
               {"top_k", 0},
               {"seed", c.seed},
               {"n", c.n},
               {"ignore_eos", true},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (!c.stop.empty()) body["stop"] = json::array({c.stop});
  const auto [status, text] = d.Post("/v1/completions", body.dump(), absl::Seconds(60));
  if (status != 200) return Fail(i, absl::StrCat("HTTP ", status, ": ", text));
  const SseCompletion sse = ParseSseCompletion(text);
  if (!sse.error.is_null()) return Fail(i, absl::StrCat("stream error: ", sse.error.dump()));
  if (!sse.done) return Fail(i, "the stream did not end with [DONE]");
  int64_t completion = 0;
  for (int k = 0; k < c.n; ++k) {
    std::string want = tokenizer_.Decode(c.output[k]);
    if (!c.stop.empty()) want = want.substr(0, want.find(c.stop));
    const auto got = sse.text.find(k);
    if (got == sse.text.end() || got->second != want) {
      return Fail(i,
                  absl::StrCat("choice ", k, " text differs from the reference: got '",
                               got == sse.text.end() ? "" : got->second, "', want '", want, "'"));
    }
    completion += static_cast<int64_t>(c.output[k].size());
  }
  // A stop string ends a choice wherever the router noticed it: no exact count.
  if (sse.usage.value("prompt_tokens", -1) != static_cast<int64_t>(c.prompt.size()) ||
      (c.stop.empty() && sse.usage.value("completion_tokens", -1) != completion)) {
    return Fail(i, absl::StrCat("usage ", sse.usage.dump()));
  }
}

LoggedMigrations ParseMigrations(const std::string& router_log) {
  LoggedMigrations logged;
  absl::flat_hash_set<uint64_t> requests;
  for (absl::string_view line : absl::StrSplit(router_log, '\n')) {
    const std::optional<router::MigrationRecord> record =
        router::ParseMigrationLogLine(std::string_view(line.data(), line.size()));
    if (!record.has_value()) continue;
    ++logged.migrations;
    if (record->delivered > 0) ++logged.mid_stream;
    requests.insert(record->request_id);
  }
  logged.requests = static_cast<int>(requests.size());
  return logged;
}

void KillUnderLoad(launcher::LocalDeployment& d, MigrationLoad& load,
                   const std::string& busy_instance, int64_t min_load, const std::string& process) {
  load.Start(d);
  const bool streaming = d.WaitFor(
      [&] {
        return load.grpc_tokens() >= 4 * load.requests() / 2 && d.LoadOf(busy_instance) >= min_load;
      },
      absl::Seconds(60));
  const pid_t pid = d.PidOf(process);
  const bool killed = streaming && pid > 0 && kill(pid, SIGKILL) == 0;
  const std::vector<std::string> failures = load.Finish();
  ASSERT_TRUE(killed) << "could not kill " << process << " in mid-stream\n" << LogTails(d);
  EXPECT_TRUE(failures.empty()) << failures.size() << " failures:\n"
                                << absl::StrJoin(failures, "\n") << "\n"
                                << LogTails(d);
  ExpectMigrationsCompleted(d);
}

void ExpectMigrationsCompleted(const launcher::LocalDeployment& d) {
  const double migrations = RouterMetric(d, "lockstep_router_migrations_total");
  const double completed = RouterMetric(d, "lockstep_router_migrated_requests_completed_total");
  const double resumed = RouterMetric(d, "lockstep_router_migration_latency_seconds_count");
  const LoggedMigrations logged = ParseMigrations(d.LogOf("router"));
  std::cerr << "migrations " << migrations << " (" << logged.mid_stream
            << " after tokens were delivered) of " << logged.requests
            << " requests, migrated requests completed " << completed << ", resumed streams "
            << resumed << "\n";
  EXPECT_GE(migrations, 1) << "the kill caught no request in flight";
  EXPECT_EQ(logged.migrations, migrations) << "the log and the counter disagree";
  // A request may migrate more than once (e.g. its retry lands on the dying instance
  // before the router knows): count requests, not migrations.
  EXPECT_EQ(completed, logged.requests) << "a migrated request did not complete";
  EXPECT_GE(resumed, 1) << "no migrated request received a token after the failure";
  EXPECT_GE(logged.mid_stream, 1) << "every migration began a stream afresh";
}

int RouterUnhealthyRecords(const launcher::LocalDeployment& d, const std::string& instance) {
  // The line router/health_monitor.cc logs: "instance NAME is unhealthy (REASON); ...".
  const std::string record = absl::StrCat("instance ", instance, " is unhealthy (");
  int records = 0;
  for (absl::string_view line : absl::StrSplit(d.LogOf("router"), '\n')) {
    if (absl::StrContains(line, record)) ++records;
  }
  return records;
}

void ExpectRouterTookOut(launcher::LocalDeployment& d, const std::string& instance) {
  EXPECT_TRUE(
      d.WaitFor([&] { return RouterUnhealthyRecords(d, instance) >= 1; }, absl::Seconds(30)))
      << "the router never took " << instance << " out of rotation\n"
      << LogTails(d);
}

}  // namespace lockstep::e2e
