// Streams one tool call written as a JSON object, {"name": "f", "arguments": {...}}
// ("parameters" is taken for "arguments", as Llama 3.x writes it), fed in pieces of any
// size. The call's name is sent once its string is complete; when the name comes
// before the arguments and they are an object, their bytes are sent as they arrive
// (the OpenAI streaming form); otherwise the arguments are sent whole when the object
// ends. Arguments given as a JSON string are unquoted; absent or null ones are "{}".
//
//   CallObjectScanner scanner(/*index=*/0);
//   size_t used = scanner.Feed(text, &deltas);  // stops right after the object's '}'
//   if (scanner.failed()) ... the text was not a call: show scanner.raw() as content
//
// Not thread-safe.
#ifndef LOCKSTEP_RUNTIME_ROUTER_TOOL_CALLS_CALL_OBJECT_SCANNER_H_
#define LOCKSTEP_RUNTIME_ROUTER_TOOL_CALLS_CALL_OBJECT_SCANNER_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/router/tool_calls/output_delta.h"

namespace lockstep::router::tool_calls {

class CallObjectScanner {
 public:
  explicit CallObjectScanner(int index) : index_(index) {}

  // Consumes `text` up to the end of the object (all of it unless the object ends
  // inside) and appends the call's new deltas to `out`. Returns the bytes consumed.
  // The text must start at the object's '{' (no leading whitespace).
  size_t Feed(std::string_view text, std::vector<ToolCallDelta>* out);
  // The output ended: a call whose name is known is sent with the arguments read so far.
  void Finish(std::vector<ToolCallDelta>* out);

  bool done() const { return done_; }
  // Not a call: the text does not start with '{', or the object had no string "name".
  // Nothing was sent for it.
  bool failed() const { return failed_; }
  // The bytes consumed so far.
  const std::string& raw() const { return raw_; }

 private:
  enum class Args { kNone, kStream, kBuffer };

  void OnChar(char c, std::vector<ToolCallDelta>* out);
  void StartValue(char c, std::vector<ToolCallDelta>* out);
  void EndValue(std::vector<ToolCallDelta>* out);
  void EndObject(std::vector<ToolCallDelta>* out);
  void SendName(std::vector<ToolCallDelta>* out);

  const int index_;
  std::string raw_;
  bool done_ = false;
  bool failed_ = false;
  int depth_ = 0;
  bool in_string_ = false;
  bool escape_ = false;
  bool expect_key_ = false;
  bool in_value_ = false;     // reading the value of key_ (depth 1)
  size_t value_start_ = 0;    // where that value starts in raw_
  size_t string_start_ = 0;   // where the depth-1 string being read starts in raw_
  std::string key_;
  bool has_name_ = false;
  std::string name_;
  bool sent_name_ = false;
  Args args_mode_ = Args::kNone;
  bool has_args_ = false;
  std::string args_;          // the arguments' JSON text read so far
  std::string args_pending_;  // kStream: read in this Feed, not yet sent
};

}  // namespace lockstep::router::tool_calls

#endif  // LOCKSTEP_RUNTIME_ROUTER_TOOL_CALLS_CALL_OBJECT_SCANNER_H_
