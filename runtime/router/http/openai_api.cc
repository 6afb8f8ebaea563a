#include "runtime/router/http/openai_api.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"

#include "common/hash.h"
#include "common/status_macros.h"
#include "fmt/format.h"
#include "runtime/router/core/request_validation.h"
#include "runtime/router/http/chat_prompt.h"
#include "runtime/router/http/openai_grammar.h"
#include "runtime/router/http/openai_tools.h"

namespace lockstep::router {
namespace {

using nlohmann::json;

std::string Dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

// `value` as an int32 when it is an integer in range (never truncated), else nothing.
std::optional<int32_t> Int32Of(const json& value) {
  if (value.is_number_unsigned()) {
    const uint64_t v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) return std::nullopt;
    return static_cast<int32_t>(v);
  }
  if (!value.is_number_integer()) return std::nullopt;
  const int64_t v = value.get<int64_t>();
  if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
    return std::nullopt;
  }
  return static_cast<int32_t>(v);
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
    // Out of range is refused, never truncated (an unsigned past int64 included).
    if (value->is_number_unsigned() && value->get<uint64_t>() > static_cast<uint64_t>(max)) {
      return FailWith(key, fmt::format("{} must be in [{}, {}], got {}", key, min, max,
                                       value->get<uint64_t>()));
    }
    const int64_t v = value->get<int64_t>();
    if (v < min || v > max) {
      return FailWith(key, fmt::format("{} must be in [{}, {}], got {}", key, min, max, v));
    }
    *out = v;
    return true;
  }

  // A seed: any JSON integer in [-2^63, 2^64 - 1]; a negative one is taken as its
  // two's complement (the sampler's seed is 64 bits, clients send either signedness).
  bool Seed(const char* key, uint64_t* out) {
    const json* value = Get(key);
    if (value == nullptr) return false;
    if (!value->is_number_integer()) return Fail(key, "an integer", *value);
    *out = value->is_number_unsigned() ? value->get<uint64_t>()
                                       : static_cast<uint64_t>(value->get<int64_t>());
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
  const absl::Status& status() const { return status_; }

 private:
  const json& object_;
  absl::Status status_;
};

// A text prompt gets the tokenizer's special tokens (e.g. BOS) unless
// `add_special_tokens` is false, as in vLLM; token ids are taken as they are.
absl::StatusOr<std::vector<int32_t>> ParsePrompt(const json& prompt,
                                                 const ServingTokenizer& tokenizer,
                                                 bool add_special_tokens) {
  if (prompt.is_string()) return tokenizer.Encode(prompt.get<std::string>(), add_special_tokens);
  if (!prompt.is_array()) {
    return InvalidParam("prompt", fmt::format("prompt must be a string or an array of token "
                                              "ids, got {}",
                                              prompt.type_name()));
  }
  if (prompt.size() == 1 && prompt[0].is_string()) {
    return tokenizer.Encode(prompt[0].get<std::string>(), add_special_tokens);
  }
  std::vector<int32_t> ids;
  ids.reserve(prompt.size());
  for (const json& id : prompt) {
    if (id.is_string() || id.is_array()) {
      return InvalidParam("prompt",
                          "only one prompt per request is supported (use n for "
                          "several choices)");
    }
    const std::optional<int32_t> id32 = Int32Of(id);
    if (!id32.has_value()) {
      return InvalidParam("prompt", fmt::format("prompt token ids must be integers in the int32 "
                                                "range, got {}",
                                                JsonPreview(id)));
    }
    ids.push_back(*id32);
  }
  return ids;
}

// `stop_token_ids`: an array of at most kMaxStopTokenIds int32 integers.
void ParseStopTokenIds(Fields& f, std::vector<int32_t>* out) {
  const json* stops = f.Get("stop_token_ids");
  if (stops == nullptr) return;
  if (!stops->is_array()) {
    f.Fail("stop_token_ids", "an array of integers", *stops);
    return;
  }
  if (stops->size() > kMaxStopTokenIds) {
    f.FailWith("stop_token_ids", fmt::format("stop_token_ids may hold at most {} token ids, got {}",
                                             kMaxStopTokenIds, stops->size()));
    return;
  }
  for (size_t i = 0; i < stops->size(); ++i) {
    const std::optional<int32_t> id = Int32Of((*stops)[i]);
    if (!id.has_value()) {
      f.FailWith("stop_token_ids",
                 fmt::format("stop_token_ids must be an array of integers in the int32 range; "
                             "stop_token_ids[{}] is {}",
                             i, JsonPreview((*stops)[i])));
      return;
    }
    out->push_back(*id);
  }
}

// `stop`: null, a string, or an array of at most kMaxStopStrings strings.
void ParseStop(Fields& f, std::vector<std::string>* out) {
  const json* stop = f.Get("stop");
  if (stop == nullptr) return;
  if (stop->is_string()) {
    if (!stop->get<std::string>().empty()) out->push_back(stop->get<std::string>());
    return;
  }
  if (!stop->is_array()) {
    f.Fail("stop", "a string or an array of strings", *stop);
    return;
  }
  if (stop->size() > kMaxStopStrings) {
    f.FailWith("stop", fmt::format("stop may hold at most {} sequences, got {}", kMaxStopStrings,
                                   stop->size()));
    return;
  }
  for (size_t i = 0; i < stop->size(); ++i) {
    const json& item = (*stop)[i];
    if (!item.is_string() || item.get<std::string>().empty()) {
      f.FailWith("stop", fmt::format("stop[{}] must be a non-empty string", i));
      return;
    }
    out->push_back(item.get<std::string>());
  }
}

// `logit_bias`: an object from token ids (as strings, the JSON way) to numbers.
void ParseLogitBias(Fields& f, std::vector<std::pair<int32_t, float>>* out) {
  const json* bias = f.Get("logit_bias");
  if (bias == nullptr) return;
  if (!bias->is_object()) {
    f.Fail("logit_bias", "an object from token ids to numbers", *bias);
    return;
  }
  if (bias->size() > kMaxLogitBias) {
    f.FailWith("logit_bias", fmt::format("logit_bias may hold at most {} tokens, got {}",
                                         kMaxLogitBias, bias->size()));
    return;
  }
  for (const auto& [key, value] : bias->items()) {
    int32_t id = 0;
    if (!absl::SimpleAtoi(key, &id) || !value.is_number()) {
      f.FailWith("logit_bias",
                 fmt::format("logit_bias must map token ids to numbers (ids in the int32 "
                             "range), got {}: {}",
                             JsonPreview(json(key)), JsonPreview(value)));
      return;
    }
    out->emplace_back(id, value.get<float>());
  }
  std::sort(out->begin(), out->end());
}

}  // namespace

uint64_t ChoiceSeed(uint64_t seed, int32_t index) {
  return index == 0 ? seed : SplitMix64(seed ^ SplitMix64(static_cast<uint64_t>(index)));
}

absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(ApiKind kind, std::string_view body,
                                                 const ServingTokenizer& tokenizer,
                                                 const SamplingDefaults& defaults,
                                                 const JsonBounds& bounds) {
  ASSIGN_OR_RETURN(const json doc, ParseRequestBody<json>(body, bounds));
  RETURN_IF_ERROR(CheckOpenAiFields(kind, doc));
  OpenAiRequest out;
  out.kind = kind;
  RouterRequest& request = out.request;
  sched::SamplingParams& sampling = request.sampling;
  // The model's defaults, else OpenAI's; the request's fields override them below.
  sampling.temperature = defaults.temperature.value_or(1.0f);
  sampling.top_p = defaults.top_p.value_or(sampling.top_p);
  sampling.top_k = defaults.top_k.value_or(sampling.top_k);
  sampling.repetition_penalty = defaults.repetition_penalty.value_or(sampling.repetition_penalty);
  Fields f(doc);

  if (!f.String("model", &request.model)) {
    return f.status().ok() ? InvalidParam("model", "model is required") : f.status();
  }
  if (kind == ApiKind::kCompletion) {
    const json* prompt = f.Get("prompt");
    if (prompt == nullptr) return InvalidParam("prompt", "prompt is required");
    bool add_special_tokens = true;
    f.Bool("add_special_tokens", &add_special_tokens);
    RETURN_IF_ERROR(f.status());
    ASSIGN_OR_RETURN(request.prompt, ParsePrompt(*prompt, tokenizer, add_special_tokens));
  } else {
    if (f.Get("messages") == nullptr) return InvalidParam("messages", "messages is required");
    // Parsed again keeping the client's key order, which the template sees.
    ASSIGN_OR_RETURN(const nlohmann::ordered_json ordered,
                     ParseRequestBody<nlohmann::ordered_json>(body, bounds));
    ASSIGN_OR_RETURN(const ChatPromptOptions chat, ParseChatPromptOptions(ordered));
    ASSIGN_OR_RETURN(const ToolOptions tools, ParseToolOptions(doc));
    out.parse_tool_calls = tools.parse_tool_calls;
    out.parallel_tool_calls = tools.parallel_tool_calls;
    out.include_reasoning = tools.include_reasoning;
    out.output_family = tokenizer.parser_family();
    if (out.parse_tool_calls && out.output_family.tools == tool_calls::ToolFormat::kNone) {
      return InvalidParam("tool_choice",
                          "this model's chat template writes no tool-call format Lockstep "
                          "parses (hermes, llama3_json, deepseek_v3, mistral): use "
                          "tool_choice \"none\"");
    }
    if (tools.force_tool_call) {
      ASSIGN_OR_RETURN(sampling.grammar,
                       ForcedToolCallGrammar(ordered["tools"], tools.forced_function,
                                             out.output_family.tools, tools.parallel_tool_calls));
    }
    ASSIGN_OR_RETURN(request.prompt, EncodeChatPrompt(ordered["messages"], tokenizer, chat,
                                                      &out.prompt_text));
  }

  // Parsed again keeping the client's key order: a schema's properties are generated in
  // the order written.
  std::optional<grammar::GrammarSpec> format;
  if (doc.contains("response_format")) {
    ASSIGN_OR_RETURN(const nlohmann::ordered_json ordered_body,
                     ParseRequestBody<nlohmann::ordered_json>(body, bounds));
    ASSIGN_OR_RETURN(format, ResponseFormatGrammar(ordered_body));
  }
  if (format.has_value()) {
    if (sampling.grammar.has_value()) {
      return InvalidParam("response_format",
                          "response_format other than text together with a forced tool call "
                          "(tool_choice \"required\" or named) is not supported");
    }
    sampling.grammar = std::move(format);
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
  if (f.Seed("seed", &sampling.seed)) out.has_seed = true;
  f.Bool("ignore_eos", &sampling.ignore_eos);
  if (f.Number("presence_penalty", &number)) sampling.presence_penalty = static_cast<float>(number);
  if (f.Number("frequency_penalty", &number)) {
    sampling.frequency_penalty = static_cast<float>(number);
  }
  if (f.Number("repetition_penalty", &number)) {
    sampling.repetition_penalty = static_cast<float>(number);
  }
  if (f.Int("min_tokens", &i64, 0)) sampling.min_tokens = static_cast<int32_t>(i64);
  ParseLogitBias(f, &sampling.logit_bias);
  ParseStopTokenIds(f, &sampling.stop_token_ids);
  f.Bool("stream", &out.stream);
  if (const json* options = f.Get("stream_options")) {
    if (!options->is_object()) {
      f.Fail("stream_options", "an object", *options);
    } else {
      Fields(*options).Bool("include_usage", &out.include_usage);
    }
  }
  if (f.Int("n", &i64, 1, kMaxChoices)) out.n = static_cast<int32_t>(i64);
  if (kind == ApiKind::kCompletion) {
    if (f.Int("logprobs", &i64, 0, 20)) {
      out.want_logprobs = true;
      out.top_logprobs = static_cast<int32_t>(i64);
    }
    f.Bool("echo", &out.echo);
    if (out.echo && out.want_logprobs) {
      f.FailWith("echo", "echo with logprobs is not supported (prompt logprobs are not computed)");
    }
    if (const json* best_of = f.Get("best_of");
        best_of != nullptr && *best_of != 1 && *best_of != out.n) {
      f.FailWith("best_of", "best_of is not supported (must be 1 or n)");
    }
  } else {
    f.Bool("logprobs", &out.want_logprobs);
    if (f.Int("top_logprobs", &i64, 0, 20)) out.top_logprobs = static_cast<int32_t>(i64);
  }
  ParseStop(f, &request.stop);
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
                                           int64_t created, const ServingTokenizer& tokenizer,
                                           int32_t index)
    : kind_(request.kind),
      id_(std::move(id)),
      model_(request.request.model),
      created_(created),
      index_(index),
      want_logprobs_(request.want_logprobs),
      top_logprobs_(request.top_logprobs),
      include_usage_(request.include_usage),
      tokenizer_(tokenizer),
      text_stream_(tokenizer, request.request.stop),
      parallel_tool_calls_(request.parallel_tool_calls),
      include_reasoning_(request.include_reasoning) {
  if (request.echo) echo_ = tokenizer.Decode(request.request.prompt, /*skip_special_tokens=*/true);
  if (kind_ == ApiKind::kChat &&
      (request.output_family.reasoning || request.parse_tool_calls)) {
    parser_ = tool_calls::NewOutputParser(request.output_family, request.prompt_text,
                                          request.parse_tool_calls);
  }
}

tool_calls::OutputDelta OpenAiResponseWriter::Parse(const std::string& text, bool final) {
  tool_calls::OutputDelta delta = text.empty() ? tool_calls::OutputDelta{} : parser_->Push(text);
  if (final) delta.Append(parser_->Finish());
  if (!include_reasoning_) delta.reasoning.clear();
  if (!parallel_tool_calls_) {
    std::erase_if(delta.tool_calls,
                  [](const tool_calls::ToolCallDelta& call) { return call.index > 0; });
  }
  if (!delta.tool_calls.empty()) any_tool_call_ = true;
  return delta;
}

std::string OpenAiResponseWriter::FinishReason(const RequestResult& result) const {
  const std::string_view reason = FinishReasonName(result.finish_reason);
  // As OpenAI and vLLM answer: the model stopped after calling tools.
  if (any_tool_call_ && reason == "stop") return "tool_calls";
  return std::string(reason);
}

std::string OpenAiResponseWriter::CallId(int call) const {
  Fnv1a64 hash;
  hash.Add(id_);
  const uint64_t bits =
      SplitMix64(hash.value() ^ SplitMix64((static_cast<uint64_t>(index_) << 32) | call));
  return fmt::format("call_{:016x}", bits);
}

json OpenAiResponseWriter::ChatChunkChoice(const tool_calls::OutputDelta& delta,
                                           const json& logprobs, const json& finish_reason) {
  json message = json::object();
  if (!sent_role_) {
    message["role"] = "assistant";
    sent_role_ = true;
  }
  if (!delta.content.empty()) message["content"] = delta.content;
  if (!delta.reasoning.empty()) message["reasoning_content"] = delta.reasoning;
  if (!delta.tool_calls.empty()) {
    json calls = json::array();
    for (const tool_calls::ToolCallDelta& call : delta.tool_calls) {
      if (!calls.empty() && calls.back()["index"] == call.index) {  // same call: merge
        calls.back()["function"]["arguments"] =
            calls.back()["function"]["arguments"].get<std::string>() + call.arguments;
        continue;
      }
      json item = {{"index", call.index}};
      if (!call.name.empty()) {
        item["id"] = CallId(call.index);
        item["type"] = "function";
        item["function"] = {{"name", call.name}, {"arguments", call.arguments}};
      } else {
        item["function"] = {{"arguments", call.arguments}};
      }
      calls.push_back(std::move(item));
    }
    message["tool_calls"] = std::move(calls);
  }
  return json{{"index", index_},
              {"delta", std::move(message)},
              {"logprobs", logprobs},
              {"finish_reason", finish_reason}};
}

json OpenAiResponseWriter::WholeMessage() const {
  json message = {{"role", "assistant"}};
  const bool calls = !parsed_.tool_calls.empty();
  message["content"] = parsed_.content.empty() && calls ? json() : json(parsed_.content);
  if (!parsed_.reasoning.empty()) message["reasoning_content"] = parsed_.reasoning;
  if (calls) {
    json items = json::array();
    for (size_t i = 0; i < parsed_.tool_calls.size(); ++i) {
      items.push_back({{"id", CallId(static_cast<int>(i))},
                       {"type", "function"},
                       {"function",
                        {{"name", parsed_.tool_calls[i].name},
                         {"arguments", parsed_.tool_calls[i].arguments}}}});
    }
    message["tool_calls"] = std::move(items);
  }
  return message;
}

json OpenAiResponseWriter::Envelope(bool chunk) const {
  const char* object = kind_ == ApiKind::kChat
                           ? (chunk ? "chat.completion.chunk" : "chat.completion")
                           : "text_completion";
  return json{{"id", id_}, {"object", object}, {"created", created_}, {"model", model_}};
}

json OpenAiResponseWriter::Choice(const std::string& text, const json& logprobs,
                                  const json& finish_reason, bool chunk) {
  json choice = {{"index", index_}};
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

json OpenAiResponseWriter::Logprobs(const TokenDelta& delta) {
  if (!want_logprobs_) return json();
  auto bytes_of = [this](int32_t id) {
    json bytes = json::array();
    for (unsigned char c : tokenizer_.TokenBytes(id)) bytes.push_back(c);
    return bytes;
  };
  if (kind_ == ApiKind::kChat) {
    json content = json::array();
    for (const v1::TokenLogprobs& lp : delta.logprobs) {
      json top = json::array();
      for (int i = 0; i < lp.top_size() && i < top_logprobs_; ++i) {
        top.push_back({{"token", tokenizer_.TokenName(lp.top(i).token_id())},
                       {"logprob", lp.top(i).logprob()},
                       {"bytes", bytes_of(lp.top(i).token_id())}});
      }
      content.push_back({{"token", tokenizer_.TokenName(lp.token_id())},
                         {"logprob", lp.logprob()},
                         {"bytes", bytes_of(lp.token_id())},
                         {"top_logprobs", top}});
    }
    return json{{"content", content}};
  }
  json tokens = json::array(), token_logprobs = json::array(), tops = json::array(),
       offsets = json::array();
  for (const v1::TokenLogprobs& lp : delta.logprobs) {
    tokens.push_back(tokenizer_.TokenName(lp.token_id()));
    token_logprobs.push_back(lp.logprob());
    json top = json::object();
    for (int i = 0; i < lp.top_size() && i < top_logprobs_; ++i) {
      top[tokenizer_.TokenName(lp.top(i).token_id())] = lp.top(i).logprob();
    }
    tops.push_back(top);
    offsets.push_back(text_offset_);
    text_offset_ += tokenizer_.TokenBytes(lp.token_id()).size();
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

std::string OpenAiResponseWriter::NextText(const TokenDelta& delta) {
  return std::exchange(echo_, "") + text_stream_.Push(delta.token_ids);
}

std::string OpenAiResponseWriter::FinishText() {
  return std::exchange(echo_, "") + text_stream_.Finish();
}

std::string OpenAiResponseWriter::StreamEvent(const TokenDelta& delta) {
  const std::string text = NextText(delta);
  const json logprobs = Logprobs(delta);
  if (parser_ != nullptr) {
    const tool_calls::OutputDelta parsed = Parse(text, /*final=*/false);
    if (parsed.empty() && logprobs.is_null() && sent_role_) return "";
    json event = Envelope(true);
    event["choices"] = json::array({ChatChunkChoice(parsed, logprobs, json())});
    return "data: " + Dump(event) + "\n\n";
  }
  if (text.empty() && logprobs.is_null() && (kind_ == ApiKind::kCompletion || sent_role_)) {
    return "";  // e.g. the first bytes of a multi-byte character
  }
  json event = Envelope(true);
  event["choices"] = json::array({Choice(text, logprobs, json(), true)});
  return "data: " + Dump(event) + "\n\n";
}

std::string OpenAiResponseWriter::StreamFinish(const RequestResult& result) {
  json event = Envelope(true);
  if (parser_ != nullptr) {
    const tool_calls::OutputDelta parsed = Parse(FinishText(), /*final=*/true);
    event["choices"] = json::array({ChatChunkChoice(parsed, json(), FinishReason(result))});
    return "data: " + Dump(event) + "\n\n";
  }
  event["choices"] = json::array(
      {Choice(FinishText(), json(), std::string(FinishReasonName(result.finish_reason)), true)});
  return "data: " + Dump(event) + "\n\n";
}

namespace {

json Usage(const std::vector<RequestResult>& results) {
  // Every choice runs the same prompt: it counts once.
  const int64_t prompt = results.empty() ? 0 : results[0].prompt_tokens;
  int64_t completion = 0;
  for (const RequestResult& result : results) completion += result.completion_tokens;
  // The prompt tokens served from a prefix cache: the first choice's (every choice is
  // its own request and may land elsewhere).
  const int64_t cached = results.empty() ? 0 : results[0].cached_prompt_tokens;
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

}  // namespace

std::string OpenAiResponseWriter::StreamTail(const std::vector<RequestResult>& results) const {
  std::string out;
  if (include_usage_) {
    json usage = Envelope(true);
    usage["choices"] = json::array();
    usage["usage"] = Usage(results);
    out += "data: " + Dump(usage) + "\n\n";
  }
  return out + "data: [DONE]\n\n";
}

std::string OpenAiResponseWriter::StreamEnd(const RequestResult& result) {
  return StreamFinish(result) + StreamTail({result});
}

void OpenAiResponseWriter::Append(const TokenDelta& delta) {
  if (parser_ != nullptr) {
    parsed_.Add(Parse(NextText(delta), /*final=*/false));
  } else {
    text_ += NextText(delta);
  }
  MergeLogprobs(logprobs_, Logprobs(delta));
}

json OpenAiResponseWriter::FinishedChoice(const RequestResult& result) {
  if (parser_ != nullptr) {
    parsed_.Add(Parse(FinishText(), /*final=*/true));
    return json{{"index", index_},
                {"message", WholeMessage()},
                {"logprobs", logprobs_},
                {"finish_reason", FinishReason(result)}};
  }
  text_ += FinishText();
  return Choice(text_, logprobs_, std::string(FinishReasonName(result.finish_reason)), false);
}

std::string OpenAiResponseWriter::Body(const std::vector<json>& choices,
                                       const std::vector<RequestResult>& results) const {
  json body = Envelope(false);
  body["choices"] = choices;
  body["usage"] = Usage(results);
  return Dump(body);
}

std::string OpenAiResponseWriter::Body(const RequestResult& result) {
  return Body({FinishedChoice(result)}, {result});
}

}  // namespace lockstep::router
