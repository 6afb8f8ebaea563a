#include "runtime/router/core/metrics.h"

#include <cmath>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/router/testing/prometheus_text.h"

namespace lockstep::router {
namespace {

using ::lockstep::testing::IsOk;
using ::testing::HasSubstr;

TEST(MetricsTest, RendersParsableTextWithLabelsAndTypes) {
  MetricsRegistry registry;
  CounterFamily& requests = registry.AddCounter("requests_total", "Requests.", {"outcome"});
  GaugeFamily& queue = registry.AddGauge("queue_length", "Queue.");
  GaugeFamily& mirrored = registry.AddMirroredCounter("steps_total", "Steps.", {"instance"});
  requests.Increment({"ok"});
  requests.Increment({"ok"}, 2);
  requests.Increment({"error"});
  queue.Set({}, 4);
  queue.Add({}, -1);
  mirrored.Set({"agg0"}, 17);

  absl::StatusOr<testing::ParsedMetrics> parsed =
      testing::ParsePrometheusText(registry.RenderText());
  ASSERT_THAT(parsed, IsOk());
  EXPECT_EQ(parsed->types.at("requests_total"), "counter");
  EXPECT_EQ(parsed->types.at("queue_length"), "gauge");
  EXPECT_EQ(parsed->types.at("steps_total"), "counter");
  EXPECT_EQ(parsed->help.at("requests_total"), "Requests.");
  EXPECT_EQ(parsed->Value("requests_total", {{"outcome", "ok"}}), 3);
  EXPECT_EQ(parsed->Value("requests_total", {{"outcome", "error"}}), 1);
  EXPECT_EQ(parsed->Value("queue_length"), 3);
  EXPECT_EQ(parsed->Value("steps_total", {{"instance", "agg0"}}), 17);
  EXPECT_EQ(requests.Value({"ok"}), 3);
}

TEST(MetricsTest, EscapesLabelValues) {
  MetricsRegistry registry;
  GaugeFamily& gauge = registry.AddGauge("g", "G.", {"name"});
  gauge.Set({"a\"b\\c\nd"}, 1);
  const std::string text = registry.RenderText();
  EXPECT_THAT(text, HasSubstr(R"(g{name="a\"b\\c\nd"} 1)"));
  absl::StatusOr<testing::ParsedMetrics> parsed = testing::ParsePrometheusText(text);
  ASSERT_THAT(parsed, IsOk());
  EXPECT_EQ(parsed->Value("g", {{"name", "a\"b\\c\nd"}}), 1);
}

TEST(MetricsTest, HistogramBucketsAreCumulativeAndEndAtCount) {
  MetricsRegistry registry;
  HistogramFamily& latency =
      registry.AddHistogram("latency_seconds", "Latency.", {0.01, 0.1, 1}, {"route"});
  for (double v : {0.005, 0.01, 0.05, 0.5, 0.5, 3.0}) latency.Observe({"a"}, v);
  latency.Observe({"b"}, 0.2);
  absl::StatusOr<testing::ParsedMetrics> parsed =
      testing::ParsePrometheusText(registry.RenderText());
  ASSERT_THAT(parsed, IsOk());
  EXPECT_THAT(testing::CheckHistograms(*parsed), IsOk());
  // le is inclusive: 0.01 falls in the 0.01 bucket.
  EXPECT_EQ(parsed->Value("latency_seconds_bucket", {{"route", "a"}, {"le", "0.01"}}), 2);
  EXPECT_EQ(parsed->Value("latency_seconds_bucket", {{"route", "a"}, {"le", "0.1"}}), 3);
  EXPECT_EQ(parsed->Value("latency_seconds_bucket", {{"route", "a"}, {"le", "1"}}), 5);
  EXPECT_EQ(parsed->Value("latency_seconds_bucket", {{"route", "a"}, {"le", "+Inf"}}), 6);
  EXPECT_EQ(parsed->Value("latency_seconds_count", {{"route", "a"}}), 6);
  EXPECT_NEAR(parsed->Value("latency_seconds_sum", {{"route", "a"}}), 4.065, 1e-9);
  EXPECT_EQ(latency.Count({"b"}), 1u);
}

TEST(MetricsTest, ParserRejectsBrokenText) {
  EXPECT_FALSE(testing::ParsePrometheusText("x 1\n").ok());  // no TYPE line
  EXPECT_FALSE(testing::ParsePrometheusText("# TYPE x gauge\nx{a=\"1} 1\n").ok());
  EXPECT_FALSE(testing::ParsePrometheusText("# TYPE x gauge\nx one\n").ok());
  absl::StatusOr<testing::ParsedMetrics> not_cumulative = testing::ParsePrometheusText(
      "# TYPE h histogram\nh_bucket{le=\"1\"} 5\nh_bucket{le=\"+Inf\"} 3\nh_count 3\n");
  ASSERT_THAT(not_cumulative, IsOk());
  EXPECT_FALSE(testing::CheckHistograms(*not_cumulative).ok());
}

TEST(MetricsTest, GaugeClearDropsSeries) {
  MetricsRegistry registry;
  GaugeFamily& gauge = registry.AddGauge("g", "G.", {"instance"});
  gauge.Set({"a"}, 1);
  gauge.Clear();
  gauge.Set({"b"}, 2);
  const std::string text = registry.RenderText();
  EXPECT_THAT(text, ::testing::Not(HasSubstr("instance=\"a\"")));
  EXPECT_THAT(text, HasSubstr("g{instance=\"b\"} 2"));
}

}  // namespace
}  // namespace lockstep::router
