#include "tools/bench/failure_injection.h"

#include <signal.h>

#include <algorithm>
#include <optional>
#include <map>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tools/bench/bench_report.h"

namespace lockstep::bench {
namespace {

using nlohmann::json;

// The router request id of a response id ("cmpl-17" -> 17); nullopt otherwise.
std::optional<uint64_t> RequestIdOf(absl::string_view response_id) {
  const size_t dash = response_id.rfind('-');
  uint64_t id = 0;
  if (dash == absl::string_view::npos || !absl::SimpleAtoi(response_id.substr(dash + 1), &id)) {
    return std::nullopt;
  }
  return id;
}

// The sum of the samples of `name` (any labels) in Prometheus text, by label text.
std::map<std::string, double> Samples(absl::string_view text, absl::string_view name) {
  std::map<std::string, double> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::ConsumePrefix(&line, name) || line.empty() || (line[0] != ' ' && line[0] != '{')) {
      continue;
    }
    const size_t space = line.rfind(' ');
    double value = 0;
    if (space == absl::string_view::npos || !absl::SimpleAtod(line.substr(space + 1), &value)) {
      continue;
    }
    out[std::string(absl::StripSuffix(line.substr(0, space), " "))] += value;
  }
  return out;
}

double Total(const std::map<std::string, double>& samples) {
  double sum = 0;
  for (const auto& [labels, value] : samples) sum += value;
  return sum;
}

json Figures(std::vector<double> ms) {
  const Percentiles p = Compute(ms);
  const double max = ms.empty() ? 0 : *std::max_element(ms.begin(), ms.end());
  return {{"requests", ms.size()}, {"p50", p.p50}, {"p99", p.p99}, {"max", max}};
}

}  // namespace

FailureInjector::FailureInjector(const launcher::LocalDeployment& d, KillPlan plan,
                                 const std::atomic<int64_t>& tokens, absl::Duration timeout)
    : plan_(std::move(plan)) {
  const pid_t pid = d.PidOf(plan_.process);
  if (pid <= 0) {
    killed_at_ = absl::NotFoundError(
        absl::StrCat("--kill: the deployment has no running process ", plan_.process));
    return;
  }
  thread_ = std::thread([this, pid, &tokens, timeout] {
    const absl::Time give_up = absl::Now() + timeout;
    while (tokens.load() < plan_.after_tokens && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    if (tokens.load() < plan_.after_tokens) {
      killed_at_ = absl::DeadlineExceededError(
          absl::StrCat("--kill: the load never reached ", plan_.after_tokens, " tokens"));
      return;
    }
    const absl::Time now = absl::Now();
    killed_at_ = kill(pid, SIGKILL) == 0
                     ? absl::StatusOr<absl::Time>(now)
                     : absl::InternalError(absl::StrCat("--kill: kill(", pid, ") failed"));
  });
}

FailureInjector::~FailureInjector() {
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<absl::Time> FailureInjector::Finish() {
  if (thread_.joinable()) thread_.join();
  return killed_at_;
}

std::vector<router::MigrationRecord> MigrationsInLog(absl::string_view router_log) {
  std::vector<router::MigrationRecord> out;
  for (absl::string_view line : absl::StrSplit(router_log, '\n')) {
    std::optional<router::MigrationRecord> r =
        router::ParseMigrationLogLine(std::string_view(line.data(), line.size()));
    if (r.has_value()) out.push_back(*std::move(r));
  }
  return out;
}

json FailureReport(const KillPlan& plan, absl::Time killed_at, const LoadResult& result,
                   const std::vector<router::MigrationRecord>& migrations,
                   absl::string_view router_metrics) {
  // The first failure of each migrated request: how many tokens it had delivered.
  std::map<uint64_t, int64_t> delivered;
  for (const router::MigrationRecord& m : migrations) delivered.emplace(m.request_id, m.delivered);
  // From the kill to the next token: of each migrated request, its continuation's first
  // token; of each request that was streaming elsewhere (a token before the kill and
  // one after), its first token after the kill.
  std::vector<double> migrated_ms, others_ms;
  int64_t migrated_failed = 0;
  for (const RequestOutcome& o : result.outcomes) {
    const std::optional<uint64_t> id = RequestIdOf(o.id);
    const auto m = id.has_value() ? delivered.find(*id) : delivered.end();
    const std::vector<absl::Time>& t = o.token_times;
    if (m != delivered.end()) {
      if (!o.ok) ++migrated_failed;
      if (m->second < static_cast<int64_t>(t.size())) {
        migrated_ms.push_back(absl::ToDoubleMilliseconds(t[m->second] - killed_at));
      }
      continue;
    }
    const auto after = std::upper_bound(t.begin(), t.end(), killed_at);
    if (after != t.begin() && after != t.end()) {
      others_ms.push_back(absl::ToDoubleMilliseconds(*after - killed_at));
    }
  }
  const auto latency_count = Samples(router_metrics, "lockstep_router_migration_latency_seconds_count");
  const auto latency_sum = Samples(router_metrics, "lockstep_router_migration_latency_seconds_sum");
  json reasons = json::object();
  for (const auto& [labels, value] :
       Samples(router_metrics, "lockstep_router_migrations_total")) {
    reasons[labels] = value;
  }
  const double count = Total(latency_count);
  return {
      {"killed", plan.process},
      {"after_tokens", plan.after_tokens},
      {"migrated_requests", delivered.size()},
      {"migrated_requests_failed", migrated_failed},
      {"failure_to_next_token_ms", Figures(migrated_ms)},
      {"others_next_token_ms", Figures(others_ms)},
      {"router",
       {{"migrations", reasons},
        {"migrated_completed",
         Total(Samples(router_metrics, "lockstep_router_migrated_requests_completed_total"))},
        {"resumed", count},
        {"mean_ms_from_noticing", count > 0 ? 1000 * Total(latency_sum) / count : 0.0}}},
  };
}

std::string FormatFailureReport(const json& f) {
  const json& m = f["failure_to_next_token_ms"];
  const json& o = f["others_next_token_ms"];
  const json& r = f["router"];
  std::string reasons;
  for (const auto& [labels, value] : r["migrations"].items()) {
    absl::StrAppend(&reasons, reasons.empty() ? "" : ", ", labels, " ",
                    static_cast<int64_t>(value.get<double>()));
  }
  return absl::StrFormat(
      "failure: SIGKILL %s after %d tokens\n"
      "  migrated     %d requests (%d of them failed)\n"
      "  kill -> next token, migrated  p50 %.1f ms, p99 %.1f ms, max %.1f ms (%d requests)\n"
      "  kill -> next token, elsewhere p50 %.1f ms, p99 %.1f ms, max %.1f ms (%d requests)\n"
      "  router       migrations: %s; completed %d; failure noticed -> next token mean "
      "%.1f ms\n",
      f["killed"].get<std::string>(), f["after_tokens"].get<int64_t>(),
      f["migrated_requests"].get<int64_t>(), f["migrated_requests_failed"].get<int64_t>(),
      m["p50"].get<double>(), m["p99"].get<double>(), m["max"].get<double>(),
      m["requests"].get<int64_t>(), o["p50"].get<double>(), o["p99"].get<double>(),
      o["max"].get<double>(), o["requests"].get<int64_t>(), reasons.empty() ? "none" : reasons,
      static_cast<int64_t>(r["migrated_completed"].get<double>()),
      r["mean_ms_from_noticing"].get<double>());
}

}  // namespace lockstep::bench
