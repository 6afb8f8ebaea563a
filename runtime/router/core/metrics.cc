#include "runtime/router/core/metrics.h"

#include <algorithm>
#include <sstream>
#include <utility>

#include "common/check.h"
#include "prometheus/client_metric.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/labels.h"
#include "prometheus/metric_family.h"
#include "prometheus/metric_type.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace lockstep::router {

MetricFamily::MetricFamily(Type type, std::string name, std::string help,
                           std::vector<std::string> label_names)
    : type_(type),
      name_(std::move(name)),
      help_(std::move(help)),
      label_names_(std::move(label_names)) {}

std::map<std::string, std::string> MetricFamily::LabelsFor(const LabelValues& values) const {
  LOCKSTEP_CHECK(values.size() == label_names_.size())
      << name_ << ": " << values.size() << " label values for " << label_names_.size()
      << " labels";
  prometheus::Labels labels;
  for (size_t i = 0; i < values.size(); ++i) labels.emplace(label_names_[i], values[i]);
  return labels;
}

prometheus::MetricFamily MetricFamily::Collected(
    std::vector<prometheus::MetricFamily> families) const {
  if (!families.empty()) return std::move(families.front());
  // prometheus-cpp collects nothing from a family without series; /metrics still
  // declares it.
  static constexpr prometheus::MetricType kTypes[] = {
      prometheus::MetricType::Counter, prometheus::MetricType::Gauge,
      prometheus::MetricType::Histogram};
  return prometheus::MetricFamily{name_, help_, kTypes[static_cast<int>(type_)], {}};
}

CounterFamily::CounterFamily(prometheus::Family<prometheus::Counter>& family, std::string name,
                             std::string help, std::vector<std::string> label_names)
    : MetricFamily(Type::kCounter, std::move(name), std::move(help), std::move(label_names)),
      family_(family) {}

void CounterFamily::Increment(const LabelValues& labels, double by) {
  family_.Add(LabelsFor(labels)).Increment(by);
}

double CounterFamily::Value(const LabelValues& labels) const {
  const prometheus::Labels l = LabelsFor(labels);
  // Counters are never removed, so a series present now stays.
  return family_.Has(l) ? family_.Add(l).Value() : 0;
}

prometheus::MetricFamily CounterFamily::Collect() const { return Collected(family_.Collect()); }

GaugeFamily::GaugeFamily(prometheus::Family<prometheus::Gauge>& family, Type type,
                         std::string name, std::string help,
                         std::vector<std::string> label_names)
    : MetricFamily(type, std::move(name), std::move(help), std::move(label_names)),
      family_(family) {}

prometheus::Gauge& GaugeFamily::SeriesFor(const LabelValues& labels) {
  auto [it, inserted] = series_.try_emplace(labels, nullptr);
  if (inserted) it->second = &family_.Add(LabelsFor(labels));
  return *it->second;
}

void GaugeFamily::Set(const LabelValues& labels, double value) {
  absl::MutexLock lock(&mu_);
  SeriesFor(labels).Set(value);
}

void GaugeFamily::Add(const LabelValues& labels, double delta) {
  absl::MutexLock lock(&mu_);
  SeriesFor(labels).Increment(delta);
}

double GaugeFamily::Value(const LabelValues& labels) const {
  absl::MutexLock lock(&mu_);
  auto it = series_.find(labels);
  return it == series_.end() ? 0 : it->second->Value();
}

void GaugeFamily::Clear() {
  absl::MutexLock lock(&mu_);
  for (const auto& [labels, gauge] : series_) family_.Remove(gauge);
  series_.clear();
}

prometheus::MetricFamily GaugeFamily::Collect() const {
  prometheus::MetricFamily family = Collected(family_.Collect());
  if (type_ == Type::kCounter) {
    family.type = prometheus::MetricType::Counter;
    for (prometheus::ClientMetric& metric : family.metric) {
      metric.counter.value = metric.gauge.value;
    }
  }
  return family;
}

HistogramFamily::HistogramFamily(prometheus::Family<prometheus::Histogram>& family,
                                 std::string name, std::string help, std::vector<double> bounds,
                                 std::vector<std::string> label_names)
    : MetricFamily(Type::kHistogram, std::move(name), std::move(help), std::move(label_names)),
      family_(family),
      bounds_(std::move(bounds)) {}

void HistogramFamily::Observe(const LabelValues& labels, double value) {
  family_.Add(LabelsFor(labels), bounds_).Observe(value);
}

uint64_t HistogramFamily::Count(const LabelValues& labels) const {
  const prometheus::Labels l = LabelsFor(labels);
  return family_.Has(l) ? family_.Add(l, bounds_).Collect().histogram.sample_count : 0;
}

prometheus::MetricFamily HistogramFamily::Collect() const { return Collected(family_.Collect()); }

MetricsRegistry::MetricsRegistry() : registry_(std::make_unique<prometheus::Registry>()) {}
MetricsRegistry::~MetricsRegistry() = default;

CounterFamily& MetricsRegistry::AddCounter(const std::string& name, const std::string& help,
                                           std::vector<std::string> label_names) {
  absl::MutexLock lock(&mu_);
  auto& family = prometheus::BuildCounter().Name(name).Help(help).Register(*registry_);
  auto counter = std::unique_ptr<CounterFamily>(
      new CounterFamily(family, name, help, std::move(label_names)));
  CounterFamily& ref = *counter;
  families_.push_back(std::move(counter));
  return ref;
}

GaugeFamily& MetricsRegistry::AddGaugeFamily(MetricFamily::Type type, const std::string& name,
                                             const std::string& help,
                                             std::vector<std::string> label_names) {
  absl::MutexLock lock(&mu_);
  auto& family = prometheus::BuildGauge().Name(name).Help(help).Register(*registry_);
  auto gauge = std::unique_ptr<GaugeFamily>(
      new GaugeFamily(family, type, name, help, std::move(label_names)));
  GaugeFamily& ref = *gauge;
  families_.push_back(std::move(gauge));
  return ref;
}

GaugeFamily& MetricsRegistry::AddGauge(const std::string& name, const std::string& help,
                                       std::vector<std::string> label_names) {
  return AddGaugeFamily(MetricFamily::Type::kGauge, name, help, std::move(label_names));
}

GaugeFamily& MetricsRegistry::AddMirroredCounter(const std::string& name, const std::string& help,
                                                 std::vector<std::string> label_names) {
  return AddGaugeFamily(MetricFamily::Type::kCounter, name, help, std::move(label_names));
}

HistogramFamily& MetricsRegistry::AddHistogram(const std::string& name, const std::string& help,
                                               std::vector<double> bounds,
                                               std::vector<std::string> label_names) {
  LOCKSTEP_CHECK(std::is_sorted(bounds.begin(), bounds.end()) &&
                 std::adjacent_find(bounds.begin(), bounds.end()) == bounds.end())
      << name << ": histogram bounds must be strictly ascending";
  absl::MutexLock lock(&mu_);
  auto& family = prometheus::BuildHistogram().Name(name).Help(help).Register(*registry_);
  auto histogram = std::unique_ptr<HistogramFamily>(
      new HistogramFamily(family, name, help, std::move(bounds), std::move(label_names)));
  HistogramFamily& ref = *histogram;
  families_.push_back(std::move(histogram));
  return ref;
}

std::string MetricsRegistry::RenderText() const {
  std::vector<prometheus::MetricFamily> collected;
  {
    absl::MutexLock lock(&mu_);
    collected.reserve(families_.size());
    for (const auto& family : families_) collected.push_back(family->Collect());
  }
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, collected);
  return out.str();
}

std::vector<double> LatencyBucketsSeconds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

}  // namespace lockstep::router
