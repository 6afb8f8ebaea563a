#include "runtime/router/tool_calls/output_delta.h"

#include <utility>

namespace lockstep::router::tool_calls {

void OutputDelta::Append(OutputDelta more) {
  content += more.content;
  reasoning += more.reasoning;
  for (ToolCallDelta& call : more.tool_calls) {
    if (!tool_calls.empty() && tool_calls.back().index == call.index && call.name.empty()) {
      tool_calls.back().arguments += call.arguments;
    } else {
      tool_calls.push_back(std::move(call));
    }
  }
}

void ParsedOutput::Add(const OutputDelta& delta) {
  content += delta.content;
  reasoning += delta.reasoning;
  for (const ToolCallDelta& call : delta.tool_calls) {
    if (static_cast<size_t>(call.index) >= tool_calls.size()) {
      tool_calls.resize(call.index + 1);
    }
    ToolCall& into = tool_calls[call.index];
    if (!call.name.empty()) into.name = call.name;
    into.arguments += call.arguments;
  }
}

}  // namespace lockstep::router::tool_calls
