#include "tokenizer/chat_template.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tokenizer/jinja/template.h"
#include "tokenizer/jinja/value.h"

namespace lockstep::tok {
namespace {

using Json = nlohmann::ordered_json;

// A special token's text: a string, or an AddedToken object's "content".
std::string TokenText(const Json& token) {
  if (token.is_string()) return token.get<std::string>();
  if (token.is_object() && token.contains("content") && token["content"].is_string()) {
    return token["content"].get<std::string>();
  }
  return "";
}

// transformers' special_tokens_map: the set (non-empty) special tokens as strings.
Json SpecialTokens(const Json& config) {
  Json out = Json::object();
  for (const char* name : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                           "cls_token", "mask_token"}) {
    if (!config.contains(name)) continue;
    if (std::string text = TokenText(config[name]); !text.empty()) out[name] = text;
  }
  if (config.contains("additional_special_tokens") &&
      config["additional_special_tokens"].is_array()) {
    Json list = Json::array();
    for (const Json& t : config["additional_special_tokens"]) list.push_back(TokenText(t));
    if (!list.empty()) out["additional_special_tokens"] = list;
  }
  if (config.contains("extra_special_tokens") && config["extra_special_tokens"].is_object()) {
    for (const auto& [name, token] : config["extra_special_tokens"].items()) {
      if (std::string text = TokenText(token); !text.empty()) out[name] = text;
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::FromTokenizerConfig(const nlohmann::ordered_json& config,
                                                               std::string_view name) {
  if (!config.is_object()) return absl::InvalidArgumentError("tokenizer_config.json is not an object");
  const auto field = config.find("chat_template");
  if (field == config.end() || field->is_null()) {
    return absl::NotFoundError("tokenizer_config.json has no chat_template");
  }
  std::string source;
  if (field->is_string()) {
    source = field->get<std::string>();
  } else if (field->is_array()) {
    std::vector<std::string> names;
    for (const Json& entry : *field) {
      if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() ||
          !entry.contains("template") || !entry["template"].is_string()) {
        return absl::InvalidArgumentError(
            "chat_template list entries must be {\"name\": string, \"template\": string}");
      }
      names.push_back(entry["name"].get<std::string>());
      if (names.back() == name) source = entry["template"].get<std::string>();
    }
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      return absl::NotFoundError(absl::StrCat("no chat template named '", std::string(name),
                                              "'; the config has: ", absl::StrJoin(names, ", ")));
    }
  } else {
    return absl::InvalidArgumentError("chat_template must be a string or a list of named templates");
  }
  absl::StatusOr<ChatTemplate> chat = FromSource(source, SpecialTokens(config));
  if (!chat.ok()) {
    return absl::Status(chat.status().code(),
                        absl::StrCat("chat_template: ", chat.status().message()));
  }
  return chat;
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromTokenizerConfigFile(const std::string& path,
                                                                   std::string_view name) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream text;
  text << in.rdbuf();
  const Json config = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(path, " is not valid JSON"));
  absl::StatusOr<ChatTemplate> chat = FromTokenizerConfig(config, name);
  if (!chat.ok()) {
    return absl::Status(chat.status().code(), absl::StrCat(path, ": ", chat.status().message()));
  }
  return chat;
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromSource(std::string_view source,
                                                      nlohmann::ordered_json special_tokens) {
  if (special_tokens.is_null()) special_tokens = Json::object();
  if (!special_tokens.is_object()) return absl::InvalidArgumentError("special tokens must be an object");
  absl::StatusOr<std::shared_ptr<const jinja::Template>> parsed = jinja::Template::Parse(absl::string_view(source.data(), source.size()));
  if (!parsed.ok()) return parsed.status();
  ChatTemplate chat;
  chat.source_ = std::string(source);
  for (auto [name, out] : {std::pair{"bos_token", &chat.bos_token_}, {"eos_token", &chat.eos_token_}}) {
    if (special_tokens.contains(name) && special_tokens[name].is_string()) {
      *out = special_tokens[name].get<std::string>();
    }
  }
  chat.special_tokens_ = std::move(special_tokens);
  chat.template_ = std::move(*parsed);
  return chat;
}

absl::StatusOr<std::string> ChatTemplate::Render(const nlohmann::ordered_json& messages,
                                                 const nlohmann::ordered_json& tools,
                                                 bool add_generation_prompt,
                                                 const nlohmann::ordered_json& extra_context) const {
  if (!messages.is_array()) return absl::InvalidArgumentError("messages must be a list");
  if (!extra_context.is_null() && !extra_context.is_object()) {
    return absl::InvalidArgumentError("the extra template context must be an object");
  }
  // As transformers: special tokens, then the caller's variables, then the named ones.
  jinja::Dict vars;
  const auto set = [&vars](const std::string& key, jinja::Value value) {
    vars.Set(jinja::Value::String(key), std::move(value));
  };
  for (const auto& [key, value] : special_tokens_.items()) set(key, jinja::Value::FromJson(value));
  if (extra_context.is_object()) {
    for (const auto& [key, value] : extra_context.items()) set(key, jinja::Value::FromJson(value));
  }
  set("messages", jinja::Value::FromJson(messages));
  set("tools", jinja::Value::FromJson(tools));
  set("documents", jinja::Value::None());
  set("add_generation_prompt", jinja::Value::Bool(add_generation_prompt));
  return template_->Render(vars);
}

}  // namespace lockstep::tok
