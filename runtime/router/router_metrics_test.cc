#include "runtime/router/router_metrics.h"

#include <map>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/router/testing/prometheus_text.h"

namespace lockstep::router {
namespace {

using ::lockstep::testing::IsOk;
using ::testing::HasSubstr;

// The executor's step counters, as the leader's Stats reports them, become one counter
// series per instance; the stale-update series counts only real requests' updates.
TEST(RouterMetricsTest, MirrorsTheStepCountersOfEveryInstance) {
  InstanceState instance;
  instance.name = "gen0";
  instance.has_stats = true;
  instance.stats.set_steps(100);
  instance.stats.set_stale_updates(2);
  instance.stats.set_dummy_updates_dropped(40);
  instance.stats.set_rank_errors(3);
  instance.stats.set_error_steps(1);
  instance.stats.set_engine_failures(1);
  RouterMetrics metrics;
  absl::StatusOr<testing::ParsedMetrics> parsed =
      testing::ParsePrometheusText(metrics.Render({instance}));
  ASSERT_THAT(parsed, IsOk());
  const std::map<std::string, std::string> gen0 = {{"instance", "gen0"}};
  EXPECT_EQ(parsed->Value("lockstep_instance_steps_total", gen0), 100);
  EXPECT_EQ(parsed->Value("lockstep_instance_stale_updates_total", gen0), 2);
  EXPECT_EQ(parsed->Value("lockstep_instance_dummy_updates_dropped_total", gen0), 40);
  EXPECT_EQ(parsed->Value("lockstep_instance_rank_errors_total", gen0), 3);
  EXPECT_EQ(parsed->Value("lockstep_instance_error_steps_total", gen0), 1);
  EXPECT_EQ(parsed->Value("lockstep_instance_engine_failures_total", gen0), 1);
  EXPECT_EQ(parsed->types.at("lockstep_instance_rank_errors_total"), "counter");
  EXPECT_THAT(parsed->help.at("lockstep_instance_stale_updates_total"),
              HasSubstr("closed or re-created"));
}

}  // namespace
}  // namespace lockstep::router
