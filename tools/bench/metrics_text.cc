#include "tools/bench/metrics_text.h"

#include <chrono>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "httplib.h"
#include "runtime/router/http/router_http_client.h"

namespace lockstep::bench {

absl::StatusOr<std::string> FetchMetrics(const std::string& http_address,
                                         const std::string& api_key,
                                         const std::string& ca_file) {
  absl::StatusOr<std::unique_ptr<httplib::Client>> made =
      router::NewRouterHttpClient(http_address, ca_file);
  if (!made.ok()) return made.status();
  httplib::Client& client = **made;
  client.set_connection_timeout(std::chrono::seconds(5));
  client.set_read_timeout(std::chrono::seconds(5));
  httplib::Headers headers;
  if (!api_key.empty()) headers.emplace("Authorization", "Bearer " + api_key);
  const httplib::Result result = client.Get("/metrics", headers);
  if (!result) {
    return absl::UnavailableError(
        absl::StrCat("GET /metrics on ", http_address, ": ", httplib::to_string(result.error())));
  }
  if (result->status != 200) {
    return absl::UnavailableError(
        absl::StrCat("GET /metrics on ", http_address, ": HTTP ", result->status));
  }
  return result->body;
}

std::map<std::string, double> ParseSamples(absl::string_view metrics_text) {
  std::map<std::string, double> out;
  for (absl::string_view line : absl::StrSplit(metrics_text, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    double value = 0;
    if (space == absl::string_view::npos || !absl::SimpleAtod(line.substr(space + 1), &value)) {
      continue;
    }
    out[std::string(line.substr(0, space))] = value;
  }
  return out;
}

double Delta(const std::map<std::string, double>& after,
             const std::map<std::string, double>& before, const std::string& series) {
  const auto a = after.find(series);
  const auto b = before.find(series);
  return (a == after.end() ? 0 : a->second) - (b == before.end() ? 0 : b->second);
}

bool IsLabelledSeriesOf(absl::string_view series, absl::string_view name) {
  return absl::StartsWith(series, name) && series.size() > name.size() &&
         series[name.size()] == '{';
}

double FamilyDelta(const std::map<std::string, double>& after,
                   const std::map<std::string, double>& before, absl::string_view name) {
  double sum = 0;
  for (const auto& [series, value] : after) {
    if (series == name || IsLabelledSeriesOf(series, name)) sum += Delta(after, before, series);
  }
  return sum;
}

}  // namespace lockstep::bench
