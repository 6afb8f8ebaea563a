// Test helper: a strict parser of the Prometheus text format, and a check of
// histogram consistency, used to verify what /metrics serves.
#ifndef LOCKSTEP_RUNTIME_ROUTER_TESTING_PROMETHEUS_TEXT_H_
#define LOCKSTEP_RUNTIME_ROUTER_TESTING_PROMETHEUS_TEXT_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace lockstep::router::testing {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct ParsedMetrics {
  std::vector<Sample> samples;
  std::map<std::string, std::string> types;  // family name -> counter | gauge | histogram
  std::map<std::string, std::string> help;

  // Samples named `name` whose labels include all of `labels`.
  std::vector<Sample> Find(const std::string& name,
                           const std::map<std::string, std::string>& labels = {}) const;
  // The value of the single matching sample; NaN when there is not exactly one.
  double Value(const std::string& name,
               const std::map<std::string, std::string>& labels = {}) const;
};

// Errors name the line. Every sample must belong to a family declared by a TYPE line
// (histogram samples by their _bucket/_sum/_count suffix).
absl::StatusOr<ParsedMetrics> ParsePrometheusText(const std::string& text);

// For every histogram series: buckets are cumulative (non-decreasing in `le`), there
// is a +Inf bucket, and it equals _count.
absl::Status CheckHistograms(const ParsedMetrics& metrics);

}  // namespace lockstep::router::testing

#endif  // LOCKSTEP_RUNTIME_ROUTER_TESTING_PROMETHEUS_TEXT_H_
