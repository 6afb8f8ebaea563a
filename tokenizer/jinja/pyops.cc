#include "tokenizer/jinja/pyops.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tokenizer/unicode.h"

namespace lockstep::tok::jinja {
namespace {

bool IsPrintable(char32_t c) {
  if (c == ' ') return true;
  constexpr CategoryMask kNotPrintable = Bit(GeneralCategory::kCc) | Bit(GeneralCategory::kCf) |
                                         Bit(GeneralCategory::kCs) | Bit(GeneralCategory::kCo) |
                                         Bit(GeneralCategory::kCn) | Bit(GeneralCategory::kZl) |
                                         Bit(GeneralCategory::kZp) | Bit(GeneralCategory::kZs);
  return !IsIn(c, kNotPrintable);
}

std::string StringRepr(absl::string_view s) {
  const bool has_single = s.find('\'') != absl::string_view::npos;
  const bool has_double = s.find('"') != absl::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (size_t pos = 0; pos < s.size();) {
    const char32_t c = NextCodePoint(StdView(s), &pos);
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < ' ' || c == 0x7F) {
      absl::StrAppendFormat(&out, "\\x%02x", static_cast<uint32_t>(c));
    } else if (c < 0x7F || IsPrintable(c)) {
      AppendUtf8(c, &out);
    } else if (c <= 0xFF) {
      absl::StrAppendFormat(&out, "\\x%02x", static_cast<uint32_t>(c));
    } else if (c <= 0xFFFF) {
      absl::StrAppendFormat(&out, "\\u%04x", static_cast<uint32_t>(c));
    } else {
      absl::StrAppendFormat(&out, "\\U%08x", static_cast<uint32_t>(c));
    }
  }
  out.push_back(quote);
  return out;
}

// The containers whose repr this thread is building, innermost last. Meeting one again
// is a cycle (a namespace that holds itself, directly or in a list), which repr writes
// as Python does ("[...]", "{...}") instead of recursing until the stack overflows.
thread_local std::vector<const void*> repr_in_progress;

class ReprScope {
 public:
  explicit ReprScope(const void* container)
      : recursive_(std::find(repr_in_progress.begin(), repr_in_progress.end(), container) !=
                   repr_in_progress.end()) {
    if (!recursive_) repr_in_progress.push_back(container);
  }
  ~ReprScope() {
    if (!recursive_) repr_in_progress.pop_back();
  }
  ReprScope(const ReprScope&) = delete;
  ReprScope& operator=(const ReprScope&) = delete;

  bool recursive() const { return recursive_; }

 private:
  const bool recursive_;
};

std::string JoinRepr(const std::vector<Value>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) absl::StrAppend(&out, i ? ", " : "", Repr(items[i]));
  return out;
}

// "[a, b]" or "(a,)"; "[...]" when `items` is already being written.
std::string SequenceRepr(const std::vector<Value>& items, bool tuple) {
  const ReprScope scope(&items);
  if (scope.recursive()) return tuple ? "(...)" : "[...]";
  if (!tuple) return absl::StrCat("[", JoinRepr(items), "]");
  return absl::StrCat("(", JoinRepr(items), items.size() == 1 ? ",)" : ")");
}

std::string DictRepr(const Dict& dict) {
  const ReprScope scope(&dict);
  if (scope.recursive()) return "{...}";
  std::string out = "{";
  for (size_t i = 0; i < dict.entries.size(); ++i) {
    absl::StrAppend(&out, i ? ", " : "", Repr(dict.entries[i].first), ": ",
                    Repr(dict.entries[i].second));
  }
  return out + "}";
}

void AppendJsonString(absl::string_view s, bool ensure_ascii, std::string* out) {
  out->push_back('"');
  for (size_t pos = 0; pos < s.size();) {
    const size_t start = pos;
    const char32_t c = NextCodePoint(StdView(s), &pos);
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (c < 0x20) {
          absl::StrAppendFormat(out, "\\u%04x", static_cast<uint32_t>(c));
        } else if (c < 0x80 || !ensure_ascii) {
          absl::StrAppend(out, s.substr(start, pos - start));
        } else if (c <= 0xFFFF) {
          absl::StrAppendFormat(out, "\\u%04x", static_cast<uint32_t>(c));
        } else {
          const uint32_t v = static_cast<uint32_t>(c) - 0x10000;
          absl::StrAppendFormat(out, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
        }
    }
  }
  out->push_back('"');
}

std::string JsonFloat(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return FloatRepr(d);
}

absl::Status DumpJson(const Value& v, const JsonOptions& options, int level, std::string* out) {
  const auto newline = [&](int depth) {
    if (options.indent < 0) return;
    out->push_back('\n');
    out->append(static_cast<size_t>(options.indent) * depth, ' ');
  };
  switch (v.kind()) {
    case Value::Kind::kNone:
      *out += "null";
      return absl::OkStatus();
    case Value::Kind::kBool:
      *out += v.as_bool() ? "true" : "false";
      return absl::OkStatus();
    case Value::Kind::kInt:
      absl::StrAppend(out, v.as_int());
      return absl::OkStatus();
    case Value::Kind::kFloat:
      *out += JsonFloat(v.as_double());
      return absl::OkStatus();
    case Value::Kind::kString:
      AppendJsonString(v.str(), options.ensure_ascii, out);
      return absl::OkStatus();
    case Value::Kind::kList:
    case Value::Kind::kTuple: {
      if (v.items().empty()) {
        *out += "[]";
        return absl::OkStatus();
      }
      out->push_back('[');
      newline(level + 1);
      for (size_t i = 0; i < v.items().size(); ++i) {
        if (i) {
          *out += options.item_separator;
          newline(level + 1);
        }
        if (absl::Status s = DumpJson(v.items()[i], options, level + 1, out); !s.ok()) return s;
      }
      newline(level);
      out->push_back(']');
      return absl::OkStatus();
    }
    case Value::Kind::kDict: {
      if (v.dict().entries.empty()) {
        *out += "{}";
        return absl::OkStatus();
      }
      std::vector<std::pair<std::string, const Value*>> entries;
      for (const auto& [key, item] : v.dict().entries) {
        std::string name;
        if (key.is_string()) {
          name = key.str();
        } else if (key.kind() == Value::Kind::kBool) {
          name = key.as_bool() ? "true" : "false";
        } else if (key.is_number() || key.is_none()) {
          name = key.is_none() ? "null" : key.is_int() ? Str(key) : JsonFloat(key.as_double());
        } else {
          return TypeError(
              absl::StrCat("keys must be str, int, float, bool or None, not ", TypeName(key)));
        }
        entries.emplace_back(std::move(name), &item);
      }
      if (options.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      }
      out->push_back('{');
      newline(level + 1);
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) {
          *out += options.item_separator;
          newline(level + 1);
        }
        AppendJsonString(entries[i].first, options.ensure_ascii, out);
        *out += options.key_separator;
        if (absl::Status s = DumpJson(*entries[i].second, options, level + 1, out); !s.ok()) {
          return s;
        }
      }
      newline(level);
      out->push_back('}');
      return absl::OkStatus();
    }
    default:
      return TypeError(absl::StrCat("Object of type ", TypeName(v), " is not JSON serializable"));
  }
}

}  // namespace

absl::Status TypeError(absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("TypeError: ", message));
}

absl::Status ValueError(absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("ValueError: ", message));
}

absl::Status UndefinedError(const Value& undefined) {
  return absl::InvalidArgumentError(absl::StrCat("UndefinedError: ", undefined.undefined_hint()));
}

absl::Status SecurityError(absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("SecurityError: ", message));
}

bool Truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return false;
    case Value::Kind::kBool:
    case Value::Kind::kInt:
      return v.as_int() != 0;
    case Value::Kind::kFloat:
      return v.as_double() != 0;
    case Value::Kind::kString:
      return !v.str().empty();
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      return !v.items().empty();
    case Value::Kind::kDict:
      return !v.dict().entries.empty();
    default:
      return true;
  }
}

std::string Str(const Value& v) {
  if (v.is_string()) return v.str();
  if (v.is_undefined()) return "";
  return Repr(v);
}

std::string Repr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "Undefined";
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kBool:
      return v.as_bool() ? "True" : "False";
    case Value::Kind::kInt:
      return absl::StrCat(v.as_int());
    case Value::Kind::kFloat:
      return FloatRepr(v.as_double());
    case Value::Kind::kString:
      return StringRepr(v.str());
    case Value::Kind::kList:
      return SequenceRepr(v.items(), /*tuple=*/false);
    case Value::Kind::kTuple:
      return SequenceRepr(v.items(), /*tuple=*/true);
    case Value::Kind::kDict:
      return DictRepr(v.dict());
    case Value::Kind::kObject:
      if (v.object().type_name == "Namespace") {
        return absl::StrCat("<Namespace ", DictRepr(v.object().attributes), ">");
      }
      return absl::StrCat("<", v.object().type_name, ">");
    case Value::Kind::kFunction:
      return absl::StrCat("<function ", v.function().name, ">");
  }
  return "";
}

std::string TypeName(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "Undefined";
    case Value::Kind::kNone:
      return "NoneType";
    case Value::Kind::kBool:
      return "bool";
    case Value::Kind::kInt:
      return "int";
    case Value::Kind::kFloat:
      return "float";
    case Value::Kind::kString:
      return "str";
    case Value::Kind::kList:
      return "list";
    case Value::Kind::kTuple:
      return "tuple";
    case Value::Kind::kDict:
      return "dict";
    case Value::Kind::kObject:
      return v.object().type_name;
    case Value::Kind::kFunction:
      return "function";
  }
  return "object";
}

std::string ObjectTypeRepr(const Value& v) {
  return v.is_none() ? "None" : absl::StrCat(TypeName(v), " object");
}

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // Shortest round-trip digits, laid out as Python's repr does: positional when the
  // decimal exponent is in [-4, 16), else d.ddde+XX.
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  const absl::string_view sci(buf, static_cast<size_t>(result.ptr - buf));
  const size_t e = sci.find('e');
  absl::string_view mantissa = sci.substr(0, e);
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.remove_prefix(1);
  std::string digits;
  for (const char c : mantissa) {
    if (c != '.') digits.push_back(c);
  }
  const int exponent = std::atoi(std::string(sci.substr(e + 1)).c_str());
  const int decpt = exponent + 1;
  std::string out = negative ? "-" : "";
  if (decpt <= -4 || decpt > 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) absl::StrAppend(&out, ".", digits.substr(1));
    absl::StrAppendFormat(&out, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  } else if (decpt <= 0) {
    absl::StrAppend(&out, "0.", std::string(static_cast<size_t>(-decpt), '0'), digits);
  } else if (static_cast<size_t>(decpt) >= digits.size()) {
    absl::StrAppend(&out, digits, std::string(decpt - digits.size(), '0'), ".0");
  } else {
    absl::StrAppend(&out, digits.substr(0, decpt), ".", digits.substr(decpt));
  }
  return out;
}

bool Equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_int() && b.is_int()) return a.as_int() == b.as_int();
    return a.as_double() == b.as_double();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.str() == b.str();
    case Value::Kind::kList:
    case Value::Kind::kTuple: {
      if (a.items().size() != b.items().size()) return false;
      for (size_t i = 0; i < a.items().size(); ++i) {
        if (!Equals(a.items()[i], b.items()[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      if (a.dict().entries.size() != b.dict().entries.size()) return false;
      for (const auto& [key, value] : a.dict().entries) {
        const Value* other = b.dict().Find(key);
        if (other == nullptr || !Equals(value, *other)) return false;
      }
      return true;
    }
    case Value::Kind::kObject:
      return &a.object() == &b.object();
    case Value::Kind::kFunction:
      return &a.function() == &b.function();
    default:
      return false;
  }
}

absl::StatusOr<int> Compare(const Value& a, const Value& b, absl::string_view op) {
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_int() && b.is_int()) return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int();
    return a.as_double() < b.as_double() ? -1 : a.as_double() > b.as_double();
  }
  if (a.is_string() && b.is_string()) return a.str().compare(b.str()) < 0 ? -1 : a.str() != b.str();
  if (a.is_sequence() && a.kind() == b.kind()) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!Equals(x[i], y[i])) return Compare(x[i], y[i], op);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size();
  }
  return TypeError(absl::StrCat("'", op, "' not supported between instances of '", TypeName(a),
                                "' and '", TypeName(b), "'"));
}

absl::StatusOr<int64_t> Length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return static_cast<int64_t>(CodePointCount(v.str()));
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      return static_cast<int64_t>(v.items().size());
    case Value::Kind::kDict:
      return static_cast<int64_t>(v.dict().entries.size());
    default:
      return TypeError(absl::StrCat("object of type '", TypeName(v), "' has no len()"));
  }
}

absl::StatusOr<bool> Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined:
      return false;
    case Value::Kind::kDict:
      return container.dict().Find(item) != nullptr;
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      for (const Value& v : container.items()) {
        if (Equals(v, item)) return true;
      }
      return false;
    case Value::Kind::kString:
      if (item.is_undefined()) return UndefinedError(item);
      if (!item.is_string()) {
        return TypeError(
            absl::StrCat("'in <string>' requires string as left operand, not ", TypeName(item)));
      }
      return container.str().find(item.str()) != std::string::npos;
    default:
      return TypeError(
          absl::StrCat("argument of type '", TypeName(container), "' is not iterable"));
  }
}

absl::StatusOr<std::vector<Value>> Iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return std::vector<Value>();
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      return v.items();
    case Value::Kind::kDict: {
      std::vector<Value> keys;
      for (const auto& entry : v.dict().entries) keys.push_back(entry.first);
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> chars;
      const std::string& s = v.str();
      for (size_t pos = 0; pos < s.size();) {
        const size_t start = pos;
        NextCodePoint(StdView(s), &pos);
        chars.push_back(Value::String(s.substr(start, pos - start)));
      }
      return chars;
    }
    default:
      return TypeError(absl::StrCat("'", TypeName(v), "' object is not iterable"));
  }
}

std::u32string ToCodePoints(absl::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) out.push_back(NextCodePoint(StdView(s), &pos));
  return out;
}

std::string FromCodePoints(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char32_t c : s) AppendUtf8(c, &out);
  return out;
}

bool IsPySpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

absl::StatusOr<std::string> JsonDumps(const Value& v, const JsonOptions& options) {
  std::string out;
  if (absl::Status s = DumpJson(v, options, 0, &out); !s.ok()) return s;
  return out;
}

}  // namespace lockstep::tok::jinja
