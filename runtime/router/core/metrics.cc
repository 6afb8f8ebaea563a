#include "runtime/router/core/metrics.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "common/check.h"
#include "fmt/format.h"

namespace lockstep::router {
namespace {

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatNumber(double value) {
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (std::isnan(value)) return "NaN";
  return fmt::format("{}", value);
}

// `{a="x",b="y"}` from names and values, plus an optional extra pair; "" when empty.
std::string LabelText(const std::vector<std::string>& names, const LabelValues& values,
                      const std::string& extra_name = "", const std::string& extra_value = "") {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    out +=
        fmt::format("{}{}=\"{}\"", out.empty() ? "" : ",", names[i], EscapeLabelValue(values[i]));
  }
  if (!extra_name.empty()) {
    out += fmt::format("{}{}=\"{}\"", out.empty() ? "" : ",", extra_name, extra_value);
  }
  return out.empty() ? "" : "{" + out + "}";
}

}  // namespace

MetricFamily::MetricFamily(MetricsRegistry& registry, Type type, std::string name, std::string help,
                           std::vector<std::string> label_names)
    : registry_(registry),
      type_(type),
      name_(std::move(name)),
      help_(std::move(help)),
      label_names_(std::move(label_names)) {}

absl::Mutex& MetricFamily::mu() const { return registry_.mu_; }

MetricFamily::Series& MetricFamily::SeriesFor(const LabelValues& labels) {
  LOCKSTEP_CHECK(labels.size() == label_names_.size())
      << name_ << ": " << labels.size() << " label values for " << label_names_.size() << " labels";
  auto [it, inserted] = series_.try_emplace(labels);
  if (inserted && type_ == Type::kHistogram) it->second.buckets.assign(bounds_.size() + 1, 0);
  return it->second;
}

void MetricFamily::Render(std::string& out) const {
  static constexpr const char* kTypeNames[] = {"counter", "gauge", "histogram"};
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name_, help_, name_,
                     kTypeNames[static_cast<int>(type_)]);
  for (const auto& [labels, series] : series_) {
    if (type_ != Type::kHistogram) {
      out += fmt::format("{}{} {}\n", name_, LabelText(label_names_, labels),
                         FormatNumber(series.value));
      continue;
    }
    uint64_t cumulative = 0;
    for (size_t b = 0; b <= bounds_.size(); ++b) {
      cumulative += series.buckets[b];
      const std::string le = b < bounds_.size() ? FormatNumber(bounds_[b]) : "+Inf";
      out += fmt::format("{}_bucket{} {}\n", name_, LabelText(label_names_, labels, "le", le),
                         cumulative);
    }
    out += fmt::format("{}_sum{} {}\n", name_, LabelText(label_names_, labels),
                       FormatNumber(series.sum));
    out += fmt::format("{}_count{} {}\n", name_, LabelText(label_names_, labels), series.count);
  }
}

void CounterFamily::Increment(const LabelValues& labels, double by) {
  absl::MutexLock lock(&mu());
  SeriesFor(labels).value += by;
}

double CounterFamily::Value(const LabelValues& labels) const {
  absl::MutexLock lock(&mu());
  auto it = series_.find(labels);
  return it == series_.end() ? 0 : it->second.value;
}

void GaugeFamily::Set(const LabelValues& labels, double value) {
  absl::MutexLock lock(&mu());
  SeriesFor(labels).value = value;
}

void GaugeFamily::Add(const LabelValues& labels, double delta) {
  absl::MutexLock lock(&mu());
  SeriesFor(labels).value += delta;
}

double GaugeFamily::Value(const LabelValues& labels) const {
  absl::MutexLock lock(&mu());
  auto it = series_.find(labels);
  return it == series_.end() ? 0 : it->second.value;
}

void GaugeFamily::Clear() {
  absl::MutexLock lock(&mu());
  series_.clear();
}

void HistogramFamily::Observe(const LabelValues& labels, double value) {
  absl::MutexLock lock(&mu());
  Series& series = SeriesFor(labels);
  const size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  ++series.buckets[bucket];
  series.sum += value;
  ++series.count;
}

uint64_t HistogramFamily::Count(const LabelValues& labels) const {
  absl::MutexLock lock(&mu());
  auto it = series_.find(labels);
  return it == series_.end() ? 0 : it->second.count;
}

CounterFamily& MetricsRegistry::AddCounter(const std::string& name, const std::string& help,
                                           std::vector<std::string> label_names) {
  auto family = std::unique_ptr<CounterFamily>(
      new CounterFamily(*this, MetricFamily::Type::kCounter, name, help, std::move(label_names)));
  CounterFamily& ref = *family;
  absl::MutexLock lock(&mu_);
  families_.push_back(std::move(family));
  return ref;
}

GaugeFamily& MetricsRegistry::AddGauge(const std::string& name, const std::string& help,
                                       std::vector<std::string> label_names) {
  auto family = std::unique_ptr<GaugeFamily>(
      new GaugeFamily(*this, MetricFamily::Type::kGauge, name, help, std::move(label_names)));
  GaugeFamily& ref = *family;
  absl::MutexLock lock(&mu_);
  families_.push_back(std::move(family));
  return ref;
}

GaugeFamily& MetricsRegistry::AddMirroredCounter(const std::string& name, const std::string& help,
                                                 std::vector<std::string> label_names) {
  auto family = std::unique_ptr<GaugeFamily>(
      new GaugeFamily(*this, MetricFamily::Type::kCounter, name, help, std::move(label_names)));
  GaugeFamily& ref = *family;
  absl::MutexLock lock(&mu_);
  families_.push_back(std::move(family));
  return ref;
}

HistogramFamily& MetricsRegistry::AddHistogram(const std::string& name, const std::string& help,
                                               std::vector<double> bounds,
                                               std::vector<std::string> label_names) {
  LOCKSTEP_CHECK(std::is_sorted(bounds.begin(), bounds.end()) &&
                 std::adjacent_find(bounds.begin(), bounds.end()) == bounds.end())
      << name << ": histogram bounds must be strictly ascending";
  auto family = std::unique_ptr<HistogramFamily>(new HistogramFamily(
      *this, MetricFamily::Type::kHistogram, name, help, std::move(label_names)));
  family->bounds_ = std::move(bounds);
  HistogramFamily& ref = *family;
  absl::MutexLock lock(&mu_);
  families_.push_back(std::move(family));
  return ref;
}

std::string MetricsRegistry::RenderText() const {
  std::string out;
  absl::MutexLock lock(&mu_);
  for (const auto& family : families_) family->Render(out);
  return out;
}

std::vector<double> LatencyBucketsSeconds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

}  // namespace lockstep::router
