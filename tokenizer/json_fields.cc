#include "tokenizer/json_fields.h"

#include "fmt/format.h"

namespace lockstep::tok {

absl::StatusOr<std::string> TypeOf(const nlohmann::json& config, std::string_view what) {
  if (!config.is_object())
    return absl::InvalidArgumentError(fmt::format("{}: not an object", what));
  const auto it = config.find("type");
  if (it == config.end() || !it->is_string()) {
    return absl::InvalidArgumentError(fmt::format("{}: missing string field 'type'", what));
  }
  return it->get<std::string>();
}

absl::StatusOr<std::string> StringField(const nlohmann::json& config, std::string_view key,
                                        std::string_view what, bool required,
                                        std::string_view fallback) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) {
    if (required) {
      return absl::InvalidArgumentError(fmt::format("{}: missing field '{}'", what, key));
    }
    return std::string(fallback);
  }
  if (!it->is_string()) {
    return absl::InvalidArgumentError(fmt::format("{}: field '{}' must be a string", what, key));
  }
  return it->get<std::string>();
}

absl::StatusOr<bool> BoolField(const nlohmann::json& config, std::string_view key,
                               std::string_view what, bool fallback) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) {
    return absl::InvalidArgumentError(fmt::format("{}: field '{}' must be a boolean", what, key));
  }
  return it->get<bool>();
}

absl::StatusOr<int64_t> IntField(const nlohmann::json& config, std::string_view key,
                                 std::string_view what, int64_t fallback) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return fallback;
  if (!it->is_number_integer()) {
    return absl::InvalidArgumentError(fmt::format("{}: field '{}' must be an integer", what, key));
  }
  return it->get<int64_t>();
}

absl::StatusOr<PatternField> PatternOf(const nlohmann::json& config, std::string_view what) {
  const auto it = config.find("pattern");
  if (it != config.end() && it->is_object() && it->size() == 1) {
    for (const char* kind : {"String", "Regex"}) {
      const auto value = it->find(kind);
      if (value != it->end() && value->is_string()) {
        return PatternField{value->get<std::string>(), std::string_view(kind) == "Regex"};
      }
    }
  }
  return absl::InvalidArgumentError(
      fmt::format("{}: 'pattern' must be {{\"String\": ...}} or {{\"Regex\": ...}}", what));
}

absl::Status UnsupportedType(std::string_view what, std::string_view type) {
  return absl::UnimplementedError(fmt::format("{} type '{}' is not supported", what, type));
}

}  // namespace lockstep::tok
