// Mistral tool calls: [TOOL_CALLS][{"name": ..., "arguments": ...}, ...], or
// [TOOL_CALLS]NAME[ARGS]{...} (tokenizer v11+, one marker per call). [TOOL_CALLS] is a
// special token that decoding skips, so an output starting with a JSON array of objects
// is read as the calls too.
#include <optional>
#include <string>

#include "runtime/router/tool_calls/call_object_scanner.h"
#include "runtime/router/tool_calls/json_value_end.h"
#include "runtime/router/tool_calls/markers.h"
#include "runtime/router/tool_calls/tool_parsers.h"

namespace lockstep::router::tool_calls {
namespace {

class MistralParser : public OutputParser {
 public:
  OutputDelta Push(std::string_view text) override {
    buffer_ += text;
    return Drain(/*final=*/false);
  }
  OutputDelta Finish() override { return Drain(/*final=*/true); }

 private:
  enum class State { kStart, kText, kCallsStart, kElement, kCall, kName, kArgs };

  OutputDelta Drain(bool final) {
    OutputDelta out;
    while (true) {
      switch (state_) {
        case State::kStart: {  // an array of calls whose [TOOL_CALLS] was skipped?
          const std::string_view rest = StripLeadingSpace(buffer_);
          if (rest.empty() && !final) return out;
          if (StartsWith(rest, "[")) {
            const std::string_view inner = StripLeadingSpace(rest.substr(1));
            if (inner.empty() && !final) return out;
            if (StartsWith(inner, "{")) {
              buffer_.erase(0, buffer_.size() - rest.size());
              state_ = State::kCallsStart;
              continue;
            }
          }
          state_ = State::kText;
          continue;
        }
        case State::kText: {
          const size_t at = buffer_.find(kMistralToolCalls);
          if (at != std::string::npos) {
            content_.Add(std::string_view(buffer_).substr(0, at), &out.content);
            buffer_.erase(0, at + kMistralToolCalls.size());
            state_ = State::kCallsStart;
            continue;
          }
          const size_t hold = final ? 0 : PartialMarkerSuffix(buffer_, kMistralToolCalls);
          content_.Add(std::string_view(buffer_).substr(0, buffer_.size() - hold), &out.content);
          buffer_.erase(0, buffer_.size() - hold);
          return out;
        }
        case State::kCallsStart: {
          buffer_.erase(0, buffer_.size() - StripLeadingSpace(buffer_).size());
          if (buffer_.empty()) return out;
          content_.set_hold(true);
          if (buffer_[0] == '[') {
            buffer_.erase(0, 1);
            state_ = State::kElement;
          } else {
            state_ = State::kName;
          }
          continue;
        }
        case State::kElement: {  // inside the array: ',', ']' or the next call
          buffer_.erase(0, buffer_.size() - StripLeadingSpace(buffer_).size());
          if (buffer_.empty()) return out;
          if (buffer_[0] == ',') {
            buffer_.erase(0, 1);
          } else if (buffer_[0] == ']') {
            buffer_.erase(0, 1);
            state_ = State::kText;
          } else if (buffer_[0] == '{') {
            scanner_.emplace(index_);
            state_ = State::kCall;
          } else {
            state_ = State::kText;
          }
          continue;
        }
        case State::kCall: {
          buffer_.erase(0, scanner_->Feed(buffer_, &out.tool_calls));
          if (scanner_->failed()) {
            content_.Add(scanner_->raw(), &out.content);
            state_ = State::kText;
            continue;
          }
          if (scanner_->done()) {
            ++index_;
            state_ = State::kElement;
            continue;
          }
          if (final) scanner_->Finish(&out.tool_calls);
          return out;
        }
        case State::kName: {  // NAME[ARGS]
          const size_t at = buffer_.find(kMistralArgs);
          if (at == std::string::npos) {
            if (final) {
              content_.Add(buffer_, &out.content);
              buffer_.clear();
            }
            return out;
          }
          out.tool_calls.push_back(
              {index_, std::string(StripTrailingSpace(buffer_.substr(0, at))), ""});
          buffer_.erase(0, at + kMistralArgs.size());
          args_.emplace();
          args_started_ = false;
          state_ = State::kArgs;
          continue;
        }
        case State::kArgs: {
          if (!args_started_) {
            buffer_.erase(0, buffer_.size() - StripLeadingSpace(buffer_).size());
            if (buffer_.empty()) {
              if (final) out.tool_calls.push_back({index_, "", "{}"});
              return out;
            }
            args_started_ = true;
          }
          const size_t used = args_->Feed(buffer_);
          if (used > 0) out.tool_calls.push_back({index_, "", buffer_.substr(0, used)});
          buffer_.erase(0, used);
          if (!args_->done()) return out;
          ++index_;
          state_ = State::kText;
          continue;
        }
      }
    }
  }

  State state_ = State::kStart;
  std::string buffer_;
  std::optional<CallObjectScanner> scanner_;
  std::optional<JsonValueEnd> args_;
  bool args_started_ = false;
  int index_ = 0;
  SpaceHeldText content_;
};

}  // namespace

std::unique_ptr<OutputParser> NewMistralParser() { return std::make_unique<MistralParser>(); }

}  // namespace lockstep::router::tool_calls
