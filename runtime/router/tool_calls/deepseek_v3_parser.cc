// DeepSeek V3 / R1 tool calls, written with the tokenizer's tool-call tokens:
//   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\nARGS\n```<｜tool▁call▁end｜>
//   ...<｜tool▁calls▁end｜>
// and V3.1's <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>.
#include <string>

#include "runtime/router/tool_calls/markers.h"
#include "runtime/router/tool_calls/tool_parsers.h"

namespace lockstep::router::tool_calls {
namespace {

constexpr std::string_view kFenceOpen = "```json";
constexpr std::string_view kFenceClose = "\n```";

class DeepSeekV3Parser : public OutputParser {
 public:
  OutputDelta Push(std::string_view text) override {
    buffer_ += text;
    return Drain(/*final=*/false);
  }
  OutputDelta Finish() override { return Drain(/*final=*/true); }

 private:
  enum class State { kText, kSection, kHead, kName, kFence, kArgs, kCallTail };

  void SendArgs(std::string_view args, OutputDelta& out) {
    if (!args.empty()) out.tool_calls.push_back({index_, "", std::string(args)});
  }

  void EndCall() {
    ++index_;
    state_ = State::kSection;
  }

  OutputDelta Drain(bool final) {
    OutputDelta out;
    while (true) {
      switch (state_) {
        case State::kText: {
          // The section's begin token, or a call's begin token on its own.
          size_t at = buffer_.find(kDeepSeekCallsBegin);
          size_t skip = kDeepSeekCallsBegin.size();
          if (const size_t call = buffer_.find(kDeepSeekCallBegin); call < at) {
            at = call;
            skip = 0;
          }
          if (at != std::string::npos) {
            content_.Add(std::string_view(buffer_).substr(0, at), &out.content);
            buffer_.erase(0, at + skip);
            state_ = State::kSection;
            continue;
          }
          const size_t hold = final ? 0
                                    : std::max(PartialMarkerSuffix(buffer_, kDeepSeekCallsBegin),
                                               PartialMarkerSuffix(buffer_, kDeepSeekCallBegin));
          content_.Add(std::string_view(buffer_).substr(0, buffer_.size() - hold), &out.content);
          buffer_.erase(0, buffer_.size() - hold);
          return out;
        }
        case State::kSection: {
          buffer_.erase(0, buffer_.size() - StripLeadingSpace(buffer_).size());
          if (StartsWith(buffer_, kDeepSeekCallBegin)) {
            buffer_.erase(0, kDeepSeekCallBegin.size());
            state_ = State::kHead;
            continue;
          }
          if (StartsWith(buffer_, kDeepSeekCallsEnd)) {
            buffer_.erase(0, kDeepSeekCallsEnd.size());
            content_.set_hold(true);
            state_ = State::kText;
            continue;
          }
          if (!final && (StartsWith(kDeepSeekCallBegin, buffer_) ||
                         StartsWith(kDeepSeekCallsEnd, buffer_))) {
            return out;
          }
          content_.set_hold(true);
          state_ = State::kText;  // not a call: the rest is content
          continue;
        }
        case State::kHead: {  // "function<｜tool▁sep｜>" (V3) or "NAME<｜tool▁sep｜>" (V3.1)
          const size_t sep = buffer_.find(kDeepSeekSep);
          if (sep == std::string::npos) return out;
          head_ = std::string(StripTrailingSpace(StripLeadingSpace(buffer_.substr(0, sep))));
          buffer_.erase(0, sep + kDeepSeekSep.size());
          state_ = State::kName;
          continue;
        }
        case State::kName: {
          const std::string_view rest = StripLeadingSpace(buffer_);
          if (rest.empty() && !final) return out;
          if (StartsWith(rest, "{") || StartsWith(rest, "[")) {  // V3.1
            out.tool_calls.push_back({index_, head_, ""});
            buffer_.erase(0, buffer_.size() - rest.size());
            state_ = State::kArgs;
            fenced_ = false;
            continue;
          }
          const size_t eol = buffer_.find('\n');
          if (eol == std::string::npos) {
            if (!final) return out;
            if (!rest.empty()) out.tool_calls.push_back({index_, std::string(rest), "{}"});
            buffer_.clear();
            return out;
          }
          out.tool_calls.push_back(
              {index_, std::string(StripTrailingSpace(StripLeadingSpace(buffer_.substr(0, eol)))),
               ""});
          buffer_.erase(0, eol + 1);
          state_ = State::kFence;
          continue;
        }
        case State::kFence: {
          if (!final && buffer_.size() < kFenceOpen.size() + 1 &&
              StartsWith(std::string(kFenceOpen) + "\n", buffer_)) {
            return out;
          }
          if (StartsWith(buffer_, kFenceOpen)) {
            buffer_.erase(0, kFenceOpen.size());
            if (!buffer_.empty() && buffer_[0] == '\n') buffer_.erase(0, 1);
          }
          fenced_ = true;
          state_ = State::kArgs;
          continue;
        }
        case State::kArgs: {
          const std::string_view end = fenced_ ? kFenceClose : kDeepSeekCallEnd;
          const size_t at = buffer_.find(end);
          if (at != std::string::npos) {
            SendArgs(std::string_view(buffer_).substr(0, at), out);
            buffer_.erase(0, at + end.size());
            if (fenced_) {
              state_ = State::kCallTail;
            } else {
              EndCall();
            }
            continue;
          }
          const size_t hold = final ? 0 : PartialMarkerSuffix(buffer_, end);
          SendArgs(std::string_view(buffer_).substr(0, buffer_.size() - hold), out);
          buffer_.erase(0, buffer_.size() - hold);
          return out;
        }
        case State::kCallTail: {
          const size_t at = buffer_.find(kDeepSeekCallEnd);
          if (at == std::string::npos) {
            if (final) buffer_.clear();
            return out;
          }
          buffer_.erase(0, at + kDeepSeekCallEnd.size());
          EndCall();
          continue;
        }
      }
    }
  }

  State state_ = State::kText;
  std::string buffer_;
  std::string head_;
  bool fenced_ = false;
  int index_ = 0;
  SpaceHeldText content_;
};

}  // namespace

std::unique_ptr<OutputParser> NewDeepSeekV3Parser() {
  return std::make_unique<DeepSeekV3Parser>();
}

}  // namespace lockstep::router::tool_calls
