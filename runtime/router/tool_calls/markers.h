// Small text helpers of the output parsers: finding a marker in streamed text without
// missing one split across two pushes.
#ifndef LOCKSTEP_RUNTIME_ROUTER_TOOL_CALLS_MARKERS_H_
#define LOCKSTEP_RUNTIME_ROUTER_TOOL_CALLS_MARKERS_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace lockstep::router::tool_calls {

// The length of the longest suffix of `text` that is a proper prefix of `marker`: the
// bytes to hold back because the next push may complete the marker.
size_t PartialMarkerSuffix(std::string_view text, std::string_view marker);

// Whether `text` starts with `prefix` (std::string_view; Abseil's is a different type
// here).
inline bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// JSON whitespace.
inline bool IsJsonSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// `text` without leading (or trailing) JSON whitespace.
std::string_view StripLeadingSpace(std::string_view text);
std::string_view StripTrailingSpace(std::string_view text);

// Text written out with its trailing whitespace held back while `hold` is on: the held
// whitespace is written only once more non-space text follows, so whitespace at the
// end (between tool calls, after reasoning) is dropped.
class SpaceHeldText {
 public:
  void set_hold(bool hold) { hold_ = hold; }
  void Add(std::string_view text, std::string* out);
  void DropHeld() { held_.clear(); }

 private:
  bool hold_ = false;
  std::string held_;
};

}  // namespace lockstep::router::tool_calls

#endif  // LOCKSTEP_RUNTIME_ROUTER_TOOL_CALLS_MARKERS_H_
