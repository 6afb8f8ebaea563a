// Typed, non-throwing access to the fields of a config.json object, every error naming
// the file and the field. Private to the :model_config target (model_config.cc and
// model_config_deepseek.cc).
//
// Borrows the JSON object and the source name; thread-compatible.
#ifndef LOCKSTEP_RUNTIME_ENGINE_MODEL_MODEL_CONFIG_FIELDS_H_
#define LOCKSTEP_RUNTIME_ENGINE_MODEL_MODEL_CONFIG_FIELDS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "runtime/engine/model/model_config.h"

namespace lockstep::engine::config_internal {

using Json = nlohmann::json;

// Typed, non-throwing access to the fields of a config object; errors name the field.
class Fields {
 public:
  Fields(const Json& json, absl::string_view source) : json_(json), source_(source) {}

  absl::Status Error(absl::string_view field, absl::string_view problem) const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": ", field, ": ", problem));
  }

  // Absent and null both read as nullptr.
  const Json* Find(absl::string_view field) const {
    auto it = json_.find(std::string(field));
    if (it == json_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  // Present with the value null (Python's None, which some fields give a meaning).
  bool IsNull(absl::string_view field) const {
    auto it = json_.find(std::string(field));
    return it != json_.end() && it->is_null();
  }

  absl::StatusOr<std::optional<int64_t>> OptionalInt(absl::string_view field) const {
    const Json* value = Find(field);
    if (value == nullptr) return std::optional<int64_t>();
    if (!value->is_number_integer()) return Error(field, "must be an integer");
    return std::optional<int64_t>(value->get<int64_t>());
  }

  absl::StatusOr<int32_t> Int(absl::string_view field, std::optional<int64_t> fallback,
                              int64_t min_value) const {
    ASSIGN_OR_RETURN(std::optional<int64_t> value, OptionalInt(field));
    if (!value.has_value()) {
      if (!fallback.has_value()) return Error(field, "is required");
      value = fallback;
    }
    if (*value < min_value || *value > (int64_t{1} << 31) - 1) {
      return Error(field, absl::StrCat("must be >= ", min_value, ", got ", *value));
    }
    return static_cast<int32_t>(*value);
  }

  absl::StatusOr<double> Number(absl::string_view field, double fallback) const {
    const Json* value = Find(field);
    if (value == nullptr) return fallback;
    if (!value->is_number()) return Error(field, "must be a number");
    return value->get<double>();
  }

  absl::StatusOr<bool> Bool(absl::string_view field, bool fallback) const {
    const Json* value = Find(field);
    if (value == nullptr) return fallback;
    if (!value->is_boolean()) return Error(field, "must be true or false");
    return value->get<bool>();
  }

  // An int or a list of ints (the first is used), e.g. eos_token_id; `fallback` when
  // absent, -1 (none) when null or an empty list.
  absl::StatusOr<int32_t> TokenId(absl::string_view field, int32_t fallback) const {
    if (IsNull(field)) return -1;
    const Json* value = Find(field);
    if (value == nullptr) return fallback;
    const Json* first = value;
    if (value->is_array()) {
      if (value->empty()) return -1;
      first = &(*value)[0];
    }
    if (!first->is_number_integer() || first->get<int64_t>() < 0) {
      return Error(field, "must be a non-negative integer or a list of them");
    }
    return static_cast<int32_t>(first->get<int64_t>());
  }

  // Rejects a feature the engine does not implement: present, not null, and not
  // `allowed` (when given).
  absl::Status RejectUnless(absl::string_view field, absl::string_view feature,
                            const std::optional<Json>& allowed = std::nullopt) const {
    const Json* value = Find(field);
    if (value == nullptr) return absl::OkStatus();
    if (allowed.has_value() && *value == *allowed) return absl::OkStatus();
    return Error(field, absl::StrCat(value->dump(), " is not supported (", feature, ")"));
  }

 private:
  const Json& json_;
  absl::string_view source_;
};

// Parses the DeepSeek-V3 family's fields (model_config_deepseek.cc) into `config`, whose
// common fields are already read.
absl::Status ParseDeepseek(const Fields& fields, ModelConfig& config);

// Adds the DeepSeek-V3 family's fields of `config` to `json` (ModelConfigToJson).
void DeepseekToJson(const ModelConfig& config, Json& json);

}  // namespace lockstep::engine::config_internal

#endif  // LOCKSTEP_RUNTIME_ENGINE_MODEL_MODEL_CONFIG_FIELDS_H_
