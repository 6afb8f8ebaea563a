// What the per-family output parsers (tool calls, reasoning) make of generated text:
// the part that is the answer (content), the part that is the model's thinking
// (reasoning), and tool calls, each as a delta of what came before so that a stream
// can send it as soon as it is known (the OpenAI streaming format: a call's first
// delta carries its name, the next ones fragments of its arguments).
#ifndef LOCKSTEP_RUNTIME_ROUTER_TOOL_CALLS_OUTPUT_DELTA_H_
#define LOCKSTEP_RUNTIME_ROUTER_TOOL_CALLS_OUTPUT_DELTA_H_

#include <string>
#include <string_view>
#include <vector>

namespace lockstep::router::tool_calls {

// A piece of one tool call. The first piece of call `index` has its `name` (never
// empty); later pieces only `arguments` fragments. The fragments of a call concatenate
// to its arguments as JSON text.
struct ToolCallDelta {
  int index = 0;  // 0, 1, ... in the order the calls appear in the output
  std::string name;
  std::string arguments;
  bool operator==(const ToolCallDelta&) const = default;
};

struct OutputDelta {
  std::string content;
  std::string reasoning;
  std::vector<ToolCallDelta> tool_calls;

  bool empty() const { return content.empty() && reasoning.empty() && tool_calls.empty(); }
  // Appends `more`, merging argument fragments of the same call.
  void Append(OutputDelta more);
};

// A whole parsed tool call (OutputDelta::tool_calls merged by index).
struct ToolCall {
  std::string name;
  std::string arguments;
  bool operator==(const ToolCall&) const = default;
};

// The whole output of a sequence: the deltas of a stream merged.
struct ParsedOutput {
  std::string content;
  std::string reasoning;
  std::vector<ToolCall> tool_calls;

  void Add(const OutputDelta& delta);
};

// Incremental parser of one generated sequence's text. Push the text as it is decoded
// (any split, even inside a marker or a JSON string); Finish at the end returns what
// was held back (text that could have begun a marker, an unfinished call's
// arguments). Not thread-safe; one per sequence.
class OutputParser {
 public:
  virtual ~OutputParser() = default;
  virtual OutputDelta Push(std::string_view text) = 0;
  virtual OutputDelta Finish() = 0;
};

}  // namespace lockstep::router::tool_calls

#endif  // LOCKSTEP_RUNTIME_ROUTER_TOOL_CALLS_OUTPUT_DELTA_H_
