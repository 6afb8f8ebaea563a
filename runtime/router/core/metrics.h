// The router's Prometheus metrics: counter, gauge and histogram families with labels
// over prometheus-cpp's core library (its families hold the series; its TextSerializer
// renders the text exposition format, version 0.0.4). Serving /metrics over HTTP stays
// the router's own (http_frontend.h).
//
//   MetricsRegistry registry;
//   CounterFamily& requests = registry.AddCounter("lockstep_router_requests_total",
//                                                 "Requests by outcome.", {"outcome"});
//   requests.Increment({"ok"});
//   std::string text = registry.RenderText();
//
// Families are added once, before use; a family's address is stable for the life of
// the registry. Label values are given in the order of the family's label names.
// Thread safety: every method is thread-safe (prometheus-cpp's per-family lock and
// atomic values; the registry's mutex guards its list of families, a gauge family's
// its series).
#ifndef LOCKSTEP_RUNTIME_ROUTER_CORE_METRICS_H_
#define LOCKSTEP_RUNTIME_ROUTER_CORE_METRICS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

// Only metrics.cc includes prometheus-cpp's headers (its target alone has the layering
// check off, see BUILD.bazel); includers see these declarations.
namespace prometheus {
class Counter;
class Gauge;
class Histogram;
class Registry;
struct MetricFamily;
template <typename T>
class Family;
}  // namespace prometheus

namespace lockstep::router {

using LabelValues = std::vector<std::string>;

// Shared by the family types: name, help, label names, and the rendering type.
class MetricFamily {
 public:
  enum class Type { kCounter, kGauge, kHistogram };
  MetricFamily(const MetricFamily&) = delete;
  MetricFamily& operator=(const MetricFamily&) = delete;
  virtual ~MetricFamily() = default;

 protected:
  MetricFamily(Type type, std::string name, std::string help,
               std::vector<std::string> label_names);

  // prometheus-cpp's labels for `values` (one per label name, else a CHECK failure).
  std::map<std::string, std::string> LabelsFor(const LabelValues& values) const;
  // The family's series as prometheus-cpp collects them; HELP and TYPE also when it
  // has none yet.
  virtual prometheus::MetricFamily Collect() const = 0;
  prometheus::MetricFamily Collected(std::vector<prometheus::MetricFamily> families) const;

  const Type type_;
  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;

  friend class MetricsRegistry;
};

class CounterFamily : public MetricFamily {
 public:
  // `by` >= 0 (prometheus-cpp ignores a negative increment).
  void Increment(const LabelValues& labels, double by = 1);
  double Value(const LabelValues& labels) const;

 private:
  CounterFamily(prometheus::Family<prometheus::Counter>& family, std::string name,
                std::string help, std::vector<std::string> label_names);
  prometheus::MetricFamily Collect() const override;

  prometheus::Family<prometheus::Counter>& family_;
  friend class MetricsRegistry;
};

class GaugeFamily : public MetricFamily {
 public:
  void Set(const LabelValues& labels, double value) ABSL_LOCKS_EXCLUDED(mu_);
  void Add(const LabelValues& labels, double delta) ABSL_LOCKS_EXCLUDED(mu_);
  double Value(const LabelValues& labels) const ABSL_LOCKS_EXCLUDED(mu_);
  // Drops every series (for gauges rebuilt from a fresh snapshot).
  void Clear() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // `type`: kGauge, or kCounter for a counter kept by another process and copied here
  // by value (rendered with TYPE counter).
  GaugeFamily(prometheus::Family<prometheus::Gauge>& family, Type type, std::string name,
              std::string help, std::vector<std::string> label_names);
  prometheus::Gauge& SeriesFor(const LabelValues& labels) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  prometheus::MetricFamily Collect() const override;

  prometheus::Family<prometheus::Gauge>& family_;
  mutable absl::Mutex mu_;
  std::map<LabelValues, prometheus::Gauge*> series_ ABSL_GUARDED_BY(mu_);
  friend class MetricsRegistry;
};

class HistogramFamily : public MetricFamily {
 public:
  void Observe(const LabelValues& labels, double value);
  uint64_t Count(const LabelValues& labels) const;

 private:
  HistogramFamily(prometheus::Family<prometheus::Histogram>& family, std::string name,
                  std::string help, std::vector<double> bounds,
                  std::vector<std::string> label_names);
  prometheus::MetricFamily Collect() const override;

  prometheus::Family<prometheus::Histogram>& family_;
  const std::vector<double> bounds_;  // ascending, without +Inf
  friend class MetricsRegistry;
};

class MetricsRegistry {
 public:
  MetricsRegistry();
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  CounterFamily& AddCounter(const std::string& name, const std::string& help,
                            std::vector<std::string> label_names = {}) ABSL_LOCKS_EXCLUDED(mu_);
  GaugeFamily& AddGauge(const std::string& name, const std::string& help,
                        std::vector<std::string> label_names = {}) ABSL_LOCKS_EXCLUDED(mu_);
  // A counter kept by another process and copied here by value (Set): rendered with
  // TYPE counter.
  GaugeFamily& AddMirroredCounter(const std::string& name, const std::string& help,
                                  std::vector<std::string> label_names = {})
      ABSL_LOCKS_EXCLUDED(mu_);
  // `bounds`: bucket upper bounds, strictly ascending; +Inf is implied.
  HistogramFamily& AddHistogram(const std::string& name, const std::string& help,
                                std::vector<double> bounds,
                                std::vector<std::string> label_names = {}) ABSL_LOCKS_EXCLUDED(mu_);

  // Every family, in the order added.
  std::string RenderText() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  GaugeFamily& AddGaugeFamily(MetricFamily::Type type, const std::string& name,
                              const std::string& help, std::vector<std::string> label_names)
      ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  // Owns the prometheus-cpp families; ours refer to them.
  std::unique_ptr<prometheus::Registry> registry_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<MetricFamily>> families_ ABSL_GUARDED_BY(mu_);
};

// Seconds buckets for latencies from 1 ms to 60 s.
std::vector<double> LatencyBucketsSeconds();

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_CORE_METRICS_H_
