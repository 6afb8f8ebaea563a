#include "tools/bench/failure_injection.h"

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/router/core/migration.h"
#include "tools/bench/load_generator.h"

namespace lockstep::bench {
namespace {

// An outcome whose tokens arrived at `ms` after t0.
RequestOutcome Outcome(const std::string& id, absl::Time t0, const std::vector<int>& ms) {
  RequestOutcome o;
  o.ok = true;
  o.id = id;
  for (int m : ms) o.token_times.push_back(t0 + absl::Milliseconds(m));
  return o;
}

TEST(FailureInjectionTest, MigratedRequestsAreMeasuredFromTheKillToTheirNextToken) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  const absl::Time killed_at = t0 + absl::Milliseconds(100);
  LoadResult result;
  result.outcomes = {
      // Migrated after 2 delivered tokens: the third (300 ms after the kill) is the
      // continuation's first; the second was on its way at the kill.
      Outcome("cmpl-1", t0, {50, 102, 400, 410}),
      Outcome("cmpl-2", t0, {60, 700}),  // migrated after 1: 600 ms
      Outcome("cmpl-3", t0, {80, 95, 120}),       // elsewhere: 20 ms
      Outcome("cmpl-4", t0, {10, 20}),            // done before the kill
      Outcome("cmpl-5", t0, {150}),               // began after the kill: not counted
  };
  const std::string log =
      "[..] [W] [router] " +
      router::MigrationLogLine({1, "agg0", "worker_error", 2, 11}) + "\n" +
      router::MigrationLogLine({2, "agg0", "instance_unhealthy", 1, 12}) + "\n" +
      // A later migration of the same request does not change its figure.
      router::MigrationLogLine({1, "agg1", "stream_broken", 3, 13}) + "\n" +
      "[..] [W] [router] request 3 via agg1 ended: CANCELLED\n";
  const std::vector<router::MigrationRecord> migrations = MigrationsInLog(log);
  ASSERT_EQ(migrations.size(), 3u);
  const std::string metrics =
      "# TYPE lockstep_router_migrations_total counter\n"
      "lockstep_router_migrations_total{reason=\"worker_error\"} 1\n"
      "lockstep_router_migrations_total{reason=\"instance_unhealthy\"} 1\n"
      "lockstep_router_migrated_requests_completed_total 2\n"
      "lockstep_router_migration_latency_seconds_count 2\n"
      "lockstep_router_migration_latency_seconds_sum 0.5\n";
  const nlohmann::json f =
      FailureReport({.process = "agg0/rank1", .after_tokens = 64}, killed_at, result, migrations, metrics);
  EXPECT_EQ(f["migrated_requests"], 2);
  EXPECT_EQ(f["migrated_requests_failed"], 0);
  EXPECT_EQ(f["failure_to_next_token_ms"]["requests"], 2);
  EXPECT_DOUBLE_EQ(f["failure_to_next_token_ms"]["p50"].get<double>(), 300);
  EXPECT_DOUBLE_EQ(f["failure_to_next_token_ms"]["p99"].get<double>(), 600);
  EXPECT_DOUBLE_EQ(f["failure_to_next_token_ms"]["max"].get<double>(), 600);
  EXPECT_EQ(f["others_next_token_ms"]["requests"], 1);
  EXPECT_DOUBLE_EQ(f["others_next_token_ms"]["p50"].get<double>(), 20);
  EXPECT_EQ(f["router"]["migrations"]["{reason=\"worker_error\"}"], 1);
  EXPECT_EQ(f["router"]["migrated_completed"], 2);
  EXPECT_DOUBLE_EQ(f["router"]["mean_ms_from_noticing"].get<double>(), 250);
  const std::string text = FormatFailureReport(f);
  EXPECT_NE(text.find("kill -> next token, migrated  p50 300.0 ms, p99 600.0 ms"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace lockstep::bench
