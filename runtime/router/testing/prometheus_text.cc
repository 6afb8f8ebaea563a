#include "runtime/router/testing/prometheus_text.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "absl/strings/numbers.h"
#include "fmt/format.h"

namespace lockstep::router::testing {
namespace {

bool IsNameChar(char c, bool first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
         (!first && c >= '0' && c <= '9');
}

absl::StatusOr<double> ParseValue(const std::string& text) {
  if (text == "+Inf") return std::numeric_limits<double>::infinity();
  if (text == "-Inf") return -std::numeric_limits<double>::infinity();
  if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
  double value = 0;
  if (!absl::SimpleAtod(text, &value)) return absl::InvalidArgumentError("bad number " + text);
  return value;
}

absl::StatusOr<Sample> ParseSample(const std::string& line) {
  Sample sample;
  size_t i = 0;
  while (i < line.size() && IsNameChar(line[i], i == 0)) ++i;
  if (i == 0) return absl::InvalidArgumentError("no metric name");
  sample.name = line.substr(0, i);
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (i < line.size() && line[i] != '}') {
      size_t start = i;
      while (i < line.size() && IsNameChar(line[i], i == start)) ++i;
      const std::string label = line.substr(start, i - start);
      if (label.empty() || i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"') {
        return absl::InvalidArgumentError("bad label syntax");
      }
      i += 2;
      std::string value;
      while (i < line.size() && line[i] != '"') {
        if (line[i] == '\\' && i + 1 < line.size()) {
          ++i;
          value += line[i] == 'n' ? '\n' : line[i];
        } else {
          value += line[i];
        }
        ++i;
      }
      if (i >= line.size()) return absl::InvalidArgumentError("unterminated label value");
      ++i;  // closing quote
      if (!sample.labels.emplace(label, value).second) {
        return absl::InvalidArgumentError("duplicate label " + label);
      }
      if (i < line.size() && line[i] == ',') ++i;
    }
    if (i >= line.size()) return absl::InvalidArgumentError("unterminated label set");
    ++i;  // '}'
  }
  if (i >= line.size() || line[i] != ' ') return absl::InvalidArgumentError("no value");
  absl::StatusOr<double> value = ParseValue(line.substr(i + 1));
  if (!value.ok()) return value.status();
  sample.value = *value;
  return sample;
}

std::string FamilyOf(const std::string& name, const std::map<std::string, std::string>& types) {
  if (types.count(name)) return name;
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s(suffix);
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
      const std::string base = name.substr(0, name.size() - s.size());
      auto it = types.find(base);
      if (it != types.end() && it->second == "histogram") return base;
    }
  }
  return "";
}

}  // namespace

std::vector<Sample> ParsedMetrics::Find(const std::string& name,
                                        const std::map<std::string, std::string>& labels) const {
  std::vector<Sample> found;
  for (const Sample& sample : samples) {
    if (sample.name != name) continue;
    bool match = true;
    for (const auto& [k, v] : labels) {
      auto it = sample.labels.find(k);
      match &= it != sample.labels.end() && it->second == v;
    }
    if (match) found.push_back(sample);
  }
  return found;
}

double ParsedMetrics::Value(const std::string& name,
                            const std::map<std::string, std::string>& labels) const {
  std::vector<Sample> found = Find(name, labels);
  return found.size() == 1 ? found[0].value : std::numeric_limits<double>::quiet_NaN();
}

absl::StatusOr<ParsedMetrics> ParsePrometheusText(const std::string& text) {
  ParsedMetrics metrics;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
      const std::string rest = line.substr(7);
      const size_t space = rest.find(' ');
      if (space == std::string::npos) {
        return absl::InvalidArgumentError(fmt::format("line {}: '{}'", number, line));
      }
      const std::string name = rest.substr(0, space);
      const std::string body = rest.substr(space + 1);
      if (line[2] == 'T') {
        if (body != "counter" && body != "gauge" && body != "histogram") {
          return absl::InvalidArgumentError(fmt::format("line {}: type '{}'", number, body));
        }
        metrics.types[name] = body;
      } else {
        metrics.help[name] = body;
      }
      continue;
    }
    if (line[0] == '#') continue;
    absl::StatusOr<Sample> sample = ParseSample(line);
    if (!sample.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("line {}: {}: '{}'", number, std::string(sample.status().message()), line));
    }
    if (FamilyOf(sample->name, metrics.types).empty()) {
      return absl::InvalidArgumentError(
          fmt::format("line {}: sample {} has no TYPE line", number, sample->name));
    }
    metrics.samples.push_back(std::move(*sample));
  }
  return metrics;
}

absl::Status CheckHistograms(const ParsedMetrics& metrics) {
  for (const auto& [family, type] : metrics.types) {
    if (type != "histogram") continue;
    // Group buckets by their labels without `le`.
    std::map<std::map<std::string, std::string>, std::vector<std::pair<double, double>>> series;
    for (const Sample& sample : metrics.Find(family + "_bucket")) {
      auto labels = sample.labels;
      auto le = labels.find("le");
      if (le == labels.end()) return absl::InvalidArgumentError(family + ": bucket without le");
      absl::StatusOr<double> bound = ParseValue(le->second);
      if (!bound.ok()) return bound.status();
      labels.erase(le);
      series[labels].emplace_back(*bound, sample.value);
    }
    for (const auto& [labels, buckets] : series) {
      for (size_t i = 1; i < buckets.size(); ++i) {
        if (!(buckets[i].first > buckets[i - 1].first) ||
            buckets[i].second < buckets[i - 1].second) {
          return absl::InvalidArgumentError(family + ": buckets not cumulative / ascending");
        }
      }
      if (buckets.empty() || !std::isinf(buckets.back().first)) {
        return absl::InvalidArgumentError(family + ": no +Inf bucket");
      }
      double count = std::numeric_limits<double>::quiet_NaN();
      for (const Sample& s : metrics.Find(family + "_count", labels)) {
        if (s.labels.size() == labels.size()) count = s.value;
      }
      if (count != buckets.back().second) {
        return absl::InvalidArgumentError(family + ": +Inf bucket differs from _count");
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace lockstep::router::testing
