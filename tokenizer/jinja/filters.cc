// jinja2's filters (builtins.h), with Hugging Face's tojson.
#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/methods.h"
#include "tokenizer/jinja/py_format.h"
#include "tokenizer/jinja/pyops.h"
#include "tokenizer/unicode.h"

namespace lockstep::tok::jinja {
namespace {

using Args = std::vector<std::optional<Value>>;

#define BIND(name, ...)                                                       \
  Args a;                                                                     \
  if (absl::Status bind_status = BindArgs(name, args, {__VA_ARGS__}, &a);     \
      !bind_status.ok()) {                                                    \
    return bind_status;                                                       \
  }

Value Arg(const Args& a, size_t i, Value fallback) { return a[i].value_or(std::move(fallback)); }

// jinja2's make_attrgetter: "a.b.0" looks up a, then b, then item 0, by getitem.
absl::StatusOr<Value> AttrGetter(const Value& item, const Value& attribute,
                                 const std::optional<Value>& fallback) {
  Value v = item;
  std::vector<Value> parts;
  if (attribute.is_string()) {
    for (const absl::string_view part : absl::StrSplit(attribute.str(), '.')) {
      int64_t i = 0;
      parts.push_back(absl::SimpleAtoi(part, &i) ? Value::Int(i) : Value::String(std::string(part)));
    }
  } else {
    parts.push_back(attribute);
  }
  for (const Value& part : parts) {
    absl::StatusOr<Value> next = GetItem(v, part);
    if (!next.ok()) return next.status();
    v = std::move(*next);
    if (v.is_undefined() && fallback.has_value()) return *fallback;
  }
  return v;
}

// Sort/unique key: lower-cased strings unless case-sensitive.
Value IgnoreCase(const Value& v, bool case_sensitive) {
  return v.is_string() && !case_sensitive ? Value::String(PyLower(v.str())) : v;
}

absl::StatusOr<Value> SafeStr(const Value& v) { return Value::String(Str(v)); }

absl::StatusOr<Value> Trim(const Value& v, const CallArgs& args) {
  BIND("trim", "chars");
  std::optional<std::string> chars;
  if (a[0].has_value() && !a[0]->is_none()) chars = Str(*a[0]);
  return Value::String(PyStrip(Str(v), chars, true, true));
}

absl::StatusOr<Value> Length(const Value& v, const CallArgs& args) {
  BIND("length");
  absl::StatusOr<int64_t> n = jinja::Length(v);
  if (!n.ok()) return n.status();
  return Value::Int(*n);
}

absl::StatusOr<Value> String(const Value& v, const CallArgs& args) {
  BIND("string");
  return SafeStr(v);
}

absl::StatusOr<Value> Lower(const Value& v, const CallArgs& args) {
  BIND("lower");
  return Value::String(PyLower(Str(v)));
}

absl::StatusOr<Value> Upper(const Value& v, const CallArgs& args) {
  BIND("upper");
  return Value::String(PyUpper(Str(v)));
}

absl::StatusOr<Value> Capitalize(const Value& v, const CallArgs& args) {
  BIND("capitalize");
  return Value::String(PyCapitalize(Str(v)));
}

// jinja2's title filter: each word (split at runs of -, whitespace, ( { [ <) gets an
// upper-case first character and lower-case rest.
absl::StatusOr<Value> Title(const Value& v, const CallArgs& args) {
  BIND("title");
  const std::u32string s = ToCodePoints(Str(v));
  const auto separator = [](char32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || IsPySpace(c);
  };
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const bool sep = separator(s[i]);
    size_t j = i;
    while (j < s.size() && separator(s[j]) == sep) ++j;
    const std::string piece = FromCodePoints(s.substr(i, j - i));
    size_t first_end = 0;
    NextCodePoint(StdView(piece), &first_end);
    out += PyUpper(piece.substr(0, first_end)) + PyLower(piece.substr(first_end));
    i = j;
  }
  return Value::String(std::move(out));
}

absl::StatusOr<Value> Default(const Value& v, const CallArgs& args) {
  BIND("default", "default_value", "boolean");
  if (v.is_undefined() || (a[1].has_value() && Truthy(*a[1]) && !Truthy(v))) {
    return Arg(a, 0, Value::String(""));
  }
  return v;
}

absl::StatusOr<Value> Join(const Value& v, const CallArgs& args) {
  BIND("join", "d", "attribute");
  absl::StatusOr<std::vector<Value>> items = Iterate(v);
  if (!items.ok()) return items.status();
  std::vector<std::string> parts;
  for (const Value& item : *items) {
    if (a[1].has_value() && !a[1]->is_none()) {
      absl::StatusOr<Value> attr = AttrGetter(item, *a[1], std::nullopt);
      if (!attr.ok()) return attr.status();
      parts.push_back(Str(*attr));
    } else {
      parts.push_back(Str(item));
    }
  }
  return Value::String(absl::StrJoin(parts, Str(Arg(a, 0, Value::String("")))));
}

absl::StatusOr<Value> Items(const Value& v, const CallArgs& args) {
  BIND("items");
  if (v.is_undefined()) return Value::List({});
  if (v.kind() != Value::Kind::kDict) return TypeError("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [key, value] : v.dict().entries) out.push_back(Value::Tuple({key, value}));
  return Value::List(std::move(out));
}

absl::StatusOr<Value> FirstOrLast(const Value& v, bool last) {
  if (v.is_undefined() || v.kind() == Value::Kind::kDict || v.is_string() || v.is_sequence()) {
    absl::StatusOr<std::vector<Value>> items = Iterate(v);
    if (!items.ok()) return items.status();
    if (items->empty()) {
      return Value::Undefined(last ? "No last item, sequence was empty." : "No first item, sequence was empty.");
    }
    return last ? items->back() : items->front();
  }
  if (last) return TypeError(absl::StrCat("'", TypeName(v), "' object is not reversible"));
  return TypeError(absl::StrCat("'", TypeName(v), "' object is not iterable"));
}

absl::StatusOr<Value> First(const Value& v, const CallArgs& args) {
  BIND("first");
  return FirstOrLast(v, false);
}

absl::StatusOr<Value> Last(const Value& v, const CallArgs& args) {
  BIND("last");
  return FirstOrLast(v, true);
}

absl::StatusOr<Value> List(const Value& v, const CallArgs& args) {
  BIND("list");
  absl::StatusOr<std::vector<Value>> items = Iterate(v);
  if (!items.ok()) return items.status();
  return Value::List(std::move(*items));
}

absl::StatusOr<Value> ToJson(const Value& v, const CallArgs& args) {
  // transformers: json.dumps(x, ensure_ascii=False, indent=None, separators=None,
  // sort_keys=False).
  BIND("tojson", "ensure_ascii", "indent", "separators", "sort_keys");
  JsonOptions options;
  options.ensure_ascii = a[0].has_value() && Truthy(*a[0]);
  if (a[1].has_value() && !a[1]->is_none()) {
    if (!a[1]->is_int()) return TypeError("tojson: indent must be an integer");
    options.indent = static_cast<int>(std::max<int64_t>(0, a[1]->as_int()));
    options.item_separator = ",";
  }
  if (a[2].has_value() && !a[2]->is_none()) {
    if (!a[2]->is_sequence() || a[2]->items().size() != 2 || !a[2]->items()[0].is_string() ||
        !a[2]->items()[1].is_string()) {
      return TypeError("tojson: separators must be a pair of strings");
    }
    options.item_separator = a[2]->items()[0].str();
    options.key_separator = a[2]->items()[1].str();
  }
  options.sort_keys = a[3].has_value() && Truthy(*a[3]);
  absl::StatusOr<std::string> out = JsonDumps(v, options);
  if (!out.ok()) return out.status();
  return Value::String(std::move(*out));
}

absl::StatusOr<Value> Replace(const Value& v, const CallArgs& args) {
  BIND("replace", "old", "new", "count");
  if (!a[0].has_value() || !a[1].has_value()) return TypeError("replace() missing arguments");
  const int64_t count = a[2].has_value() && a[2]->is_int() ? a[2]->as_int() : -1;
  return Value::String(PyReplace(Str(v), Str(*a[0]), Str(*a[1]), count));
}

absl::StatusOr<Value> Reverse(const Value& v, const CallArgs& args) {
  BIND("reverse");
  if (v.is_string()) {
    std::u32string s = ToCodePoints(v.str());
    std::reverse(s.begin(), s.end());
    return Value::String(FromCodePoints(s));
  }
  absl::StatusOr<std::vector<Value>> items = Iterate(v);
  if (!items.ok()) return items.status();
  std::reverse(items->begin(), items->end());
  return Value::List(std::move(*items));
}

absl::StatusOr<Value> Int(const Value& v, const CallArgs& args) {
  BIND("int", "default", "base");
  const Value fallback = Arg(a, 0, Value::Int(0));
  if (v.is_int()) return Value::Int(v.as_int());
  if (v.kind() == Value::Kind::kFloat) {
    if (!std::isfinite(v.as_double())) return fallback;
    return Value::Int(static_cast<int64_t>(v.as_double()));
  }
  if (v.is_string()) {
    const std::string s = PyStrip(v.str(), std::nullopt, true, true);
    int64_t i = 0;
    if (absl::SimpleAtoi(s, &i)) return Value::Int(i);
    double d = 0;
    if (absl::SimpleAtod(s, &d) && std::isfinite(d)) return Value::Int(static_cast<int64_t>(d));
  }
  return fallback;
}

absl::StatusOr<Value> Float(const Value& v, const CallArgs& args) {
  BIND("float", "default");
  if (v.is_number()) return Value::Float(v.as_double());
  double d = 0;
  if (v.is_string() && absl::SimpleAtod(PyStrip(v.str(), std::nullopt, true, true), &d)) {
    return Value::Float(d);
  }
  return Arg(a, 0, Value::Float(0));
}

absl::StatusOr<Value> Abs(const Value& v, const CallArgs& args) {
  BIND("abs");
  if (v.is_int()) return Value::Int(std::abs(v.as_int()));
  if (v.is_number()) return Value::Float(std::fabs(v.as_double()));
  return TypeError(absl::StrCat("bad operand type for abs(): '", TypeName(v), "'"));
}

absl::StatusOr<Value> Round(const Value& v, const CallArgs& args) {
  BIND("round", "precision", "method");
  if (!v.is_number()) return TypeError(absl::StrCat("type ", TypeName(v), " doesn't define __round__ method"));
  const int64_t precision = a[0].has_value() && a[0]->is_int() ? a[0]->as_int() : 0;
  const std::string method = a[1].has_value() ? Str(*a[1]) : "common";
  if (method != "common" && method != "ceil" && method != "floor") {
    return TypeError("method must be common, ceil or floor");
  }
  if (v.is_int() && method == "common") return Value::Int(v.as_int());
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_double() * scale;
  const double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::nearbyint(x);
  return Value::Float(r / scale);
}

absl::StatusOr<Value> Sum(const Value& v, const CallArgs& args) {
  BIND("sum", "attribute", "start");
  absl::StatusOr<std::vector<Value>> items = Iterate(v);
  if (!items.ok()) return items.status();
  Value total = Arg(a, 1, Value::Int(0));
  for (const Value& item : *items) {
    Value x = item;
    if (a[0].has_value() && !a[0]->is_none()) {
      absl::StatusOr<Value> attr = AttrGetter(item, *a[0], std::nullopt);
      if (!attr.ok()) return attr.status();
      x = *attr;
    }
    if (!x.is_number() || !total.is_number()) {
      return TypeError(absl::StrCat("unsupported operand type(s) for +: '", TypeName(total),
                                    "' and '", TypeName(x), "'"));
    }
    total = total.is_int() && x.is_int() ? Value::Int(total.as_int() + x.as_int())
                                         : Value::Float(total.as_double() + x.as_double());
  }
  return total;
}

// The items of `v`, each with its sort key (attribute, case folding).
absl::StatusOr<std::vector<std::pair<Value, Value>>> Keyed(const Value& v,
                                                           const std::optional<Value>& attribute,
                                                           bool case_sensitive) {
  absl::StatusOr<std::vector<Value>> items = Iterate(v);
  if (!items.ok()) return items.status();
  std::vector<std::pair<Value, Value>> out;
  for (const Value& item : *items) {
    Value key = item;
    if (attribute.has_value() && !attribute->is_none()) {
      absl::StatusOr<Value> attr = AttrGetter(item, *attribute, std::nullopt);
      if (!attr.ok()) return attr.status();
      key = *attr;
    }
    out.emplace_back(IgnoreCase(key, case_sensitive), item);
  }
  return out;
}

absl::Status SortKeyed(std::vector<std::pair<Value, Value>>* keyed, bool reverse) {
  absl::Status error;
  std::stable_sort(keyed->begin(), keyed->end(), [&](const auto& x, const auto& y) {
    absl::StatusOr<int> c = reverse ? Compare(y.first, x.first, "<") : Compare(x.first, y.first, "<");
    if (!c.ok()) {
      error.Update(c.status());
      return false;
    }
    return *c < 0;
  });
  return error;
}

absl::StatusOr<Value> Sort(const Value& v, const CallArgs& args) {
  BIND("sort", "reverse", "case_sensitive", "attribute");
  absl::StatusOr<std::vector<std::pair<Value, Value>>> keyed =
      Keyed(v, a[2], a[1].has_value() && Truthy(*a[1]));
  if (!keyed.ok()) return keyed.status();
  if (absl::Status s = SortKeyed(&*keyed, a[0].has_value() && Truthy(*a[0])); !s.ok()) return s;
  std::vector<Value> out;
  for (auto& [key, item] : *keyed) out.push_back(std::move(item));
  return Value::List(std::move(out));
}

absl::StatusOr<Value> DictSort(const Value& v, const CallArgs& args) {
  BIND("dictsort", "case_sensitive", "by", "reverse");
  absl::StatusOr<Value> pairs = Items(v, CallArgs{});
  if (!pairs.ok()) return pairs.status();
  const std::string by = a[1].has_value() ? Str(*a[1]) : "key";
  if (by != "key" && by != "value") return ValueError("You can only sort by either \"key\" or \"value\"");
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& pair : pairs->items()) {
    keyed.emplace_back(IgnoreCase(pair.items()[by == "key" ? 0 : 1], a[0].has_value() && Truthy(*a[0])), pair);
  }
  if (absl::Status s = SortKeyed(&keyed, a[2].has_value() && Truthy(*a[2])); !s.ok()) return s;
  std::vector<Value> out;
  for (auto& [key, item] : keyed) out.push_back(std::move(item));
  return Value::List(std::move(out));
}

absl::StatusOr<Value> Unique(const Value& v, const CallArgs& args) {
  BIND("unique", "case_sensitive", "attribute");
  absl::StatusOr<std::vector<std::pair<Value, Value>>> keyed =
      Keyed(v, a[1], a[0].has_value() && Truthy(*a[0]));
  if (!keyed.ok()) return keyed.status();
  std::vector<Value> seen, out;
  for (auto& [key, item] : *keyed) {
    const Value& k = key;
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return Equals(s, k); })) continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return Value::List(std::move(out));
}

absl::StatusOr<Value> MinMax(const Value& v, const CallArgs& args, bool max) {
  BIND(max ? "max" : "min", "case_sensitive", "attribute");
  absl::StatusOr<std::vector<std::pair<Value, Value>>> keyed =
      Keyed(v, a[1], a[0].has_value() && Truthy(*a[0]));
  if (!keyed.ok()) return keyed.status();
  if (keyed->empty()) return Value::Undefined(absl::StrCat("No aggregated item, sequence was empty."));
  size_t best = 0;
  for (size_t i = 1; i < keyed->size(); ++i) {
    absl::StatusOr<int> c = Compare((*keyed)[i].first, (*keyed)[best].first, max ? ">" : "<");
    if (!c.ok()) return c.status();
    if (max ? *c > 0 : *c < 0) best = i;
  }
  return (*keyed)[best].second;
}

absl::StatusOr<Value> Max(const Value& v, const CallArgs& args) { return MinMax(v, args, true); }
absl::StatusOr<Value> Min(const Value& v, const CallArgs& args) { return MinMax(v, args, false); }

// map, select, reject, selectattr, rejectattr.
absl::StatusOr<Value> Map(const Value& v, const CallArgs& args) {
  absl::StatusOr<std::vector<Value>> items = Iterate(v);
  if (!items.ok()) return items.status();
  std::vector<Value> out;
  const auto attribute = std::find_if(args.keyword.begin(), args.keyword.end(),
                                      [](const auto& kw) { return kw.first == "attribute"; });
  if (attribute != args.keyword.end()) {
    std::optional<Value> fallback;
    for (const auto& [key, value] : args.keyword) {
      if (key == "default") {
        fallback = value;
      } else if (key != "attribute") {
        return TypeError(absl::StrCat("map() got an unexpected keyword argument '", key, "'"));
      }
    }
    for (const Value& item : *items) {
      absl::StatusOr<Value> x = AttrGetter(item, attribute->second, fallback);
      if (!x.ok()) return x.status();
      out.push_back(std::move(*x));
    }
    return Value::List(std::move(out));
  }
  if (args.positional.empty() || !args.positional[0].is_string()) {
    return TypeError("map requires a filter argument");
  }
  const FilterFunction filter = FindFilter(args.positional[0].str());
  if (filter == nullptr) return absl::InvalidArgumentError(absl::StrCat("TemplateRuntimeError: No filter named '", args.positional[0].str(), "'"));
  CallArgs rest{{args.positional.begin() + 1, args.positional.end()}, args.keyword};
  for (const Value& item : *items) {
    absl::StatusOr<Value> x = filter(item, rest);
    if (!x.ok()) return x.status();
    out.push_back(std::move(*x));
  }
  return Value::List(std::move(out));
}

absl::StatusOr<Value> SelectOrReject(const Value& v, const CallArgs& args, bool by_attribute,
                                     bool select) {
  absl::StatusOr<std::vector<Value>> items = Iterate(v);
  if (!items.ok()) return items.status();
  size_t next = 0;
  std::optional<Value> attribute;
  if (by_attribute) {
    if (args.positional.empty()) return TypeError("Missing parameter for attribute name");
    attribute = args.positional[next++];
  }
  TestFunction test = nullptr;
  if (next < args.positional.size()) {
    const Value& name = args.positional[next++];
    test = name.is_string() ? FindTest(name.str()) : nullptr;
    if (test == nullptr) return absl::InvalidArgumentError(absl::StrCat("TemplateRuntimeError: No test named ", Repr(name)));
  }
  CallArgs rest{{args.positional.begin() + static_cast<ptrdiff_t>(next), args.positional.end()}, args.keyword};
  std::vector<Value> out;
  for (const Value& item : *items) {
    Value x = item;
    if (attribute.has_value()) {
      absl::StatusOr<Value> attr = AttrGetter(item, *attribute, std::nullopt);
      if (!attr.ok()) return attr.status();
      x = *attr;
    }
    bool pass = Truthy(x);
    if (test != nullptr) {
      absl::StatusOr<bool> r = test(x, rest);
      if (!r.ok()) return r.status();
      pass = *r;
    }
    if (pass == select) out.push_back(item);
  }
  return Value::List(std::move(out));
}

absl::StatusOr<Value> Select(const Value& v, const CallArgs& args) { return SelectOrReject(v, args, false, true); }
absl::StatusOr<Value> Reject(const Value& v, const CallArgs& args) { return SelectOrReject(v, args, false, false); }
absl::StatusOr<Value> SelectAttr(const Value& v, const CallArgs& args) { return SelectOrReject(v, args, true, true); }
absl::StatusOr<Value> RejectAttr(const Value& v, const CallArgs& args) { return SelectOrReject(v, args, true, false); }

absl::StatusOr<Value> Attr(const Value& v, const CallArgs& args) {
  BIND("attr", "name");
  if (!a[0].has_value() || !a[0]->is_string()) return TypeError("attr() needs a name");
  return GetAttr(v, a[0]->str());
}

absl::StatusOr<Value> Escape(const Value& v, const CallArgs& args) {
  BIND("escape");
  std::string out;
  for (const char c : Str(v)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return Value::String(std::move(out));
}

absl::StatusOr<Value> Safe(const Value& v, const CallArgs& args) {
  BIND("safe");
  return SafeStr(v);
}

absl::StatusOr<Value> Format(const Value& v, const CallArgs& args) {
  if (!args.positional.empty() && !args.keyword.empty()) {
    return absl::InvalidArgumentError("FilterArgumentError: can't handle positional and keyword arguments at the same time");
  }
  if (!args.keyword.empty()) return TypeError("format with keyword arguments is not supported");
  absl::StatusOr<std::string> out = PyPercentFormat(Str(v), Value::Tuple(args.positional));
  if (!out.ok()) return out.status();
  return Value::String(std::move(*out));
}

absl::StatusOr<Value> Indent(const Value& v, const CallArgs& args) {
  BIND("indent", "width", "first", "blank");
  std::string indention = "    ";
  if (a[0].has_value()) {
    if (a[0]->is_string()) {
      indention = a[0]->str();
    } else if (a[0]->is_int()) {
      indention = std::string(static_cast<size_t>(std::max<int64_t>(0, a[0]->as_int())), ' ');
    } else {
      return TypeError("indent width must be an int or a str");
    }
  }
  absl::StatusOr<Value> lines_value = GetAttr(Value::String(Str(v) + "\n"), "splitlines");
  if (!lines_value.ok()) return lines_value.status();
  absl::StatusOr<Value> lines = CallValue(*lines_value, CallArgs{});
  if (!lines.ok()) return lines.status();
  std::string out;
  const auto& parts = lines->items();
  if (a[2].has_value() && Truthy(*a[2])) {
    for (size_t i = 0; i < parts.size(); ++i) absl::StrAppend(&out, i ? "\n" + indention : "", parts[i].str());
  } else {
    for (size_t i = 0; i < parts.size(); ++i) {
      const std::string& line = parts[i].str();
      if (i == 0) {
        out = line;
      } else {
        absl::StrAppend(&out, "\n", line.empty() ? "" : indention, line);
      }
    }
  }
  if (a[1].has_value() && Truthy(*a[1])) out = indention + out;
  return Value::String(std::move(out));
}

absl::StatusOr<Value> WordCount(const Value& v, const CallArgs& args) {
  BIND("wordcount");
  int64_t words = 0;
  bool in_word = false;
  for (const char32_t c : ToCodePoints(Str(v))) {
    const bool word = c == '_' || IsIn(c, kLetterMask | kNumberMask | kMarkMask);
    if (word && !in_word) ++words;
    in_word = word;
  }
  return Value::Int(words);
}

#undef BIND

}  // namespace

FilterFunction FindFilter(absl::string_view name) {
  static const auto* const kFilters = new std::map<absl::string_view, FilterFunction>{
      {"abs", Abs},           {"attr", Attr},         {"capitalize", Capitalize},
      {"count", Length},      {"d", Default},         {"default", Default},
      {"dictsort", DictSort}, {"e", Escape},          {"escape", Escape},
      {"first", First},       {"float", Float},       {"forceescape", Escape},
      {"format", Format},     {"indent", Indent},     {"int", Int},
      {"items", Items},       {"join", Join},         {"last", Last},
      {"length", Length},     {"list", List},         {"lower", Lower},
      {"map", Map},           {"max", Max},           {"min", Min},
      {"reject", Reject},     {"rejectattr", RejectAttr}, {"replace", Replace},
      {"reverse", Reverse},   {"round", Round},       {"safe", Safe},
      {"select", Select},     {"selectattr", SelectAttr}, {"sort", Sort},
      {"string", String},     {"sum", Sum},           {"title", Title},
      {"tojson", ToJson},     {"trim", Trim},         {"unique", Unique},
      {"upper", Upper},       {"wordcount", WordCount},
  };
  const auto it = kFilters->find(name);
  return it == kFilters->end() ? nullptr : it->second;
}

}  // namespace lockstep::tok::jinja
