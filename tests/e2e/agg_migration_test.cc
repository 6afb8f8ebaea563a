// Request migration, aggregated serving: two aggregated DEP2 instances serve 64
// streaming requests — gRPC greedy, gRPC seeded sampling, HTTP SSE with a stop string,
// HTTP SSE with n = 2 — and one rank of agg0 is killed (SIGKILL) while they stream.
// No client sees an error, and every output equals, token for token (the text for
// HTTP), what the in-process engine produces for the same request without any
// failure; usage counts the prompt once and every generated token once. The router
// counts the migrations and the migrated requests that completed.
#include <signal.h>

#include <atomic>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "common/testing/seed.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "proto/router.pb.h"
#include "runtime/launcher/local_deployment.h"
#include "runtime/router/openai_api.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/reference.h"
#include "tokenizer/byte_tokenizer.h"

namespace lockstep::e2e {
namespace {

using nlohmann::json;

constexpr int kRequests = 64;

std::string Yaml(const std::string& model_dir) {
  std::string instances;
  for (const char* name : {"agg0", "agg1"}) {
    absl::StrAppend(&instances, "  - name: ", name, R"(
    role: aggregated
    world_size: 2
    engine: cpu
    executor: {max_batch_size: 32, max_num_tokens: 1024, max_num_active_requests: 64,
               chunk_size: 64, step_timeout_ms: 3000}
    kv: {tokens_per_block: 16, num_blocks: 512}
)",
                    CommSettings(kE2eComm));
  }
  return absl::StrCat(R"(model:
  name: tiny-moe
  path: )",
                      model_dir, R"(
router:
  policy: round_robin
  heartbeat_interval_ms: 200
  heartbeat_timeout_ms: 1500
  health_check_interval_ms: 200
instances:
)",
                      instances);
}

enum class Kind { kGrpcGreedy, kGrpcSampled, kSseStop, kSseTwoChoices };

struct Case {
  Kind kind;
  std::string text;  // the prompt
  std::vector<int32_t> prompt;
  int max_tokens = 0;
  float temperature = 0;
  float top_p = 1;
  uint64_t seed = 0;
  int n = 1;
  std::string stop;                          // kSseStop
  std::vector<std::vector<int32_t>> output;  // per choice, from the reference engine
};

// The reference requests of `c`, one per choice (choice i samples with ChoiceSeed).
std::vector<ReferenceRequest> ReferenceRequests(const Case& c) {
  std::vector<ReferenceRequest> out;
  for (int i = 0; i < c.n; ++i) {
    ReferenceRequest r;
    r.prompt = c.prompt;
    r.sampling.max_tokens = c.max_tokens;
    r.sampling.temperature = c.temperature;
    r.sampling.top_p = c.top_p;
    r.sampling.seed = c.n > 1 ? router::ChoiceSeed(c.seed, i) : c.seed;
    r.sampling.ignore_eos = true;
    out.push_back(std::move(r));
  }
  return out;
}

// A stop string of two printable ASCII characters from the last third of `text` ("" when
// there is none), so that the stream usually stops late, after the kill.
std::string PickStop(const std::string& text) {
  auto printable = [](char ch) { return ch > ' ' && ch < 0x7f; };
  for (size_t p = text.size() * 2 / 3; p + 1 < text.size(); ++p) {
    if (printable(text[p]) && printable(text[p + 1])) return text.substr(p, 2);
  }
  return "";
}

// How many requests the router's log shows migrating after delivering tokens ("request
// R failed on I (reason) after N tokens; continues as ..." with N > 0).
int MigratedMidStream(const std::string& router_log) {
  int n = 0;
  for (absl::string_view line : absl::StrSplit(router_log, '\n')) {
    if (!absl::StrContains(line, "; continues as ")) continue;
    const size_t after = line.find(") after ");
    int tokens = 0;
    if (after != absl::string_view::npos &&
        absl::SimpleAtoi(line.substr(after + 8, line.find(' ', after + 8) - after - 8), &tokens) &&
        tokens > 0) {
      ++n;
    }
  }
  return n;
}

TEST(AggMigrationTest, KilledRankLosesNoRequestAndEveryOutputIsTheReference) {
  const uint64_t seed = lockstep::testing::TestSeed();
  SCOPED_TRACE(lockstep::testing::SeedTrace(seed));
  const std::string tmp = TestTmpDir();
  const std::string model = tmp + "/models/tiny-moe";
  ASSERT_TRUE(EnsureTinyMoe(model).ok());
  absl::StatusOr<tok::ByteTokenizer> tokenizer = tok::ByteTokenizer::LoadFromModelDir(model);
  ASSERT_TRUE(tokenizer.ok());

  std::mt19937_64 rng(seed);
  std::vector<Case> cases(kRequests);
  std::vector<ReferenceRequest> refs;
  for (int i = 0; i < kRequests; ++i) {
    Case& c = cases[i];
    c.kind = static_cast<Kind>(i % 4);
    for (int len = 8 + static_cast<int>(rng() % 32); len > 0; --len) {
      c.text.push_back(static_cast<char>('!' + rng() % 94));
    }
    c.prompt = tokenizer->Encode(c.text);
    c.max_tokens = 24 + static_cast<int>(rng() % 17);
    c.seed = rng() >> 1;  // OpenAI seeds are int64
    if (c.kind != Kind::kGrpcGreedy) {
      c.temperature = 0.8f;
      c.top_p = 0.95f;
    }
    if (c.kind == Kind::kSseTwoChoices) c.n = 2;
    for (ReferenceRequest& r : ReferenceRequests(c)) refs.push_back(std::move(r));
  }
  absl::StatusOr<std::vector<std::vector<int32_t>>> expected =
      ReferenceGenerate(model, "", 0, refs);
  ASSERT_TRUE(expected.ok()) << expected.status();
  for (size_t i = 0, next = 0; i < cases.size(); ++i) {
    for (int k = 0; k < cases[i].n; ++k) cases[i].output.push_back((*expected)[next++]);
    if (cases[i].kind == Kind::kSseStop) {
      cases[i].stop = PickStop(tokenizer->Decode(cases[i].output[0]));
    }
  }

  absl::StatusOr<std::unique_ptr<launcher::LocalDeployment>> started =
      launcher::LocalDeployment::Start(Yaml(model), tmp + "/run", LockstepBinary(),
                                       absl::Seconds(120));
  ASSERT_TRUE(started.ok()) << started.status();
  launcher::LocalDeployment& d = **started;

  absl::Mutex mu;
  std::vector<std::string> failures;
  auto fail = [&](int i, const std::string& what) {
    absl::MutexLock lock(&mu);
    failures.push_back(absl::StrCat("request ", i, ": ", what));
  };
  std::atomic<int64_t> grpc_tokens{0};  // streamed to the gRPC clients so far
  auto run = [&](int i) {
    const Case& c = cases[i];
    if (c.kind == Kind::kGrpcGreedy || c.kind == Kind::kGrpcSampled) {
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
            grpc_tokens += response.token_ids_size();
          });
      if (r.error_code != 0) return fail(i, absl::StrCat("gRPC error: ", r.error_message));
      if (r.tokens != c.output[0]) return fail(i, "tokens differ from the reference");
      if (r.prompt_tokens != static_cast<int64_t>(c.prompt.size()) ||
          r.completion_tokens != c.max_tokens) {
        return fail(i, absl::StrCat("usage ", r.prompt_tokens, " + ", r.completion_tokens));
      }
      return;
    }
    json body = {{"model", "tiny-moe"},     {"prompt", c.text},          {"max_tokens", c.max_tokens},
                 {"temperature", c.temperature}, {"top_p", c.top_p},    {"top_k", 0},
                 {"seed", c.seed},          {"n", c.n},                  {"ignore_eos", true},
                 {"stream", true},          {"stream_options", {{"include_usage", true}}}};
    if (!c.stop.empty()) body["stop"] = json::array({c.stop});
    const auto [status, text] = d.Post("/v1/completions", body.dump(), absl::Seconds(60));
    if (status != 200) return fail(i, absl::StrCat("HTTP ", status, ": ", text));
    const SseCompletion sse = ParseSseCompletion(text);
    if (!sse.error.is_null()) return fail(i, absl::StrCat("stream error: ", sse.error.dump()));
    if (!sse.done) return fail(i, "the stream did not end with [DONE]");
    int64_t completion = 0;
    for (int k = 0; k < c.n; ++k) {
      std::string want = tokenizer->Decode(c.output[k]);
      if (!c.stop.empty()) want = want.substr(0, want.find(c.stop));
      const auto got = sse.text.find(k);
      if (got == sse.text.end() || got->second != want) {
        return fail(i, absl::StrCat("choice ", k, " text differs from the reference: got '",
                                    got == sse.text.end() ? "" : got->second, "', want '", want,
                                    "'"));
      }
      completion += static_cast<int64_t>(c.output[k].size());
    }
    if (sse.usage.value("prompt_tokens", -1) != static_cast<int64_t>(c.prompt.size()) ||
        (c.stop.empty() && sse.usage.value("completion_tokens", -1) != completion)) {
      return fail(i, absl::StrCat("usage ", sse.usage.dump()));
    }
  };
  std::vector<std::thread> clients;
  for (int i = 0; i < kRequests; ++i) clients.emplace_back(run, i);

  // Once both instances stream (a few tokens per gRPC request on average), kill rank 1
  // of agg0: its leader fails the requests it holds, the router resumes them on agg1.
  ASSERT_TRUE(d.WaitFor(
      [&] { return grpc_tokens.load() >= kRequests / 2 * 4 && d.LoadOf("agg0") >= 8; },
      absl::Seconds(60)))
      << LogTails(d);
  const pid_t rank1 = d.PidOf("agg0/rank1");
  ASSERT_GT(rank1, 0);
  ASSERT_EQ(kill(rank1, SIGKILL), 0);
  for (std::thread& t : clients) t.join();

  EXPECT_TRUE(failures.empty()) << failures.size() << " failures:\n"
                                << absl::StrJoin(failures, "\n") << "\n"
                                << LogTails(d);
  const double migrations = RouterMetric(d, "lockstep_router_migrations_total");
  const double completed = RouterMetric(d, "lockstep_router_migrated_requests_completed_total");
  const double resumed = RouterMetric(d, "lockstep_router_migration_latency_seconds_count");
  const int mid_stream = MigratedMidStream(d.LogOf("router"));
  std::cerr << "migrations " << migrations << " (" << mid_stream
            << " after tokens were delivered), migrated requests completed " << completed
            << ", resumed streams " << resumed << "\n";
  EXPECT_GE(migrations, 1) << "the kill caught no request in flight";
  EXPECT_EQ(completed, migrations) << "every request migrated once and completed";
  EXPECT_GE(resumed, 1) << "no migrated request received a token after the failure";
  // The kill caught streams mid-way: some continued after tokens already delivered.
  EXPECT_GE(mid_stream, 1) << "every migration began a stream afresh";
  EXPECT_NE(d.InstanceState("agg0"), "healthy");
  EXPECT_EQ(d.InstanceState("agg1"), "healthy");
}

}  // namespace
}  // namespace lockstep::e2e
