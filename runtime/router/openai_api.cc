#include "runtime/router/openai_api.h"

#include <limits>

#include "common/status_macros.h"
#include "fmt/format.h"
#include "runtime/router/chat_template.h"
#include "runtime/router/request_validation.h"

namespace lockstep::router {
namespace {

using nlohmann::json;

std::string Dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Typed access to the fields of the request object; the first type error is kept.
class Fields {
 public:
  explicit Fields(const json& object) : object_(object) {}

  // The value at `key`, or null when absent or JSON null.
  const json* Get(const char* key) const {
    auto it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }

  bool Int(const char* key, int64_t* out, int64_t min = std::numeric_limits<int32_t>::min(),
           int64_t max = std::numeric_limits<int32_t>::max()) {
    const json* value = Get(key);
    if (value == nullptr) return false;
    if (!value->is_number_integer()) return Fail(key, "an integer", *value);
    const int64_t v = value->is_number_unsigned() && value->get<uint64_t>() > INT64_MAX
                          ? std::numeric_limits<int64_t>::max()
                          : value->get<int64_t>();
    if (v < min || v > max) {
      return FailWith(key, fmt::format("{} must be in [{}, {}], got {}", key, min, max, v));
    }
    *out = v;
    return true;
  }

  bool Number(const char* key, double* out) {
    const json* value = Get(key);
    if (value == nullptr) return false;
    if (!value->is_number()) return Fail(key, "a number", *value);
    *out = value->get<double>();
    return true;
  }

  bool Bool(const char* key, bool* out) {
    const json* value = Get(key);
    if (value == nullptr) return false;
    if (!value->is_boolean()) return Fail(key, "a boolean", *value);
    *out = value->get<bool>();
    return true;
  }

  bool String(const char* key, std::string* out) {
    const json* value = Get(key);
    if (value == nullptr) return false;
    if (!value->is_string()) return Fail(key, "a string", *value);
    *out = value->get<std::string>();
    return true;
  }

  bool Fail(const char* key, const char* expected, const json& value) {
    return FailWith(key, fmt::format("{} must be {}, got {}", key, expected, value.type_name()));
  }
  bool FailWith(const char* key, std::string message) {
    if (status_.ok()) status_ = InvalidParam(key, message);
    return false;
  }
  // Unsupported values: `key` must be absent, null, or equal to `allowed`.
  void OnlyDefault(const char* key, const json& allowed, const char* what) {
    const json* value = Get(key);
    if (value != nullptr && *value != allowed) FailWith(key, fmt::format("{} {}", key, what));
  }

  const absl::Status& status() const { return status_; }

 private:
  const json& object_;
  absl::Status status_;
};

absl::StatusOr<std::vector<int32_t>> ParsePrompt(const json& prompt,
                                                 const tok::ByteTokenizer& tokenizer) {
  if (prompt.is_string()) return tokenizer.Encode(prompt.get<std::string>());
  if (!prompt.is_array()) {
    return InvalidParam("prompt", fmt::format("prompt must be a string or an array of token "
                                              "ids, got {}",
                                              prompt.type_name()));
  }
  if (prompt.size() == 1 && prompt[0].is_string()) {
    return tokenizer.Encode(prompt[0].get<std::string>());
  }
  std::vector<int32_t> ids;
  for (const json& id : prompt) {
    if (id.is_string() || id.is_array()) {
      return InvalidParam("prompt", "only one prompt per request is supported (n = 1)");
    }
    if (!id.is_number_integer() || id.get<int64_t>() < std::numeric_limits<int32_t>::min() ||
        id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return InvalidParam("prompt",
                          fmt::format("prompt token ids must be integers, got {}", Dump(id)));
    }
    ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return ids;
}

absl::StatusOr<std::string> ParseMessages(const json& messages) {
  if (!messages.is_array()) {
    return InvalidParam("messages",
                        fmt::format("messages must be an array, got {}", messages.type_name()));
  }
  std::vector<ChatMessage> parsed;
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return InvalidParam("messages", fmt::format("messages[{}] must be an object with a string "
                                                  "role",
                                                  i));
    }
    ChatMessage message{m["role"].get<std::string>(), ""};
    const json content = m.value("content", json());
    if (content.is_string()) {
      message.content = content.get<std::string>();
    } else if (content.is_array()) {
      for (const json& part : content) {
        if (!part.is_object() || part.value("type", json()) != "text" ||
            !part.value("text", json()).is_string()) {
          return InvalidParam("messages", fmt::format("messages[{}].content parts must be "
                                                      "{{\"type\": \"text\", \"text\": ...}}",
                                                      i));
        }
        message.content += part["text"].get<std::string>();
      }
    } else if (!content.is_null()) {
      return InvalidParam("messages", fmt::format("messages[{}].content must be a string or an "
                                                  "array of text parts, got {}",
                                                  i, content.type_name()));
    }
    parsed.push_back(std::move(message));
  }
  return RenderChatPrompt(parsed);
}

}  // namespace

absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(ApiKind kind, std::string_view body,
                                                 const tok::ByteTokenizer& tokenizer) {
  const json doc = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return InvalidParam("", "The request body is not valid JSON");
  }
  if (!doc.is_object()) return InvalidParam("", "The request body must be a JSON object");
  OpenAiRequest out;
  out.kind = kind;
  RouterRequest& request = out.request;
  sched::SamplingParams& sampling = request.sampling;
  sampling.temperature = 1.0f;  // the OpenAI default
  Fields f(doc);

  if (!f.String("model", &request.model)) {
    return f.status().ok() ? InvalidParam("model", "model is required") : f.status();
  }
  if (kind == ApiKind::kCompletion) {
    const json* prompt = f.Get("prompt");
    if (prompt == nullptr) return InvalidParam("prompt", "prompt is required");
    ASSIGN_OR_RETURN(request.prompt, ParsePrompt(*prompt, tokenizer));
  } else {
    const json* messages = f.Get("messages");
    if (messages == nullptr) return InvalidParam("messages", "messages is required");
    ASSIGN_OR_RETURN(std::string text, ParseMessages(*messages));
    request.prompt = tokenizer.Encode(text);
  }

  int64_t i64 = 0;
  double number = 0;
  if (f.Int("max_tokens", &i64) ||
      (kind == ApiKind::kChat && f.Int("max_completion_tokens", &i64))) {
    sampling.max_tokens = static_cast<int32_t>(i64);
  }
  if (f.Number("temperature", &number)) sampling.temperature = static_cast<float>(number);
  if (f.Number("top_p", &number)) sampling.top_p = static_cast<float>(number);
  if (f.Int("top_k", &i64)) sampling.top_k = static_cast<int32_t>(i64);
  if (f.Int("seed", &i64, std::numeric_limits<int64_t>::min(),
            std::numeric_limits<int64_t>::max())) {
    sampling.seed = static_cast<uint64_t>(i64);
    out.has_seed = true;
  }
  f.Bool("ignore_eos", &sampling.ignore_eos);
  if (const json* stops = f.Get("stop_token_ids")) {
    if (!stops->is_array()) {
      f.Fail("stop_token_ids", "an array of integers", *stops);
    } else {
      for (const json& id : *stops) {
        if (!id.is_number_integer()) {
          f.Fail("stop_token_ids", "an array of integers", id);
          break;
        }
        sampling.stop_token_ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
      }
    }
  }
  f.Bool("stream", &out.stream);
  if (const json* options = f.Get("stream_options")) {
    if (!options->is_object()) {
      f.Fail("stream_options", "an object", *options);
    } else {
      Fields(*options).Bool("include_usage", &out.include_usage);
    }
  }
  if (kind == ApiKind::kCompletion) {
    if (f.Int("logprobs", &i64, 0, 20)) {
      out.want_logprobs = true;
      out.top_logprobs = static_cast<int32_t>(i64);
    }
    f.OnlyDefault("echo", false, "is not supported (must be false)");
    f.OnlyDefault("best_of", 1, "is not supported (must be 1)");
  } else {
    f.Bool("logprobs", &out.want_logprobs);
    if (f.Int("top_logprobs", &i64, 0, 20)) out.top_logprobs = static_cast<int32_t>(i64);
  }
  f.OnlyDefault("n", 1, "must be 1");
  f.OnlyDefault("presence_penalty", 0, "is not supported (must be 0)");
  f.OnlyDefault("frequency_penalty", 0, "is not supported (must be 0)");
  if (const json* stop = f.Get("stop")) {
    if (!(stop->is_array() && stop->empty()) && !(stop->is_string() && stop->empty())) {
      f.FailWith("stop", "stop sequences are not supported; use stop_token_ids");
    }
  }
  if (const json* user = f.Get("user"); user != nullptr && !user->is_string()) {
    f.Fail("user", "a string", *user);
  }
  if (!f.status().ok()) return f.status();
  // The worker returns the chosen token's log-probability only with logprobs >= 1.
  if (out.want_logprobs) sampling.logprobs = std::max(1, out.top_logprobs);
  return out;
}

int HttpStatusOf(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kCancelled:
      return 499;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

std::string ErrorBody(const absl::Status& status) {
  const int http = HttpStatusOf(status);
  const char* type = http == 401   ? "authentication_error"
                     : http < 500  ? "invalid_request_error"
                     : http == 503 ? "service_unavailable"
                                   : "server_error";
  const std::string param = ParamOf(status);
  const std::string code = ErrorCodeOf(status);
  json error = {{"message", std::string(status.message())},
                {"type", type},
                {"param", param.empty() ? json() : json(param)},
                {"code", code.empty() ? json() : json(code)}};
  return Dump(json{{"error", error}});
}

std::string ErrorEvent(const absl::Status& status) {
  return "data: " + ErrorBody(status) + "\n\ndata: [DONE]\n\n";
}

std::string_view FinishReasonName(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_REASON_LENGTH:
      return "length";
    case v1::FINISH_REASON_STOP:
      return "stop";
    case v1::FINISH_REASON_CANCELLED:
      return "cancelled";
    case v1::FINISH_REASON_ERROR:
      return "error";
    default:
      return "";
  }
}

OpenAiResponseWriter::OpenAiResponseWriter(const OpenAiRequest& request, std::string id,
                                           int64_t created, const tok::ByteTokenizer& tokenizer)
    : kind_(request.kind),
      id_(std::move(id)),
      model_(request.request.model),
      created_(created),
      want_logprobs_(request.want_logprobs),
      top_logprobs_(request.top_logprobs),
      include_usage_(request.include_usage),
      tokenizer_(tokenizer) {}

json OpenAiResponseWriter::Envelope(bool chunk) const {
  const char* object = kind_ == ApiKind::kChat
                           ? (chunk ? "chat.completion.chunk" : "chat.completion")
                           : "text_completion";
  return json{{"id", id_}, {"object", object}, {"created", created_}, {"model", model_}};
}

json OpenAiResponseWriter::Choice(const std::string& text, const json& logprobs,
                                  const json& finish_reason, bool chunk) {
  json choice = {{"index", 0}};
  if (kind_ == ApiKind::kCompletion) {
    choice["text"] = text;
  } else if (chunk) {
    json delta = json::object();
    if (!sent_role_) {
      delta["role"] = "assistant";
      sent_role_ = true;
    }
    if (!text.empty()) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  }
  choice["logprobs"] = logprobs;
  choice["finish_reason"] = finish_reason;
  return choice;
}

std::string OpenAiResponseWriter::TokenText(int32_t id) const {
  if (tok::ByteTokenizer::IsByteToken(id)) {
    if (id < 0x80) return std::string(1, static_cast<char>(id));
    return fmt::format("bytes:\\x{:02x}", id);
  }
  if (id == tokenizer_.bos_token_id()) return "<|bos|>";
  if (id == tokenizer_.eos_token_id()) return "<|eos|>";
  return fmt::format("<|{}|>", id);
}

json OpenAiResponseWriter::Logprobs(const TokenDelta& delta) {
  if (!want_logprobs_) return json();
  auto bytes_of = [](int32_t id) {
    return tok::ByteTokenizer::IsByteToken(id) ? json::array({id}) : json::array();
  };
  if (kind_ == ApiKind::kChat) {
    json content = json::array();
    for (const v1::TokenLogprobs& lp : delta.logprobs) {
      json top = json::array();
      for (int i = 0; i < lp.top_size() && i < top_logprobs_; ++i) {
        top.push_back({{"token", TokenText(lp.top(i).token_id())},
                       {"logprob", lp.top(i).logprob()},
                       {"bytes", bytes_of(lp.top(i).token_id())}});
      }
      content.push_back({{"token", TokenText(lp.token_id())},
                         {"logprob", lp.logprob()},
                         {"bytes", bytes_of(lp.token_id())},
                         {"top_logprobs", top}});
    }
    return json{{"content", content}};
  }
  json tokens = json::array(), token_logprobs = json::array(), tops = json::array(),
       offsets = json::array();
  for (const v1::TokenLogprobs& lp : delta.logprobs) {
    tokens.push_back(TokenText(lp.token_id()));
    token_logprobs.push_back(lp.logprob());
    json top = json::object();
    for (int i = 0; i < lp.top_size() && i < top_logprobs_; ++i) {
      top[TokenText(lp.top(i).token_id())] = lp.top(i).logprob();
    }
    tops.push_back(top);
    offsets.push_back(text_offset_);
    text_offset_ += tokenizer_.TokenBytes({lp.token_id()}).size();
  }
  return json{{"tokens", tokens},
              {"token_logprobs", token_logprobs},
              {"top_logprobs", tops},
              {"text_offset", offsets}};
}

void OpenAiResponseWriter::MergeLogprobs(json& into, const json& more) const {
  if (more.is_null()) return;
  if (into.is_null()) {
    into = more;
    return;
  }
  for (auto& [key, value] : more.items()) {
    for (const json& item : value) into[key].push_back(item);
  }
}

json OpenAiResponseWriter::Usage(const RequestResult& result) const {
  return {{"prompt_tokens", result.prompt_tokens},
          {"completion_tokens", result.completion_tokens},
          {"total_tokens", result.prompt_tokens + result.completion_tokens}};
}

std::string OpenAiResponseWriter::StreamEvent(const TokenDelta& delta) {
  const std::string text = decoder_.Push(tokenizer_.TokenBytes(delta.token_ids));
  const json logprobs = Logprobs(delta);
  if (text.empty() && logprobs.is_null() && (kind_ == ApiKind::kCompletion || sent_role_)) {
    return "";  // e.g. the first bytes of a multi-byte character
  }
  json event = Envelope(true);
  event["choices"] = json::array({Choice(text, logprobs, json(), true)});
  return "data: " + Dump(event) + "\n\n";
}

std::string OpenAiResponseWriter::StreamEnd(const RequestResult& result) {
  json event = Envelope(true);
  event["choices"] = json::array({Choice(
      decoder_.Flush(), json(), std::string(FinishReasonName(result.finish_reason)), true)});
  std::string out = "data: " + Dump(event) + "\n\n";
  if (include_usage_) {
    json usage = Envelope(true);
    usage["choices"] = json::array();
    usage["usage"] = Usage(result);
    out += "data: " + Dump(usage) + "\n\n";
  }
  return out + "data: [DONE]\n\n";
}

void OpenAiResponseWriter::Append(const TokenDelta& delta) {
  text_ += decoder_.Push(tokenizer_.TokenBytes(delta.token_ids));
  MergeLogprobs(logprobs_, Logprobs(delta));
}

std::string OpenAiResponseWriter::Body(const RequestResult& result) {
  text_ += decoder_.Flush();
  json body = Envelope(false);
  body["choices"] = json::array(
      {Choice(text_, logprobs_, std::string(FinishReasonName(result.finish_reason)), false)});
  body["usage"] = Usage(result);
  return Dump(body);
}

}  // namespace lockstep::router
