#include "runtime/router/text/model_text.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <utility>

#include "common/status_macros.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "tokenizer/byte_tokenizer.h"
#include "tokenizer/hf_tokenizer.h"

namespace lockstep::router {
namespace {

using nlohmann::json;

// The JSON object in `path`, or null when the file does not exist.
absl::StatusOr<json> ReadJsonIfPresent(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (!std::filesystem::exists(path)) return json();
    return absl::NotFoundError(fmt::format("cannot read {}", path));
  }
  std::stringstream text;
  text << in.rdbuf();
  json doc = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return absl::InvalidArgumentError(fmt::format("{} is not a JSON object", path));
  }
  return doc;
}

// bos_token / eos_token: a string, or an AddedToken object {"content": ...}.
absl::StatusOr<std::string> SpecialToken(const json& config, const char* key,
                                         const std::string& file) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return absl::InvalidArgumentError(
      fmt::format("{}: {} must be a string or {{\"content\": ...}}", file, key));
}

absl::StatusOr<std::string> ChatTemplate(const json& config, const std::string& file) {
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    for (const json& named : *it) {
      if (named.is_object() && named.value("name", json()) == "default" &&
          named.value("template", json()).is_string()) {
        return named["template"].get<std::string>();
      }
    }
  }
  return absl::InvalidArgumentError(fmt::format(
      "{}: chat_template must be a string or a list holding a \"default\" template", file));
}

// generation_config.json's `key`, when present: a number in [min, max] (min excluded
// when `open_min`).
absl::StatusOr<std::optional<double>> DefaultNumber(const json& generation, const char* key,
                                                    double min, bool open_min, double max,
                                                    const std::string& file) {
  auto it = generation.find(key);
  if (it == generation.end() || it->is_null()) return std::nullopt;
  const double value = it->is_number() ? it->get<double>() : min - 1;
  if (!it->is_number() || value < min || (open_min && value == min) || value > max) {
    return absl::InvalidArgumentError(fmt::format("{}: {} must be a number in {}{}, {}], got {}",
                                                  file, key, open_min ? "(" : "[", min, max,
                                                  it->dump()));
  }
  return value;
}

absl::StatusOr<SamplingDefaults> ReadSamplingDefaults(const json& generation,
                                                      const std::string& file) {
  SamplingDefaults defaults;
  if (!generation.is_object()) return defaults;
  ASSIGN_OR_RETURN(const std::optional<double> temperature,
                   DefaultNumber(generation, "temperature", 0, false, 2, file));
  ASSIGN_OR_RETURN(const std::optional<double> top_p,
                   DefaultNumber(generation, "top_p", 0, true, 1, file));
  ASSIGN_OR_RETURN(const std::optional<double> repetition,
                   DefaultNumber(generation, "repetition_penalty", 0, true, 2, file));
  if (temperature.has_value()) defaults.temperature = static_cast<float>(*temperature);
  if (top_p.has_value()) defaults.top_p = static_cast<float>(*top_p);
  if (repetition.has_value()) defaults.repetition_penalty = static_cast<float>(*repetition);
  if (auto it = generation.find("top_k"); it != generation.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0 ||
        it->get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return absl::InvalidArgumentError(
          fmt::format("{}: top_k must be an integer >= 0 (0: off), got {}", file, it->dump()));
    }
    defaults.top_k = static_cast<int32_t>(it->get<int64_t>());
  }
  return defaults;
}

}  // namespace

absl::StatusOr<ModelText> LoadModelText(const std::string& dir) {
  ModelText text;
  const std::string tokenizer_path = dir + "/tokenizer.json";
  if (!std::filesystem::exists(tokenizer_path)) {
    ASSIGN_OR_RETURN(tok::ByteTokenizer byte, tok::ByteTokenizer::LoadFromModelDir(dir));
    text.bos_token_id = byte.bos_token_id();
    text.eos_token_id = byte.eos_token_id();
    text.tokenizer = std::make_shared<const ServingTokenizer>(std::move(byte));
    const std::string generation_path = dir + "/generation_config.json";
    ASSIGN_OR_RETURN(const json generation, ReadJsonIfPresent(generation_path));
    ASSIGN_OR_RETURN(text.sampling_defaults, ReadSamplingDefaults(generation, generation_path));
    return text;
  }
  ASSIGN_OR_RETURN(std::unique_ptr<tok::HfTokenizer> hf,
                   tok::HfTokenizer::LoadFromFile(tokenizer_path));
  const tok::HfTokenizer& tokenizer = *hf;

  const std::string config_path = dir + "/tokenizer_config.json";
  ASSIGN_OR_RETURN(const json config, ReadJsonIfPresent(config_path));
  bool clean_up_tokenization_spaces = false;
  if (config.is_object()) {
    ASSIGN_OR_RETURN(text.bos_token, SpecialToken(config, "bos_token", config_path));
    ASSIGN_OR_RETURN(text.eos_token, SpecialToken(config, "eos_token", config_path));
    ASSIGN_OR_RETURN(text.chat_template, ChatTemplate(config, config_path));
    const json clean_up = config.value("clean_up_tokenization_spaces", json(false));
    if (!clean_up.is_boolean() && !clean_up.is_null()) {
      return absl::InvalidArgumentError(
          fmt::format("{}: clean_up_tokenization_spaces must be a boolean, got {}", config_path,
                      clean_up.dump()));
    }
    clean_up_tokenization_spaces = clean_up.is_boolean() && clean_up.get<bool>();
  }
  std::shared_ptr<const tok::ChatTemplate> chat;
  if (!text.chat_template.empty()) {
    // A template the interpreter cannot render is a load error, never a request's.
    absl::StatusOr<tok::ChatTemplate> parsed =
        tok::ChatTemplate::FromTokenizerConfigFile(config_path);
    if (!parsed.ok()) {
      return absl::Status(parsed.status().code(),
                          fmt::format("{}: chat_template: {}", config_path,
                                      std::string(parsed.status().message())));
    }
    chat = std::make_shared<const tok::ChatTemplate>(*std::move(parsed));
  }
  text.tokenizer = std::make_shared<const ServingTokenizer>(
      std::shared_ptr<const tok::HfTokenizer>(std::move(hf)), std::move(chat),
      clean_up_tokenization_spaces);
  auto id_of = [&](const std::string& token, const char* key) -> absl::StatusOr<int32_t> {
    std::optional<int32_t> id = tokenizer.TokenToId(token);
    if (!id.has_value()) {
      return absl::InvalidArgumentError(
          fmt::format("{}: {} '{}' is not a token of {}", config_path, key, token, tokenizer_path));
    }
    return *id;
  };
  if (!text.bos_token.empty()) {
    ASSIGN_OR_RETURN(text.bos_token_id, id_of(text.bos_token, "bos_token"));
  }
  if (!text.eos_token.empty()) {
    ASSIGN_OR_RETURN(text.eos_token_id, id_of(text.eos_token, "eos_token"));
  }

  const std::string generation_path = dir + "/generation_config.json";
  ASSIGN_OR_RETURN(const json generation, ReadJsonIfPresent(generation_path));
  ASSIGN_OR_RETURN(text.sampling_defaults, ReadSamplingDefaults(generation, generation_path));
  const json eos = generation.is_object() ? generation.value("eos_token_id", json()) : json();
  if (eos.is_number_integer()) {
    text.eos_token_ids.push_back(eos.get<int32_t>());
  } else if (eos.is_array()) {
    for (const json& id : eos) {
      if (!id.is_number_integer()) {
        return absl::InvalidArgumentError(
            fmt::format("{}: eos_token_id must be an id or a list of ids", generation_path));
      }
      text.eos_token_ids.push_back(id.get<int32_t>());
    }
  } else if (!eos.is_null()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: eos_token_id must be an id or a list of ids", generation_path));
  } else if (text.eos_token_id.has_value()) {
    text.eos_token_ids.push_back(*text.eos_token_id);
  }
  for (int32_t id : text.eos_token_ids) {
    if (id < 0 || id >= tokenizer.vocab_size()) {
      return absl::InvalidArgumentError(
          fmt::format("{}: eos_token_id {} is outside the vocabulary [0, {})", generation_path, id,
                      tokenizer.vocab_size()));
    }
  }
  return text;
}

}  // namespace lockstep::router
