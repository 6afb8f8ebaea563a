#include "grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "grammar/integer_range.h"
#include "grammar/json_rules.h"
#include "grammar/json_schema_formats.h"
#include "grammar/regex.h"
#include "nlohmann/json.hpp"

namespace lockstep::grammar {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kMaxSchemaDepth = 64;
constexpr int kMaxTextNesting = 256;
// The default bounds of a number with only one bound given.
constexpr double kDefaultBound = 1e15;

// Keywords that do not constrain the value.
const absl::flat_hash_set<std::string>& Annotations() {
  static const auto* k = new absl::flat_hash_set<std::string>{
      "$schema",     "$id",     "$comment",    "$anchor",          "title",
      "description", "default", "examples",    "deprecated",       "readOnly",
      "writeOnly",   "$defs",   "definitions", "contentMediaType", "contentEncoding",
      "strict",      "name"};
  return *k;
}

const absl::flat_hash_set<std::string>& Supported() {
  static const auto* k = new absl::flat_hash_set<std::string>{"type",
                                                              "properties",
                                                              "required",
                                                              "additionalProperties",
                                                              "items",
                                                              "minItems",
                                                              "maxItems",
                                                              "enum",
                                                              "const",
                                                              "anyOf",
                                                              "oneOf",
                                                              "allOf",
                                                              "$ref",
                                                              "pattern",
                                                              "format",
                                                              "minLength",
                                                              "maxLength",
                                                              "minimum",
                                                              "maximum",
                                                              "exclusiveMinimum",
                                                              "exclusiveMaximum"};
  return *k;
}

absl::Status CheckNesting(std::string_view text) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxTextNesting) {
        return absl::InvalidArgumentError("JSON Schema: nested more than 256 levels deep");
      }
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return absl::OkStatus();
}

// The top-level "x-lockstep-wrap" (json_schema.h).
struct Wrap {
  std::string begin, end, separator;
  bool repeat = false;
};

absl::StatusOr<std::optional<Wrap>> TakeWrap(Json& schema) {
  if (!schema.is_object() || !schema.contains("x-lockstep-wrap")) return std::nullopt;
  const Json w = schema["x-lockstep-wrap"];
  schema.erase("x-lockstep-wrap");
  Wrap wrap;
  if (!w.is_object()) {
    return absl::InvalidArgumentError("JSON Schema: x-lockstep-wrap must be an object");
  }
  for (const auto& [key, value] : w.items()) {
    if (key == "repeat" && value.is_boolean()) {
      wrap.repeat = value.get<bool>();
    } else if ((key == "begin" || key == "end" || key == "separator") && value.is_string()) {
      (key == "begin" ? wrap.begin : key == "end" ? wrap.end : wrap.separator) =
          value.get<std::string>();
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("JSON Schema: x-lockstep-wrap: unexpected '", key, "'"));
    }
  }
  return wrap;
}

class SchemaCompiler {
 public:
  explicit SchemaCompiler(const Json* root) : root_(root) { json_ = AddJsonRules(&b_); }

  absl::StatusOr<Grammar> Run(const std::optional<Wrap>& wrap) {
    absl::StatusOr<Expr> value = Compile(*root_, "", 0);
    if (!value.ok()) return value.status();
    const int32_t root = b_.Rule("root");
    if (!wrap.has_value()) {
      b_.Define(root, Expr::Sequence({Ws(), *std::move(value), Ws()}));
    } else {
      const int32_t one = b_.NewRule("wrapped");
      b_.Define(one, Expr::Sequence({Expr::Literal(wrap->begin), *std::move(value),
                                     Expr::Literal(wrap->end)}));
      Expr more = Expr::Star(Expr::Sequence({Expr::Literal(wrap->separator), Expr::Ref(one)}));
      b_.Define(root, wrap->repeat ? Expr::Sequence({Expr::Ref(one), std::move(more)})
                                   : Expr::Ref(one));
    }
    absl::StatusOr<Grammar> g = b_.Build(root);
    if (!g.ok())
      return absl::InvalidArgumentError(absl::StrCat("JSON Schema: ", g.status().message()));
    return g;
  }

 private:
  absl::Status Error(const std::string& path, std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("JSON Schema at '", path.empty() ? "#" : path, "': ", std::string(what)));
  }
  Expr Ws() const { return Expr::Ref(json_.ws); }

  // A rule for a subschema (shared by every place that uses it).
  absl::StatusOr<Expr> CompileToRule(const Json& schema, const std::string& path, int depth) {
    absl::StatusOr<Expr> e = Compile(schema, path, depth);
    if (!e.ok()) return e;
    if (e->kind == Expr::Kind::kRule) return e;
    const int32_t rule = b_.NewRule(path.empty() ? "schema" : path);
    b_.Define(rule, *std::move(e));
    return Expr::Ref(rule);
  }

  absl::StatusOr<Expr> Compile(const Json& s, const std::string& path, int depth) {
    if (depth > kMaxSchemaDepth) return Error(path, "schemas nested too deeply");
    if (s.is_boolean()) {
      if (!s.get<bool>()) return Error(path, "the schema 'false' matches nothing");
      return Expr::Ref(json_.value);
    }
    if (!s.is_object()) return Error(path, "a schema must be an object or a boolean");
    for (const auto& [key, unused] : s.items()) {
      if (!Annotations().contains(key) && !Supported().contains(key)) {
        return Error(path, absl::StrCat("keyword '", key, "' is not supported"));
      }
    }
    if (s.contains("$ref")) return Ref(s["$ref"], path, depth);
    // Below a schema that is not itself a "$ref", a reference back is recursion through
    // a value, not an alias cycle.
    std::vector<std::string> aliases;
    aliases.swap(aliases_);
    absl::Cleanup restore = [&] { aliases_.swap(aliases); };
    if (s.contains("const")) return Expr::Literal(s["const"].dump());
    if (s.contains("enum")) {
      const Json& values = s["enum"];
      if (!values.is_array() || values.empty())
        return Error(path, "'enum' must be a non-empty array");
      std::vector<Expr> choices;
      for (const Json& v : values) choices.push_back(Expr::Literal(v.dump()));
      return choices.size() == 1 ? std::move(choices[0]) : Expr::Choice(std::move(choices));
    }
    for (const char* key : {"anyOf", "oneOf", "allOf"}) {
      if (!s.contains(key)) continue;
      const Json& list = s[key];
      if (!list.is_array() || list.empty())
        return Error(path, absl::StrCat("'", key, "' must be a non-empty array"));
      if (std::string(key) == "allOf" && list.size() != 1) {
        return Error(path, "'allOf' with more than one schema is not supported");
      }
      for (const auto& [k, unused] : s.items()) {
        if (k != key && !Annotations().contains(k)) {
          return Error(path, absl::StrCat("'", k, "' next to '", key, "' is not supported"));
        }
      }
      std::vector<Expr> choices;
      for (size_t i = 0; i < list.size(); ++i) {
        absl::StatusOr<Expr> e =
            CompileToRule(list[i], absl::StrCat(path, "/", key, "/", i), depth + 1);
        if (!e.ok()) return e;
        choices.push_back(*std::move(e));
      }
      return choices.size() == 1 ? std::move(choices[0]) : Expr::Choice(std::move(choices));
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      const Json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const Json& item : t) {
          if (!item.is_string()) return Error(path, "'type' must be a string or strings");
          types.push_back(item.get<std::string>());
        }
      } else {
        return Error(path, "'type' must be a string or a non-empty array");
      }
    } else if (s.contains("properties") || s.contains("required") ||
               s.contains("additionalProperties")) {
      types = {"object"};
    } else if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) {
      types = {"array"};
    } else if (s.contains("pattern") || s.contains("format") || s.contains("minLength") ||
               s.contains("maxLength")) {
      types = {"string"};
    } else if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
               s.contains("exclusiveMaximum")) {
      types = {"number"};
    } else {
      return Expr::Ref(json_.value);
    }
    std::vector<Expr> choices;
    for (const std::string& type : types) {
      absl::StatusOr<Expr> e = CompileType(s, type, path, depth);
      if (!e.ok()) return e;
      choices.push_back(*std::move(e));
    }
    return choices.size() == 1 ? std::move(choices[0]) : Expr::Choice(std::move(choices));
  }

  absl::StatusOr<Expr> CompileType(const Json& s, const std::string& type, const std::string& path,
                                   int depth) {
    if (type == "object") return Object(s, path, depth);
    if (type == "array") return Array(s, path, depth);
    if (type == "string") return String(s, path);
    if (type == "integer") return Number(s, path, /*integer=*/true);
    if (type == "number") return Number(s, path, /*integer=*/false);
    if (type == "boolean") return Expr::Choice({Expr::Literal("true"), Expr::Literal("false")});
    if (type == "null") return Expr::Literal("null");
    return Error(path, absl::StrCat("unknown type '", type, "'"));
  }

  absl::StatusOr<Expr> Ref(const Json& ref, const std::string& path, int depth) {
    if (!ref.is_string()) return Error(path, "'$ref' must be a string");
    const std::string target = ref.get<std::string>();
    if (std::find(aliases_.begin(), aliases_.end(), target) != aliases_.end()) {
      std::string chain;
      for (const std::string& a : aliases_) absl::StrAppend(&chain, a, " -> ");
      return Error(path, absl::StrCat("'$ref' cycle ", chain, target,
                                      ": the schema refers to itself with no value in between"));
    }
    auto it = refs_.find(target);
    if (it != refs_.end()) return Expr::Ref(it->second);
    if (target.empty() || target[0] != '#') {
      return Error(path, absl::StrCat("'$ref' \"", target, "\" is not inside this schema"));
    }
    const Json* node = root_;
    size_t i = 1;
    while (i < target.size()) {
      if (target[i] != '/') return Error(path, absl::StrCat("bad '$ref' \"", target, "\""));
      size_t end = target.find('/', i + 1);
      if (end == std::string::npos) end = target.size();
      std::string token = target.substr(i + 1, end - i - 1);
      for (size_t k; (k = token.find("~1")) != std::string::npos;) token.replace(k, 2, "/");
      for (size_t k; (k = token.find("~0")) != std::string::npos;) token.replace(k, 2, "~");
      if (node->is_object() && node->contains(token)) {
        node = &(*node)[token];
      } else if (node->is_array() && !token.empty() &&
                 token.find_first_not_of("0123456789") == std::string::npos &&
                 std::stoul(token.substr(0, 9)) < node->size()) {
        node = &(*node)[std::stoul(token.substr(0, 9))];
      } else {
        return Error(path, absl::StrCat("'$ref' \"", target, "\" points to nothing"));
      }
      i = end;
    }
    const int32_t rule = b_.NewRule(target);
    refs_.emplace(target, rule);
    aliases_.push_back(target);
    absl::StatusOr<Expr> body = Compile(*node, target.substr(1), depth + 1);
    aliases_.pop_back();
    if (!body.ok()) return body;
    b_.Define(rule, *std::move(body));
    return Expr::Ref(rule);
  }

  absl::StatusOr<Expr> Object(const Json& s, const std::string& path, int depth) {
    struct Property {
      std::string name;
      bool required = false;
      Expr member;  // "name" ws ":" ws value ws
    };
    std::vector<Property> props;
    absl::flat_hash_map<std::string, size_t> index;
    if (s.contains("properties")) {
      const Json& p = s["properties"];
      if (!p.is_object()) return Error(path, "'properties' must be an object");
      for (const auto& [name, sub] : p.items()) {
        absl::StatusOr<Expr> value =
            CompileToRule(sub, absl::StrCat(path, "/properties/", name), depth + 1);
        if (!value.ok()) return value.status();
        index[name] = props.size();
        props.push_back({name, false, Member(name, *std::move(value))});
      }
    }
    if (s.contains("required")) {
      const Json& r = s["required"];
      if (!r.is_array()) return Error(path, "'required' must be an array");
      for (const Json& name : r) {
        if (!name.is_string()) return Error(path, "'required' must list strings");
        const std::string n = name.get<std::string>();
        if (!index.contains(n)) {
          index[n] = props.size();
          props.push_back({n, false, Member(n, Expr::Ref(json_.value))});
        }
        props[index[n]].required = true;
      }
    }
    const Json additional =
        s.contains("additionalProperties") ? s["additionalProperties"] : Json(props.empty());
    if (props.empty()) {
      if (additional.is_boolean() && !additional.get<bool>())
        return Expr::Sequence({Expr::Byte('{'), Ws(), Expr::Byte('}')});
      absl::StatusOr<Expr> value =
          CompileToRule(additional, absl::StrCat(path, "/additionalProperties"), depth + 1);
      if (!value.ok()) return value;
      Expr member = Expr::Sequence(
          {Expr::Ref(json_.string), Ws(), Expr::Byte(':'), Ws(), *std::move(value), Ws()});
      Expr more = Expr::Star(Expr::Sequence({Expr::Byte(','), Ws(), member}));
      return Expr::Sequence(
          {Expr::Byte('{'), Ws(), Expr::Optional(Expr::Sequence({member, more})), Expr::Byte('}')});
    }
    // after[i]: the members from property i on, after at least one member was written.
    const size_t n = props.size();
    std::vector<int32_t> after(n + 1);
    for (size_t i = 0; i <= n; ++i) after[i] = b_.NewRule(absl::StrCat(path, "/after-", i));
    auto members_from = [&](size_t i, bool first) {
      std::vector<Expr> choices;
      size_t j = i;
      for (; j < n; ++j) {
        std::vector<Expr> seq;
        if (!first) seq.insert(seq.end(), {Expr::Byte(','), Ws()});
        seq.push_back(props[j].member);
        seq.push_back(Expr::Ref(after[j + 1]));
        choices.push_back(Expr::Sequence(std::move(seq)));
        if (props[j].required) break;
      }
      if (j == n) choices.push_back(Expr::Empty());
      return choices.size() == 1 ? std::move(choices[0]) : Expr::Choice(std::move(choices));
    };
    for (size_t i = 0; i <= n; ++i) b_.Define(after[i], members_from(i, /*first=*/false));
    return Expr::Sequence(
        {Expr::Byte('{'), Ws(), members_from(0, /*first=*/true), Expr::Byte('}')});
  }

  Expr Member(const std::string& name, Expr value) {
    return Expr::Sequence(
        {Expr::Literal(Json(name).dump()), Ws(), Expr::Byte(':'), Ws(), std::move(value), Ws()});
  }

  absl::StatusOr<int> Count(const Json& s, const char* key, const std::string& path, int fallback) {
    if (!s.contains(key)) return fallback;
    const Json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0) {
      return Error(path, absl::StrCat("'", key, "' must be a non-negative integer"));
    }
    if (v.get<int64_t>() > GrammarBuilder::kMaxRepeat) {
      return Error(path, absl::StrCat("'", key, "' above ", GrammarBuilder::kMaxRepeat,
                                      " is not supported"));
    }
    return static_cast<int>(v.get<int64_t>());
  }

  absl::StatusOr<Expr> Array(const Json& s, const std::string& path, int depth) {
    absl::StatusOr<int> min = Count(s, "minItems", path, 0);
    if (!min.ok()) return min.status();
    absl::StatusOr<int> max = Count(s, "maxItems", path, -1);
    if (!max.ok()) return max.status();
    if (*max >= 0 && *max < *min) return Error(path, "'maxItems' is below 'minItems'");
    Expr item = Expr::Ref(json_.value);
    if (s.contains("items")) {
      if (s["items"].is_array())
        return Error(path, "'items' as an array (tuples) is not supported");
      absl::StatusOr<Expr> e = CompileToRule(s["items"], absl::StrCat(path, "/items"), depth + 1);
      if (!e.ok()) return e;
      item = *std::move(e);
    }
    if (*max == 0) return Expr::Sequence({Expr::Byte('['), Ws(), Expr::Byte(']')});
    Expr element = Expr::Sequence({item, Ws()});
    Expr list =
        Expr::Sequence({element, Expr::Repeat(Expr::Sequence({Expr::Byte(','), Ws(), element}),
                                              std::max(*min - 1, 0), *max < 0 ? -1 : *max - 1)});
    if (*min == 0) list = Expr::Optional(std::move(list));
    return Expr::Sequence({Expr::Byte('['), Ws(), std::move(list), Expr::Byte(']')});
  }

  absl::StatusOr<Expr> String(const Json& s, const std::string& path) {
    absl::StatusOr<int> min = Count(s, "minLength", path, 0);
    if (!min.ok()) return min.status();
    absl::StatusOr<int> max = Count(s, "maxLength", path, -1);
    if (!max.ok()) return max.status();
    if (*max >= 0 && *max < *min) return Error(path, "'maxLength' is below 'minLength'");
    const bool lengths = s.contains("minLength") || s.contains("maxLength");
    std::string pattern;
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) return Error(path, "'pattern' must be a string");
      pattern = s["pattern"].get<std::string>();
    } else if (s.contains("format")) {
      if (!s["format"].is_string()) return Error(path, "'format' must be a string");
      pattern = FormatRegex(s["format"].get<std::string>());
    }
    if (!pattern.empty()) {
      if (lengths)
        return Error(path,
                     "'minLength'/'maxLength' together with a pattern or format are not supported");
      absl::StatusOr<Expr> content = RegexToExpr(pattern, RegexMode::kJsonString);
      if (!content.ok()) return Error(path, std::string(content.status().message()));
      return Expr::Sequence({Expr::Byte('"'), *std::move(content), Expr::Byte('"')});
    }
    if (!lengths) return Expr::Ref(json_.string);
    return Expr::Sequence(
        {Expr::Byte('"'), Expr::Repeat(Expr::Ref(json_.string_char), *min, *max), Expr::Byte('"')});
  }

  absl::StatusOr<Expr> Number(const Json& s, const std::string& path, bool integer) {
    double lo = -INFINITY, hi = INFINITY;
    bool lo_exclusive = false, hi_exclusive = false;
    for (const char* key : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
      if (!s.contains(key)) continue;
      const Json& v = s[key];
      const std::string_view k(key);
      const bool is_min = k == "minimum" || k == "exclusiveMinimum";
      const bool exclusive = key[0] == 'e';
      if (v.is_boolean()) {  // draft 4: exclusiveMinimum: true
        if (exclusive && v.get<bool>()) (is_min ? lo_exclusive : hi_exclusive) = true;
        continue;
      }
      if (!v.is_number()) return Error(path, absl::StrCat("'", key, "' must be a number"));
      const double x = v.get<double>();
      if (is_min && (x > lo || (x == lo && exclusive))) lo = x, lo_exclusive = exclusive;
      if (!is_min && (x < hi || (x == hi && exclusive))) hi = x, hi_exclusive = exclusive;
    }
    if (std::isinf(lo) && std::isinf(hi)) return Expr::Ref(integer ? json_.integer : json_.number);
    const double limit = static_cast<double>(kMaxIntegerBound);
    if (lo > limit || hi < -limit) return Error(path, "bounds beyond ±1e18 are not supported");
    if (lo < -limit) lo = -INFINITY;
    if (hi > limit) hi = INFINITY;
    // The integers that satisfy the bounds.
    int64_t lo_i = std::isinf(lo) ? 0 : static_cast<int64_t>(std::ceil(lo));
    if (!std::isinf(lo) && lo_exclusive && static_cast<double>(lo_i) == lo) ++lo_i;
    int64_t hi_i = std::isinf(hi) ? 0 : static_cast<int64_t>(std::floor(hi));
    if (!std::isinf(hi) && hi_exclusive && static_cast<double>(hi_i) == hi) --hi_i;
    const int64_t span = static_cast<int64_t>(kDefaultBound);
    if (std::isinf(lo)) lo_i = std::min<int64_t>(-span, hi_i);
    if (std::isinf(hi)) hi_i = std::max<int64_t>(span, lo_i);
    std::vector<Expr> choices;
    if (lo_i <= hi_i) choices.push_back(IntegerRangeExpr(lo_i, hi_i));
    if (!integer) {
      Expr fraction = Expr::Sequence(
          {Expr::Byte('.'), Expr::Repeat(Expr::Bytes(ByteSet::Range('0', '9')), 1, kMaxDigits)});
      // I.F lies in [I, I+1): fine when I satisfies the lower bound and I + 1 <= hi.
      const int64_t top = std::isinf(hi) ? hi_i - 1 : static_cast<int64_t>(std::floor(hi)) - 1;
      if (std::max<int64_t>(0, lo_i) <= top) {
        choices.push_back(
            Expr::Sequence({IntegerRangeExpr(std::max<int64_t>(0, lo_i), top), fraction}));
      }
      // -I.F lies in (-(I+1), -I]: fine when -(I+1) >= lo and -I satisfies the upper bound.
      const int64_t neg_top = std::isinf(lo) ? -lo_i - 1 : -static_cast<int64_t>(std::ceil(lo)) - 1;
      const int64_t neg_bottom = std::max<int64_t>(0, -hi_i);
      if (neg_bottom <= neg_top) {
        choices.push_back(
            Expr::Sequence({Expr::Byte('-'), IntegerRangeExpr(neg_bottom, neg_top), fraction}));
      }
    }
    if (choices.empty()) return Error(path, "no number satisfies the bounds");
    return choices.size() == 1 ? std::move(choices[0]) : Expr::Choice(std::move(choices));
  }

  const Json* root_;
  GrammarBuilder b_;
  JsonRules json_;
  absl::flat_hash_map<std::string, int32_t> refs_;
  // The "$ref" targets being compiled, each the whole schema of the one before (an
  // alias chain); one of them again is a cycle no value breaks.
  std::vector<std::string> aliases_;
};

}  // namespace

absl::StatusOr<Grammar> JsonSchemaGrammar(std::string_view schema_text) {
  absl::Status nesting = CheckNesting(schema_text);
  if (!nesting.ok()) return nesting;
  Json schema = Json::parse(schema_text, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded())
    return absl::InvalidArgumentError("JSON Schema: the schema is not valid JSON");
  absl::StatusOr<std::optional<Wrap>> wrap = TakeWrap(schema);
  if (!wrap.ok()) return wrap.status();
  return SchemaCompiler(&schema).Run(*wrap);
}

}  // namespace lockstep::grammar
