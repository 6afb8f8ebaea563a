// A small Prometheus metrics registry: counter, gauge and histogram families with
// labels, rendered in the Prometheus text exposition format (version 0.0.4).
//
//   MetricsRegistry registry;
//   CounterFamily& requests = registry.AddCounter("lockstep_router_requests_total",
//                                                 "Requests by outcome.", {"outcome"});
//   requests.Increment({"ok"});
//   std::string text = registry.RenderText();
//
// Families are added once, before use; a family's address is stable for the life of
// the registry. Thread safety: every method is thread-safe (one mutex per registry,
// held only to copy or update numbers).
#ifndef LOCKSTEP_RUNTIME_ROUTER_CORE_METRICS_H_
#define LOCKSTEP_RUNTIME_ROUTER_CORE_METRICS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace lockstep::router {

using LabelValues = std::vector<std::string>;

class MetricsRegistry;

// Shared by the family types: name, help, label names, and the registry's mutex.
class MetricFamily {
 public:
  enum class Type { kCounter, kGauge, kHistogram };
  MetricFamily(const MetricFamily&) = delete;
  MetricFamily& operator=(const MetricFamily&) = delete;
  virtual ~MetricFamily() = default;

 protected:
  struct Series {
    double value = 0;               // counter, gauge
    std::vector<uint64_t> buckets;  // histogram: per-bucket (not cumulative) counts
    double sum = 0;
    uint64_t count = 0;
  };

  MetricFamily(MetricsRegistry& registry, Type type, std::string name, std::string help,
               std::vector<std::string> label_names);

  // The series for `labels` (created on first use). Requires the registry mutex.
  Series& SeriesFor(const LabelValues& labels);

  absl::Mutex& mu() const;
  void Render(std::string& out) const;

  MetricsRegistry& registry_;
  const Type type_;
  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
  std::vector<double> bounds_;            // histogram upper bounds, ascending (without +Inf)
  std::map<LabelValues, Series> series_;  // guarded by registry mutex

  friend class MetricsRegistry;
};

class CounterFamily : public MetricFamily {
 public:
  void Increment(const LabelValues& labels, double by = 1);
  double Value(const LabelValues& labels) const;

 private:
  using MetricFamily::MetricFamily;
  friend class MetricsRegistry;
};

class GaugeFamily : public MetricFamily {
 public:
  void Set(const LabelValues& labels, double value);
  void Add(const LabelValues& labels, double delta);
  double Value(const LabelValues& labels) const;
  // Drops every series (for gauges rebuilt from a fresh snapshot).
  void Clear();

 private:
  using MetricFamily::MetricFamily;
  friend class MetricsRegistry;
};

class HistogramFamily : public MetricFamily {
 public:
  void Observe(const LabelValues& labels, double value);
  uint64_t Count(const LabelValues& labels) const;

 private:
  using MetricFamily::MetricFamily;
  friend class MetricsRegistry;
};

class MetricsRegistry {
 public:
  MetricsRegistry() = default;
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
  friend class MetricFamily;

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<MetricFamily>> families_ ABSL_GUARDED_BY(mu_);
};

// Seconds buckets for latencies from 1 ms to 60 s.
std::vector<double> LatencyBucketsSeconds();

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_CORE_METRICS_H_
