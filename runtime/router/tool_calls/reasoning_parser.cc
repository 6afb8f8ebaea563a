#include "runtime/router/tool_calls/reasoning_parser.h"


namespace lockstep::router::tool_calls {

bool PromptOpensThinking(std::string_view prompt_text) {
  const size_t open = prompt_text.rfind(kThinkOpen);
  return open != std::string_view::npos &&
         prompt_text.find(kThinkClose, open) == std::string_view::npos;
}

ReasoningParser::ReasoningParser(bool starts_in_reasoning)
    : state_(starts_in_reasoning ? State::kReasoning : State::kStart),
      trim_front_(starts_in_reasoning) {
  reasoning_.set_hold(true);
}

OutputDelta ReasoningParser::Push(std::string_view text) {
  buffer_ += text;
  return Drain(/*final=*/false);
}

OutputDelta ReasoningParser::Finish() { return Drain(/*final=*/true); }

OutputDelta ReasoningParser::Drain(bool final) {
  OutputDelta out;
  while (!buffer_.empty()) {
    if (trim_front_) {
      const std::string_view rest = StripLeadingSpace(buffer_);
      buffer_.erase(0, buffer_.size() - rest.size());
      if (buffer_.empty()) break;
      trim_front_ = false;
    }
    if (state_ == State::kStart) {
      // Whitespace before the tag is dropped; before an answer it is the answer's.
      const std::string_view rest = StripLeadingSpace(buffer_);
      if (StartsWith(rest, kThinkOpen)) {
        buffer_.erase(0, buffer_.size() - rest.size() + kThinkOpen.size());
        state_ = State::kReasoning;
        trim_front_ = true;
        continue;
      }
      if (!final && StartsWith(kThinkOpen, rest)) break;
      state_ = State::kContent;
      continue;
    }
    if (state_ == State::kReasoning) {
      const size_t close = buffer_.find(kThinkClose);
      if (close != std::string::npos) {
        reasoning_.Add(std::string_view(buffer_).substr(0, close), &out.reasoning);
        reasoning_.DropHeld();
        buffer_.erase(0, close + kThinkClose.size());
        state_ = State::kContent;
        trim_front_ = true;
        continue;
      }
      const size_t hold = final ? 0 : PartialMarkerSuffix(buffer_, kThinkClose);
      reasoning_.Add(std::string_view(buffer_).substr(0, buffer_.size() - hold), &out.reasoning);
      buffer_.erase(0, buffer_.size() - hold);
      break;
    }
    out.content += buffer_;  // kContent
    buffer_.clear();
  }
  return out;
}

}  // namespace lockstep::router::tool_calls
