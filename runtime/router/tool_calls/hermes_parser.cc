// Hermes / Qwen tool calls: <tool_call>{"name": ..., "arguments": ...}</tool_call>.
#include <optional>
#include <string>

#include "runtime/router/tool_calls/call_object_scanner.h"
#include "runtime/router/tool_calls/markers.h"
#include "runtime/router/tool_calls/tool_parsers.h"

namespace lockstep::router::tool_calls {
namespace {

class HermesParser : public OutputParser {
 public:
  OutputDelta Push(std::string_view text) override {
    buffer_ += text;
    return Drain(/*final=*/false);
  }
  OutputDelta Finish() override { return Drain(/*final=*/true); }

 private:
  enum class State { kText, kCallStart, kCall, kAfterCall };

  OutputDelta Drain(bool final) {
    OutputDelta out;
    while (true) {
      if (state_ == State::kText) {
        const size_t open = buffer_.find(kHermesOpen);
        if (open != std::string::npos) {
          content_.Add(std::string_view(buffer_).substr(0, open), &out.content);
          buffer_.erase(0, open + kHermesOpen.size());
          state_ = State::kCallStart;
          continue;
        }
        const size_t hold = final ? 0 : PartialMarkerSuffix(buffer_, kHermesOpen);
        content_.Add(std::string_view(buffer_).substr(0, buffer_.size() - hold), &out.content);
        buffer_.erase(0, buffer_.size() - hold);
        break;
      }
      if (state_ == State::kCallStart) {
        buffer_.erase(0, buffer_.size() - StripLeadingSpace(buffer_).size());
        if (buffer_.empty()) {
          if (final) content_.Add(kHermesOpen, &out.content);
          break;
        }
        scanner_.emplace(next_index_);
        state_ = State::kCall;
        continue;
      }
      if (state_ == State::kCall) {
        buffer_.erase(0, scanner_->Feed(buffer_, &out.tool_calls));
        if (scanner_->failed()) {
          content_.Add(std::string(kHermesOpen) + scanner_->raw(), &out.content);
          state_ = State::kText;
          continue;
        }
        if (scanner_->done()) {
          ++next_index_;
          content_.set_hold(true);  // whitespace between and after calls is not content
          state_ = State::kAfterCall;
          continue;
        }
        if (final) scanner_->Finish(&out.tool_calls);
        break;
      }
      // kAfterCall: the closing tag, after optional whitespace.
      buffer_.erase(0, buffer_.size() - StripLeadingSpace(buffer_).size());
      if (StartsWith(buffer_, kHermesClose)) {
        buffer_.erase(0, kHermesClose.size());
      } else if (!final && StartsWith(kHermesClose, buffer_)) {
        break;  // maybe the start of the tag (or nothing yet)
      }
      state_ = State::kText;
    }
    return out;
  }

  State state_ = State::kText;
  std::string buffer_;
  std::optional<CallObjectScanner> scanner_;
  int next_index_ = 0;
  SpaceHeldText content_;
};

}  // namespace

std::unique_ptr<OutputParser> NewHermesParser() { return std::make_unique<HermesParser>(); }

}  // namespace lockstep::router::tool_calls
