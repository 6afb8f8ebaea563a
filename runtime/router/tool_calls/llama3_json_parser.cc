// Llama 3.x JSON tool calls: an output that starts with a JSON object (after
// <|python_tag|> when decoding kept it) is calls, {"name": ..., "parameters": ...},
// separated by ';'. Any other output is content.
#include <optional>
#include <string>

#include "runtime/router/tool_calls/call_object_scanner.h"
#include "runtime/router/tool_calls/markers.h"
#include "runtime/router/tool_calls/tool_parsers.h"

namespace lockstep::router::tool_calls {
namespace {

class Llama3JsonParser : public OutputParser {
 public:
  OutputDelta Push(std::string_view text) override {
    buffer_ += text;
    return Drain(/*final=*/false);
  }
  OutputDelta Finish() override { return Drain(/*final=*/true); }

 private:
  enum class State { kStart, kText, kCallStart, kCall, kAfterCall };

  OutputDelta Drain(bool final) {
    OutputDelta out;
    while (true) {
      if (state_ == State::kStart) {
        const std::string_view rest = StripLeadingSpace(buffer_);
        if (rest.empty() && !final) break;
        if (StartsWith(rest, kPythonTag)) {
          buffer_.erase(0, buffer_.size() - rest.size() + kPythonTag.size());
          state_ = State::kCallStart;
          continue;
        }
        if (!final && StartsWith(kPythonTag, rest)) break;
        if (StartsWith(rest, "{")) {
          buffer_.erase(0, buffer_.size() - rest.size());
          state_ = State::kCallStart;
          continue;
        }
        state_ = State::kText;
        continue;
      }
      if (state_ == State::kText) {
        out.content += buffer_;
        buffer_.clear();
        break;
      }
      if (state_ == State::kCallStart) {
        buffer_.erase(0, buffer_.size() - StripLeadingSpace(buffer_).size());
        if (buffer_.empty()) break;
        scanner_.emplace(next_index_);
        state_ = State::kCall;
        continue;
      }
      if (state_ == State::kCall) {
        buffer_.erase(0, scanner_->Feed(buffer_, &out.tool_calls));
        if (scanner_->failed()) {
          out.content += scanner_->raw();
          state_ = State::kText;
          continue;
        }
        if (scanner_->done()) {
          ++next_index_;
          state_ = State::kAfterCall;
          continue;
        }
        if (final) scanner_->Finish(&out.tool_calls);
        break;
      }
      // kAfterCall: ';' and the next call, or the end; anything else is content.
      buffer_.erase(0, buffer_.size() - StripLeadingSpace(buffer_).size());
      if (buffer_.empty()) break;
      if (buffer_[0] == ';') {
        buffer_.erase(0, 1);
        state_ = State::kCallStart;
      } else {
        state_ = State::kText;
      }
    }
    return out;
  }

  State state_ = State::kStart;
  std::string buffer_;
  std::optional<CallObjectScanner> scanner_;
  int next_index_ = 0;
};

}  // namespace

std::unique_ptr<OutputParser> NewLlama3JsonParser() {
  return std::make_unique<Llama3JsonParser>();
}

}  // namespace lockstep::router::tool_calls
