// JSON parsing with bounds on what a document may expand to, for every parser of JSON
// that a client or a peer sends (the router's request bodies: docs/security.md §6).
//
// A document is refused while it is parsed, before the part past a bound is built:
//   * depth: arrays and objects nested more than `max_depth` levels (the top-level
//     value is level 1, so {"a": [1]} has depth 2). nlohmann::json's copy, dump and
//     comparison recurse once per level, and so do the consumers of a document (the
//     chat template's values); a bounded depth keeps every later step off the edge
//     of the stack.
//   * size: more than `max_values` values, counting every scalar, array and object (an
//     object member's key is not counted apart from its value). Each value costs a
//     bounded number of bytes once built (at most ~100 on 64-bit, plus its string's
//     characters, which the body itself bounds), so this bounds the memory a body of a
//     few bytes per value (`[0,0,0,...]`, `[[],[],...]`) expands to.
// Parsing never recurses (nlohmann's parser keeps its own stack) and takes time linear
// in the input: the members of an nlohmann::ordered_json object are appended rather
// than looked up one by one (its own parser is quadratic in an object's member count).
// A key given twice keeps the first key's place and the last value, as Python's
// json.loads and nlohmann's parser do.
//
//   absl::StatusOr<nlohmann::json> doc = ParseBoundedJson<nlohmann::json>(body);
//
// Thread-safe (a pure function).
#ifndef LOCKSTEP_COMMON_BOUNDED_JSON_H_
#define LOCKSTEP_COMMON_BOUNDED_JSON_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace lockstep {

// Deep enough for any real request (OpenAI tools' JSON schemas included), far from
// the stack's limit.
inline constexpr int kDefaultMaxJsonDepth = 64;
inline constexpr int64_t kDefaultMaxJsonValues = int64_t{1} << 18;

struct JsonBounds {
  int max_depth = kDefaultMaxJsonDepth;
  int64_t max_values = kDefaultMaxJsonValues;
};

// `text` as a document of BasicJson (nlohmann::json or nlohmann::ordered_json).
// INVALID_ARGUMENT when it is not JSON ("not valid JSON: <where and why>"), nests
// deeper than `bounds.max_depth` ("nested deeper than 64 levels ...") or holds more
// than `bounds.max_values` values ("more than N values ...").
template <typename BasicJson>
absl::StatusOr<BasicJson> ParseBoundedJson(std::string_view text, const JsonBounds& bounds = {});

extern template absl::StatusOr<nlohmann::json> ParseBoundedJson<nlohmann::json>(std::string_view,
                                                                                const JsonBounds&);
extern template absl::StatusOr<nlohmann::ordered_json> ParseBoundedJson<nlohmann::ordered_json>(
    std::string_view, const JsonBounds&);

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_BOUNDED_JSON_H_
