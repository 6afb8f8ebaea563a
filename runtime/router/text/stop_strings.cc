#include "runtime/router/text/stop_strings.h"

#include <algorithm>
#include <utility>

namespace lockstep::router {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) {
  for (std::string& stop : stops) {
    if (!stop.empty()) stops_.push_back(std::move(stop));
  }
}

std::string StopStringMatcher::Push(std::string_view text) {
  if (stopped_) return "";
  held_.append(text);
  if (stops_.empty()) return std::exchange(held_, "");
  // The stop string that completes first wins (of those ending together, the one that
  // starts first), as if the text came one byte at a time. None can start in text
  // already returned: that text was not followed by a proper prefix of any stop string.
  size_t first = std::string::npos;
  size_t first_end = std::string::npos;
  for (const std::string& stop : stops_) {
    const size_t pos = held_.find(stop);
    if (pos == std::string::npos) continue;
    const size_t end = pos + stop.size();
    if (end < first_end || (end == first_end && pos < first)) {
      first = pos;
      first_end = end;
    }
  }
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  // Hold back the longest tail that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const std::string& stop : stops_) {
    for (size_t k = std::min(stop.size() - 1, held_.size()); k > hold; --k) {
      if (std::string_view(held_).substr(held_.size() - k) == std::string_view(stop).substr(0, k)) {
        hold = k;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return out;
}

std::string StopStringMatcher::Flush() {
  if (stopped_) return "";
  return std::exchange(held_, "");
}

}  // namespace lockstep::router
