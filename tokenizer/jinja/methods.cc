#include "tokenizer/jinja/methods.h"

#include <locale.h>
#include <wctype.h>

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/py_format.h"
#include "tokenizer/jinja/pyops.h"
#include "tokenizer/unicode.h"

namespace lockstep::tok::jinja {
namespace {

const std::set<absl::string_view>& StringMethods() {
  static const auto* const kNames = new std::set<absl::string_view>{
      "startswith", "endswith", "strip",   "lstrip",  "rstrip",  "split",        "rsplit",
      "splitlines", "replace",  "upper",   "lower",   "title",   "capitalize",   "find",
      "rfind",      "index",    "rindex",  "count",   "join",    "format",       "isdigit",
      "isalpha",    "isalnum",  "isspace", "isupper", "islower", "removeprefix", "removesuffix"};
  return *kNames;
}
const std::set<absl::string_view>& DictMethods() {
  static const auto* const kNames =
      new std::set<absl::string_view>{"get", "items", "keys", "values", "copy"};
  return *kNames;
}
const std::set<absl::string_view>& SequenceMethods() {
  static const auto* const kNames = new std::set<absl::string_view>{"count", "index", "copy"};
  return *kNames;
}

locale_t Utf8Locale() {
  static const locale_t locale = newlocale(LC_CTYPE_MASK, "C.UTF-8", locale_t{});
  return locale;
}

char32_t ToUpper(char32_t c) {
  if (c < 0x80) return c >= 'a' && c <= 'z' ? c - 32 : c;
  return Utf8Locale() ? static_cast<char32_t>(towupper_l(static_cast<wint_t>(c), Utf8Locale())) : c;
}
char32_t ToLower(char32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + 32 : c;
  return Utf8Locale() ? static_cast<char32_t>(towlower_l(static_cast<wint_t>(c), Utf8Locale())) : c;
}
bool IsCased(char32_t c) {
  return IsIn(c, Bit(GeneralCategory::kLu) | Bit(GeneralCategory::kLl) | Bit(GeneralCategory::kLt));
}

std::string MapChars(absl::string_view s, char32_t (*f)(char32_t)) {
  std::u32string chars = ToCodePoints(s);
  for (char32_t& c : chars) c = f(c);
  return FromCodePoints(chars);
}

// Code-point index of byte offset `pos` in `s`.
int64_t CharIndex(absl::string_view s, size_t pos) {
  return static_cast<int64_t>(CodePointCount(StdView(s.substr(0, pos))));
}

std::vector<std::string> SplitWhitespace(absl::string_view s, int64_t maxsplit, bool from_right) {
  std::u32string chars = ToCodePoints(s);
  if (from_right) std::reverse(chars.begin(), chars.end());
  std::vector<std::u32string> parts;
  size_t i = 0;
  const size_t n = chars.size();
  for (int64_t left = maxsplit < 0 ? INT64_MAX : maxsplit; left > 0; --left) {
    while (i < n && IsPySpace(chars[i])) ++i;
    if (i == n) break;
    const size_t j = i;
    while (i < n && !IsPySpace(chars[i])) ++i;
    parts.push_back(chars.substr(j, i - j));
  }
  if (i < n) {
    while (i < n && IsPySpace(chars[i])) ++i;
    if (i != n) parts.push_back(chars.substr(i));
  }
  std::vector<std::string> out;
  for (std::u32string& p : parts) {
    if (from_right) std::reverse(p.begin(), p.end());
    out.push_back(FromCodePoints(p));
  }
  if (from_right) std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> SplitOn(absl::string_view s, absl::string_view sep, int64_t maxsplit,
                                 bool from_right) {
  std::vector<std::string> out;
  int64_t left = maxsplit < 0 ? INT64_MAX : maxsplit;
  if (!from_right) {
    size_t i = 0;
    for (; left > 0; --left) {
      const size_t pos = s.find(sep, i);
      if (pos == absl::string_view::npos) break;
      out.emplace_back(s.substr(i, pos - i));
      i = pos + sep.size();
    }
    out.emplace_back(s.substr(i));
    return out;
  }
  size_t end = s.size();
  for (; left > 0 && end >= sep.size(); --left) {
    const size_t pos = s.rfind(sep, end - sep.size());
    if (pos == absl::string_view::npos) break;
    out.emplace_back(s.substr(pos + sep.size(), end - pos - sep.size()));
    end = pos;
  }
  out.emplace_back(s.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> SplitLines(absl::string_view s, bool keepends) {
  const std::u32string chars = ToCodePoints(s);
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < chars.size(); ++i) {
    const char32_t c = chars[i];
    const bool boundary = c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == 0x1C ||
                          c == 0x1D || c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!boundary) continue;
    size_t end = i + 1;
    if (c == '\r' && end < chars.size() && chars[end] == '\n') ++end;
    out.push_back(FromCodePoints(chars.substr(start, (keepends ? end : i) - start)));
    start = end;
    i = end - 1;
  }
  if (start < chars.size()) out.push_back(FromCodePoints(chars.substr(start)));
  return out;
}

Value StringList(std::vector<std::string> parts) {
  std::vector<Value> items;
  for (std::string& p : parts) items.push_back(Value::String(std::move(p)));
  return Value::List(std::move(items));
}

absl::StatusOr<std::string> StringArg(const std::optional<Value>& v, absl::string_view method) {
  if (!v.has_value() || !v->is_string()) {
    return TypeError(absl::StrCat(method, "() argument must be str, not ",
                                  v.has_value() ? TypeName(*v) : "nothing"));
  }
  return v->str();
}

// str.isXXX over all characters (false for "").
template <typename Pred>
Value AllChars(absl::string_view s, Pred pred) {
  const std::u32string chars = ToCodePoints(s);
  if (chars.empty()) return Value::Bool(false);
  for (const char32_t c : chars) {
    if (!pred(c)) return Value::Bool(false);
  }
  return Value::Bool(true);
}

absl::StatusOr<Value> CallStringMethod(const std::string& s, absl::string_view name,
                                       const CallArgs& args) {
  std::vector<std::optional<Value>> a;
  const auto bind = [&](std::initializer_list<absl::string_view> names) {
    return BindArgs(name, args, names, &a);
  };
  if (name == "startswith" || name == "endswith") {
    if (absl::Status st = bind({"prefix"}); !st.ok()) return st;
    std::vector<Value> options;
    if (a[0].has_value() && a[0]->kind() == Value::Kind::kTuple) {
      options = a[0]->items();
    } else if (a[0].has_value()) {
      options.push_back(*a[0]);
    }
    if (options.empty() && !a[0].has_value())
      return TypeError(absl::StrCat(name, "() takes at least 1 argument (0 given)"));
    for (const Value& o : options) {
      if (!o.is_string())
        return TypeError(
            absl::StrCat(name, " first arg must be str or a tuple of str, not ", TypeName(o)));
      const std::string& p = o.str();
      const bool hit = p.size() <= s.size() &&
                       (name == "startswith" ? s.compare(0, p.size(), p) == 0
                                             : s.compare(s.size() - p.size(), p.size(), p) == 0);
      if (hit) return Value::Bool(true);
    }
    return Value::Bool(false);
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    if (absl::Status st = bind({"chars"}); !st.ok()) return st;
    std::optional<std::string> chars;
    if (a[0].has_value() && !a[0]->is_none()) {
      absl::StatusOr<std::string> c = StringArg(a[0], name);
      if (!c.ok()) return c.status();
      chars = *c;
    }
    return Value::String(PyStrip(s, chars, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    if (absl::Status st = bind({"sep", "maxsplit"}); !st.ok()) return st;
    int64_t maxsplit = -1;
    if (a[1].has_value()) {
      if (!a[1]->is_int()) return TypeError("maxsplit must be an integer");
      maxsplit = a[1]->as_int();
    }
    if (!a[0].has_value() || a[0]->is_none()) {
      return StringList(SplitWhitespace(s, maxsplit, name == "rsplit"));
    }
    absl::StatusOr<std::string> sep = StringArg(a[0], name);
    if (!sep.ok()) return sep.status();
    if (sep->empty()) return ValueError("empty separator");
    return StringList(SplitOn(s, *sep, maxsplit, name == "rsplit"));
  }
  if (name == "splitlines") {
    if (absl::Status st = bind({"keepends"}); !st.ok()) return st;
    return StringList(SplitLines(s, a[0].has_value() && Truthy(*a[0])));
  }
  if (name == "replace") {
    if (absl::Status st = bind({"old", "new", "count"}); !st.ok()) return st;
    absl::StatusOr<std::string> old = StringArg(a[0], name);
    if (!old.ok()) return old.status();
    absl::StatusOr<std::string> with = StringArg(a[1], name);
    if (!with.ok()) return with.status();
    if (a[2].has_value() && !a[2]->is_int()) return TypeError("replace() count must be an integer");
    return Value::String(PyReplace(s, *old, *with, a[2].has_value() ? a[2]->as_int() : -1));
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    if (absl::Status st = bind({}); !st.ok()) return st;
    return Value::String(name == "upper"   ? PyUpper(s)
                         : name == "lower" ? PyLower(s)
                         : name == "title" ? PyTitle(s)
                                           : PyCapitalize(s));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    if (absl::Status st = bind({"sub"}); !st.ok()) return st;
    absl::StatusOr<std::string> sub = StringArg(a[0], name);
    if (!sub.ok()) return sub.status();
    if (name == "count") {
      if (sub->empty()) return Value::Int(CharIndex(s, s.size()) + 1);
      int64_t n = 0;
      for (size_t pos = s.find(*sub); pos != std::string::npos;
           pos = s.find(*sub, pos + sub->size()))
        ++n;
      return Value::Int(n);
    }
    const size_t pos = name[0] == 'r' ? s.rfind(*sub) : s.find(*sub);
    if (pos == std::string::npos) {
      if (name == "index" || name == "rindex") return ValueError("substring not found");
      return Value::Int(-1);
    }
    return Value::Int(CharIndex(s, pos));
  }
  if (name == "join") {
    if (absl::Status st = bind({"iterable"}); !st.ok()) return st;
    absl::StatusOr<std::vector<Value>> items = Iterate(a[0].value_or(Value::None()));
    if (!items.ok()) return items.status();
    std::string out;
    for (size_t i = 0; i < items->size(); ++i) {
      if (!(*items)[i].is_string()) {
        return TypeError(absl::StrCat("sequence item ", i, ": expected str instance, ",
                                      TypeName((*items)[i]), " found"));
      }
      absl::StrAppend(&out, i ? s : "", (*items)[i].str());
    }
    return Value::String(std::move(out));
  }
  if (name == "format") {
    absl::StatusOr<std::string> out = PyFormat(s, args);
    if (!out.ok()) return out.status();
    return Value::String(std::move(*out));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    if (absl::Status st = bind({"affix"}); !st.ok()) return st;
    absl::StatusOr<std::string> affix = StringArg(a[0], name);
    if (!affix.ok()) return affix.status();
    if (name == "removeprefix" && s.rfind(*affix, 0) == 0)
      return Value::String(s.substr(affix->size()));
    if (name == "removesuffix" && s.size() >= affix->size() &&
        s.compare(s.size() - affix->size(), affix->size(), *affix) == 0) {
      return Value::String(s.substr(0, s.size() - affix->size()));
    }
    return Value::String(s);
  }
  if (absl::Status st = bind({}); !st.ok()) return st;
  if (name == "isdigit")
    return AllChars(s, [](char32_t c) { return IsIn(c, Bit(GeneralCategory::kNd)); });
  if (name == "isalpha") return AllChars(s, [](char32_t c) { return IsIn(c, kLetterMask); });
  if (name == "isalnum")
    return AllChars(s, [](char32_t c) { return IsIn(c, kLetterMask | kNumberMask); });
  if (name == "isspace") return AllChars(s, IsPySpace);
  // isupper / islower: some cased character, none of the other case.
  const bool upper = name == "isupper";
  bool cased = false;
  for (const char32_t c : ToCodePoints(s)) {
    if (upper ? ToLower(c) != c : ToUpper(c) != c) cased = true;
    if (upper ? ToUpper(c) != c : ToLower(c) != c) return Value::Bool(false);
  }
  return Value::Bool(cased);
}

absl::StatusOr<Value> CallContainerMethod(const Value& obj, absl::string_view name,
                                          const CallArgs& args) {
  std::vector<std::optional<Value>> a;
  if (name == "copy") {
    if (absl::Status st = BindArgs(name, args, {}, &a); !st.ok()) return st;
    return obj;
  }
  if (obj.kind() == Value::Kind::kDict) {
    if (name == "get") {
      if (absl::Status st = BindArgs(name, args, {"key", "default"}, &a); !st.ok()) return st;
      if (!a[0].has_value()) return TypeError("get expected at least 1 argument, got 0");
      if (const Value* v = obj.dict().Find(*a[0])) return *v;
      return a[1].value_or(Value::None());
    }
    if (absl::Status st = BindArgs(name, args, {}, &a); !st.ok()) return st;
    std::vector<Value> out;
    for (const auto& [key, value] : obj.dict().entries) {
      out.push_back(name == "keys" ? key : name == "values" ? value : Value::Tuple({key, value}));
    }
    return Value::List(std::move(out));
  }
  if (absl::Status st = BindArgs(name, args, {"value"}, &a); !st.ok()) return st;
  if (!a[0].has_value())
    return TypeError(absl::StrCat(name, "() takes exactly one argument (0 given)"));
  int64_t count = 0;
  for (size_t i = 0; i < obj.items().size(); ++i) {
    if (!Equals(obj.items()[i], *a[0])) continue;
    if (name == "index") return Value::Int(static_cast<int64_t>(i));
    ++count;
  }
  if (name == "index") return ValueError(absl::StrCat(Repr(*a[0]), " is not in list"));
  return Value::Int(count);
}

}  // namespace

std::optional<Value> BoundMethod(const Value& obj, absl::string_view name) {
  const std::string method(name);
  if (obj.is_string() && StringMethods().count(name)) {
    return Value::FromFunction(absl::StrCat("str.", name), [obj, method](const CallArgs& args) {
      return CallStringMethod(obj.str(), method, args);
    });
  }
  const bool dict = obj.kind() == Value::Kind::kDict && DictMethods().count(name);
  const bool seq = obj.is_sequence() && SequenceMethods().count(name) &&
                   !(name == "copy" && obj.kind() == Value::Kind::kTuple);
  if (dict || seq) {
    return Value::FromFunction(
        absl::StrCat(TypeName(obj), ".", name),
        [obj, method](const CallArgs& args) { return CallContainerMethod(obj, method, args); });
  }
  return std::nullopt;
}

bool IsMethodName(absl::string_view name) {
  return StringMethods().count(name) || DictMethods().count(name) || SequenceMethods().count(name);
}

std::string PyUpper(absl::string_view s) { return MapChars(s, ToUpper); }
std::string PyLower(absl::string_view s) { return MapChars(s, ToLower); }

std::string PyTitle(absl::string_view s) {
  std::u32string chars = ToCodePoints(s);
  bool previous_cased = false;
  for (char32_t& c : chars) {
    c = previous_cased ? ToLower(c) : ToUpper(c);
    previous_cased = IsCased(c);
  }
  return FromCodePoints(chars);
}

std::string PyCapitalize(absl::string_view s) {
  std::u32string chars = ToCodePoints(s);
  for (size_t i = 0; i < chars.size(); ++i)
    chars[i] = i == 0 ? ToUpper(chars[i]) : ToLower(chars[i]);
  return FromCodePoints(chars);
}

std::string PyStrip(absl::string_view s, const std::optional<std::string>& chars, bool left,
                    bool right) {
  const std::u32string text = ToCodePoints(s);
  const std::u32string set = chars.has_value() ? ToCodePoints(*chars) : std::u32string();
  const auto strip = [&](char32_t c) {
    return chars.has_value() ? set.find(c) != std::u32string::npos : IsPySpace(c);
  };
  size_t begin = 0, end = text.size();
  if (left) {
    while (begin < end && strip(text[begin])) ++begin;
  }
  if (right) {
    while (end > begin && strip(text[end - 1])) --end;
  }
  return FromCodePoints(text.substr(begin, end - begin));
}

std::string PyReplace(absl::string_view s, absl::string_view old, absl::string_view with,
                      int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `with` before every character and at the end.
    const std::u32string chars = ToCodePoints(s);
    int64_t done = 0;
    for (const char32_t c : chars) {
      if (count < 0 || done < count) {
        absl::StrAppend(&out, with);
        ++done;
      }
      AppendUtf8(c, &out);
    }
    if (count < 0 || done < count) absl::StrAppend(&out, with);
    return out;
  }
  size_t i = 0;
  for (int64_t done = 0; count < 0 || done < count; ++done) {
    const size_t pos = s.find(old, i);
    if (pos == absl::string_view::npos) break;
    absl::StrAppend(&out, s.substr(i, pos - i));
    absl::StrAppend(&out, with);
    i = pos + old.size();
  }
  absl::StrAppend(&out, s.substr(i));
  return out;
}

}  // namespace lockstep::tok::jinja
