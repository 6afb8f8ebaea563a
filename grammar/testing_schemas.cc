#include "grammar/testing_schemas.h"

#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grammar/compiled_grammar.h"
#include "nlohmann/json.hpp"

namespace lockstep::grammar {

std::string ToolCallBenchSchema() {
  return R"({
  "type": "object",
  "properties": {
    "name": {"enum": ["get_weather", "get_forecast", "search_places"]},
    "arguments": {
      "type": "object",
      "properties": {
        "location": {"type": "string", "maxLength": 64},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "include_hourly": {"type": "boolean"},
        "date": {"type": "string", "format": "date"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
        "note": {"type": "string"}
      },
      "required": ["location", "unit", "days"],
      "additionalProperties": false
    }
  },
  "required": ["name", "arguments"],
  "additionalProperties": false
})";
}
namespace {

using Json = nlohmann::ordered_json;

const char* const kPatterns[] = {
    "^[a-z]{1,8}$",      "^\\d{3}-\\d{4}$",   "^(foo|bar)+$",    "^[A-Z][a-z]*( [A-Z][a-z]*)?$",
    "^#[0-9a-fA-F]{6}$", "^\\w+@\\w+\\.com$", "^[\\s\\S]{0,3}$", "^a\"b\\\\c?$",
    "^(?:x|y)?z{2,}$",   "^[^a-z]{1,4}$",     "^\\u00e9+.$",     "ab",
};
const char* const kFormats[] = {"date", "time", "date-time", "email",
                                "uuid", "uri",  "ipv4",      "hostname"};
const char* const kNames[] = {"id",
                              "name",
                              "age",
                              "tags",
                              "value",
                              "items",
                              "city",
                              "price",
                              "a b",
                              "quote\"d",
                              "\xC3\xA9t\xC3\xA9",
                              "next"};

class SchemaMaker {
 public:
  explicit SchemaMaker(uint32_t seed) : rng_(seed) {}

  Json Root() {
    Json root;
    if (Chance(0.2)) {
      // A recursive definition, ended by null.
      Json node = {{"type", "object"},
                   {"properties",
                    {{"value", Make(2)},
                     {"next", {{"anyOf", {{{"$ref", "#/$defs/node"}}, {{"type", "null"}}}}}}}},
                   {"required", {"value", "next"}},
                   {"additionalProperties", false}};
      root = {{"$defs", {{"node", node}}},
              {"type", "object"},
              {"properties", {{"head", {{"$ref", "#/$defs/node"}}}}},
              {"required", {"head"}},
              {"additionalProperties", false}};
      return root;
    }
    return Object(3);
  }

 private:
  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  Json Object(int depth) {
    Json props = Json::object(), required = Json::array();
    const int n = Int(0, 4);
    for (int i = 0; i < n; ++i) {
      std::string name = absl::StrCat(kNames[Int(0, std::size(kNames) - 1)], i);
      props[name] = Make(depth - 1);
      if (Chance(0.6)) required.push_back(name);
    }
    Json o = {{"type", "object"}, {"properties", props}, {"additionalProperties", false}};
    if (!required.empty()) o["required"] = required;
    return o;
  }

  Json Make(int depth) {
    const int kind = Int(0, depth <= 0 ? 9 : 13);
    switch (kind) {
      case 0:
        return {{"type", "boolean"}};
      case 1:
        return {{"type", "null"}};
      case 2:
        return {{"type", "string"}};
      case 3: {
        Json s = {{"type", "string"}};
        const int min = Int(0, 3);
        if (Chance(0.7)) s["minLength"] = min;
        s["maxLength"] = min + Int(0, 6);
        return s;
      }
      case 4:
        return {{"type", "string"}, {"pattern", kPatterns[Int(0, std::size(kPatterns) - 1)]}};
      case 5:
        return {{"type", "string"}, {"format", kFormats[Int(0, std::size(kFormats) - 1)]}};
      case 6: {
        Json s = {{"type", "integer"}};
        if (Chance(0.7)) s["minimum"] = Int(-1000, 1000);
        if (Chance(0.7))
          s["maximum"] = (s.contains("minimum") ? s["minimum"].get<int>() : 0) + Int(0, 5000);
        if (Chance(0.2)) {
          s["exclusiveMaximum"] = (s.contains("maximum")   ? s["maximum"].get<int>()
                                   : s.contains("minimum") ? s["minimum"].get<int>()
                                                           : 0) +
                                  2;
        }
        return s;
      }
      case 7: {
        Json s = {{"type", "number"}};
        if (Chance(0.7)) s["minimum"] = Int(-100, 100) / 4.0;
        if (Chance(0.7))
          s["maximum"] =
              (s.contains("minimum") ? s["minimum"].get<double>() : 0) + 1 + Int(0, 400) / 4.0;
        return s;
      }
      case 8: {
        Json values = Json::array();
        for (int i = Int(1, 4); i > 0; --i) {
          switch (Int(0, 3)) {
            case 0:
              values.push_back(absl::StrCat("v", Int(0, 99)));
              break;
            case 1:
              values.push_back(Int(-50, 50));
              break;
            case 2:
              values.push_back(nullptr);
              break;
            default:
              values.push_back(Json{{"k", Int(0, 9)}});
          }
        }
        return {{"enum", values}};
      }
      case 9:
        return {{"const", Chance(0.5) ? Json("fixed \"value\"") : Json(Int(0, 9))}};
      case 10: {
        Json a = {{"type", "array"}, {"items", Make(depth - 1)}};
        const int min = Int(0, 2);
        if (Chance(0.6)) a["minItems"] = min;
        if (Chance(0.7)) a["maxItems"] = min + Int(0, 3);
        return a;
      }
      case 11:
        return Object(depth - 1);
      case 12:
        return {{"anyOf", {Make(depth - 1), Make(depth - 1)}}};
      default:
        return {{"type", {"string", "null"}}, {"maxLength", Int(0, 5)}};
    }
  }

  std::mt19937 rng_;
};

}  // namespace

std::string RandomSchema(uint32_t seed) { return SchemaMaker(seed).Root().dump(); }

absl::StatusOr<std::string> SampleConstrained(std::shared_ptr<const CompiledGrammar> grammar,
                                              uint32_t seed, int max_tokens) {
  const Vocabulary& vocab = grammar->vocabulary();
  Matcher matcher(grammar);
  std::mt19937 rng(seed);
  std::normal_distribution<double> logit;
  std::vector<uint32_t> mask(MaskWords(vocab));
  std::vector<int32_t> allowed;
  std::vector<double> weights;
  std::string out;
  for (int step = 0; step < max_tokens; ++step) {
    matcher.FillNextTokenMask(absl::MakeSpan(mask));
    allowed.clear();
    weights.clear();
    for (int32_t t = 0; t < static_cast<int32_t>(vocab.token_bytes.size()); ++t) {
      if ((mask[t >> 5] >> (t & 31)) & 1) {
        allowed.push_back(t);
        weights.push_back(std::exp(logit(rng)));  // softmax at temperature 1
      }
    }
    if (allowed.empty()) {
      return absl::InternalError(
          absl::StrCat("dead end (IsDeadEnd ", matcher.IsDeadEnd(), ") after: ", out));
    }
    const int32_t token =
        allowed[std::discrete_distribution<size_t>(weights.begin(), weights.end())(rng)];
    if (!matcher.AcceptToken(token)) {
      return absl::InternalError(
          absl::StrCat("the mask allowed token ", token, " that AcceptToken refused after: ", out));
    }
    if (matcher.IsTerminated()) return out;
    out += vocab.token_bytes[token];
  }
  return absl::InternalError(absl::StrCat("no stop token within ", max_tokens, " tokens: ", out));
}

}  // namespace lockstep::grammar
