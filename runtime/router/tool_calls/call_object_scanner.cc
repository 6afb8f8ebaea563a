#include "runtime/router/tool_calls/call_object_scanner.h"

#include <utility>

#include "nlohmann/json.hpp"
#include "runtime/router/tool_calls/markers.h"

namespace lockstep::router::tool_calls {
namespace {

bool IsArgsKey(std::string_view key) { return key == "arguments" || key == "parameters"; }

// The value of a JSON string literal, or nothing when it is not one.
bool DecodeString(std::string_view literal, std::string* out) {
  const nlohmann::json value = nlohmann::json::parse(literal, nullptr, /*allow_exceptions=*/false);
  if (!value.is_string()) return false;
  *out = value.get<std::string>();
  return true;
}

}  // namespace

size_t CallObjectScanner::Feed(std::string_view text, std::vector<ToolCallDelta>* out) {
  size_t used = 0;
  while (used < text.size() && !done_ && !failed_) OnChar(text[used++], out);
  if (failed_ && sent_name_) {  // malformed after its name: the call ends here
    failed_ = false;
    Finish(out);
  }
  if (!args_pending_.empty() && sent_name_) {
    out->push_back({index_, "", std::exchange(args_pending_, "")});
  }
  return used;
}

void CallObjectScanner::OnChar(char c, std::vector<ToolCallDelta>* out) {
  raw_.push_back(c);
  const bool in_args = in_value_ && IsArgsKey(key_) && args_mode_ != Args::kNone;
  if (in_string_) {
    if (escape_) {
      escape_ = false;
    } else if (c == '\\') {
      escape_ = true;
    } else if (c == '"') {
      in_string_ = false;
    }
    if ((depth_ >= 2 || in_value_) && in_args) {
      args_.push_back(c);
      if (args_mode_ == Args::kStream) args_pending_.push_back(c);
    }
    if (!in_string_ && depth_ == 1) {
      const std::string_view literal = std::string_view(raw_).substr(string_start_);
      if (expect_key_) {
        if (!DecodeString(literal, &key_)) failed_ = true;
      } else if (key_ == "name") {
        has_name_ = DecodeString(literal, &name_) && !name_.empty();
        if (has_name_) SendName(out);
      }
    }
    return;
  }
  if (depth_ == 0) {
    if (c != '{') {
      failed_ = true;
      return;
    }
    depth_ = 1;
    expect_key_ = true;
    return;
  }
  if (depth_ >= 2) {
    if (c == '"') in_string_ = true;
    if (c == '{' || c == '[') ++depth_;
    if (c == '}' || c == ']') --depth_;
    if (in_args) {
      args_.push_back(c);
      if (args_mode_ == Args::kStream) args_pending_.push_back(c);
    }
    return;
  }
  // depth 1: the call object's own keys and values.
  if (IsJsonSpace(c)) {
    if (in_value_ && IsArgsKey(key_) && args_mode_ == Args::kBuffer) args_.push_back(c);
    return;
  }
  if (expect_key_) {
    if (c == '"') {
      in_string_ = true;
      string_start_ = raw_.size() - 1;
    } else if (c == ':') {
      expect_key_ = false;
    } else if (c == '}') {
      EndObject(out);
    } else if (c != ',') {
      failed_ = true;
    }
    return;
  }
  if (!in_value_) {
    if (c == ',' || c == '}') {  // a key without a value
      failed_ = true;
      return;
    }
    StartValue(c, out);
    return;
  }
  if (c == ',' || c == '}') {
    EndValue(out);
    if (c == '}') EndObject(out);
    return;
  }
  if (IsArgsKey(key_)) args_.push_back(c);  // a scalar's next byte
}

void CallObjectScanner::StartValue(char c, std::vector<ToolCallDelta>* out) {
  in_value_ = true;
  value_start_ = raw_.size() - 1;
  if (c == '"') {
    in_string_ = true;
    string_start_ = value_start_;
  }
  if (c == '{' || c == '[') depth_ = 2;
  if (!IsArgsKey(key_)) return;
  has_args_ = true;
  args_.clear();
  args_.push_back(c);
  args_mode_ = c == '{' && sent_name_ ? Args::kStream : Args::kBuffer;
  if (args_mode_ == Args::kStream) args_pending_.push_back(c);
  (void)out;
}

void CallObjectScanner::EndValue(std::vector<ToolCallDelta>* out) {
  if (IsArgsKey(key_) && args_mode_ == Args::kBuffer) {
    std::string text(StripTrailingSpace(args_));
    if (text == "null") {
      text = "{}";
    } else if (!text.empty() && text[0] == '"') {
      std::string unquoted;
      if (DecodeString(text, &unquoted)) text = std::move(unquoted);
    }
    args_ = std::move(text);
  }
  in_value_ = false;
  expect_key_ = true;
  key_.clear();
  (void)out;
}

void CallObjectScanner::EndObject(std::vector<ToolCallDelta>* out) {
  done_ = true;
  if (!has_name_) {
    failed_ = true;
    return;
  }
  if (!has_args_) args_ = "{}";
  if (args_mode_ != Args::kStream) {
    SendName(out);
    out->push_back({index_, "", args_});
  }
}

void CallObjectScanner::SendName(std::vector<ToolCallDelta>* out) {
  if (sent_name_) return;
  sent_name_ = true;
  out->push_back({index_, name_, ""});
}

void CallObjectScanner::Finish(std::vector<ToolCallDelta>* out) {
  if (done_ || failed_ || !has_name_) return;
  if (!args_pending_.empty()) out->push_back({index_, "", std::exchange(args_pending_, "")});
  if (args_mode_ == Args::kBuffer) out->push_back({index_, "", args_});
  done_ = true;
}

}  // namespace lockstep::router::tool_calls
