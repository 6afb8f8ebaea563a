// Typed reads of tokenizer.json fields, with errors that name the component and field.
#ifndef LOCKSTEP_TOKENIZER_JSON_FIELDS_H_
#define LOCKSTEP_TOKENIZER_JSON_FIELDS_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace lockstep::tok {

// The largest token id a tokenizer.json may use. Tables are dense by id, so a file with
// an id far beyond any real vocabulary (the largest have about 262k tokens) would make
// loading allocate for every id below it; such a file is refused at load.
inline constexpr int64_t kMaxTokenId = (int64_t{1} << 22) - 1;

// `config["type"]`; an error naming `what` ("normalizer", ...) if it is missing.
absl::StatusOr<std::string> TypeOf(const nlohmann::json& config, std::string_view what);

// The string field `key` of `config` (part of `what`); `fallback` if it is absent or
// null, unless `required`.
absl::StatusOr<std::string> StringField(const nlohmann::json& config, std::string_view key,
                                        std::string_view what, bool required = true,
                                        std::string_view fallback = "");
absl::StatusOr<bool> BoolField(const nlohmann::json& config, std::string_view key,
                               std::string_view what, bool fallback);
absl::StatusOr<int64_t> IntField(const nlohmann::json& config, std::string_view key,
                                 std::string_view what, int64_t fallback);

// A pattern object {"String": s} or {"Regex": r}: the text, and whether it is a regex.
struct PatternField {
  std::string text;
  bool is_regex = false;
};
absl::StatusOr<PatternField> PatternOf(const nlohmann::json& config, std::string_view what);

// The error for a component type this implementation does not support.
absl::Status UnsupportedType(std::string_view what, std::string_view type);

}  // namespace lockstep::tok

#endif  // LOCKSTEP_TOKENIZER_JSON_FIELDS_H_
