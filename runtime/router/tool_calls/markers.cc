#include "runtime/router/tool_calls/markers.h"

#include <algorithm>

namespace lockstep::router::tool_calls {

size_t PartialMarkerSuffix(std::string_view text, std::string_view marker) {
  const size_t most = std::min(text.size(), marker.empty() ? 0 : marker.size() - 1);
  for (size_t n = most; n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

std::string_view StripLeadingSpace(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && IsJsonSpace(text[i])) ++i;
  return text.substr(i);
}

std::string_view StripTrailingSpace(std::string_view text) {
  size_t n = text.size();
  while (n > 0 && IsJsonSpace(text[n - 1])) --n;
  return text.substr(0, n);
}

void SpaceHeldText::Add(std::string_view text, std::string* out) {
  if (!hold_) {
    *out += held_;
    held_.clear();
    *out += text;
    return;
  }
  const std::string_view body = StripTrailingSpace(text);
  if (body.empty()) {
    held_ += text;
    return;
  }
  *out += held_;
  *out += body;
  held_ = std::string(text.substr(body.size()));
}

}  // namespace lockstep::router::tool_calls
