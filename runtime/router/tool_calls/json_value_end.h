// Finds where a JSON object or array that arrives in pieces ends, without parsing it
// (brackets counted outside strings, escapes skipped): the arguments of formats that
// write them raw after the call's name (Mistral's [ARGS], DeepSeek V3.1).
// Not thread-safe.
#ifndef LOCKSTEP_RUNTIME_ROUTER_TOOL_CALLS_JSON_VALUE_END_H_
#define LOCKSTEP_RUNTIME_ROUTER_TOOL_CALLS_JSON_VALUE_END_H_

#include <cstddef>
#include <string_view>

namespace lockstep::router::tool_calls {

class JsonValueEnd {
 public:
  // Consumes `text` up to the end of the value (all of it unless the value ends
  // inside); returns the bytes consumed. The first byte must be '{' or '['.
  size_t Feed(std::string_view text) {
    size_t used = 0;
    while (used < text.size() && !done_) {
      const char c = text[used++];
      if (in_string_) {
        if (escape_) {
          escape_ = false;
        } else if (c == '\\') {
          escape_ = true;
        } else if (c == '"') {
          in_string_ = false;
        }
      } else if (c == '"') {
        in_string_ = true;
      } else if (c == '{' || c == '[') {
        ++depth_;
      } else if (c == '}' || c == ']') {
        done_ = --depth_ <= 0;
      }
    }
    return used;
  }
  bool done() const { return done_; }

 private:
  int depth_ = 0;
  bool in_string_ = false;
  bool escape_ = false;
  bool done_ = false;
};

}  // namespace lockstep::router::tool_calls

#endif  // LOCKSTEP_RUNTIME_ROUTER_TOOL_CALLS_JSON_VALUE_END_H_
