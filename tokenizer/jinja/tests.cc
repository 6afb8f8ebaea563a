// jinja2's tests (`x is defined`) and the globals (builtins.h).
#include <ctime>
#include <map>

#include "absl/strings/str_cat.h"
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/methods.h"
#include "tokenizer/jinja/pyops.h"

namespace lockstep::tok::jinja {
namespace {

// The single argument of a comparison test.
absl::StatusOr<Value> Other(absl::string_view name, const CallArgs& args) {
  std::vector<std::optional<Value>> a;
  if (absl::Status s = BindArgs(name, args, {"other"}, &a); !s.ok()) return s;
  if (!a[0].has_value()) return TypeError(absl::StrCat(name, "() missing 1 required positional argument"));
  return *a[0];
}

template <bool (*Pred)(const Value&)>
absl::StatusOr<bool> Unary(const Value& v, const CallArgs& args) {
  if (!args.positional.empty() || !args.keyword.empty()) return TypeError("the test takes no arguments");
  return Pred(v);
}

bool IsDefined(const Value& v) { return !v.is_undefined(); }
bool IsUndefined(const Value& v) { return v.is_undefined(); }
bool IsNone(const Value& v) { return v.is_none(); }
bool IsBoolean(const Value& v) { return v.kind() == Value::Kind::kBool; }
bool IsTrue(const Value& v) { return v.kind() == Value::Kind::kBool && v.as_bool(); }
bool IsFalse(const Value& v) { return v.kind() == Value::Kind::kBool && !v.as_bool(); }
bool IsString(const Value& v) { return v.is_string(); }
bool IsMapping(const Value& v) { return v.kind() == Value::Kind::kDict; }
bool IsNumber(const Value& v) { return v.is_number(); }
bool IsInteger(const Value& v) { return v.kind() == Value::Kind::kInt; }
bool IsFloat(const Value& v) { return v.kind() == Value::Kind::kFloat; }
bool IsCallable(const Value& v) { return v.kind() == Value::Kind::kFunction; }
bool IsEscaped(const Value&) { return false; }
// iter() works on these (Undefined iterates as empty).
bool IsIterable(const Value& v) {
  return v.is_undefined() || v.is_string() || v.is_sequence() || v.kind() == Value::Kind::kDict;
}
// len() and __getitem__ exist.
bool IsSequence(const Value& v) { return IsIterable(v); }
bool IsLower(const Value& v) {
  const std::string s = Str(v);
  return PyLower(s) == s && PyUpper(s) != s;
}
bool IsUpper(const Value& v) {
  const std::string s = Str(v);
  return PyUpper(s) == s && PyLower(s) != s;
}

absl::StatusOr<bool> Parity(const Value& v, const CallArgs& args, int64_t want) {
  if (!args.positional.empty() || !args.keyword.empty()) return TypeError("the test takes no arguments");
  if (v.is_undefined()) return UndefinedError(v);
  if (!v.is_int()) return TypeError(absl::StrCat("unsupported operand type(s) for %: '", TypeName(v), "' and 'int'"));
  return ((v.as_int() % 2) + 2) % 2 == want;
}
absl::StatusOr<bool> Even(const Value& v, const CallArgs& args) { return Parity(v, args, 0); }
absl::StatusOr<bool> Odd(const Value& v, const CallArgs& args) { return Parity(v, args, 1); }

absl::StatusOr<bool> DivisibleBy(const Value& v, const CallArgs& args) {
  absl::StatusOr<Value> n = Other("divisibleby", args);
  if (!n.ok()) return n.status();
  if (v.is_undefined()) return UndefinedError(v);
  if (!v.is_int() || !n->is_int()) return TypeError("divisibleby needs integers");
  if (n->as_int() == 0) return absl::InvalidArgumentError("ZeroDivisionError: integer modulo by zero");
  return v.as_int() % n->as_int() == 0;
}

template <int kOp>  // 0 ==, 1 !=, 2 <, 3 <=, 4 >, 5 >=
absl::StatusOr<bool> Comparison(const Value& v, const CallArgs& args) {
  absl::StatusOr<Value> other = Other("compare", args);
  if (!other.ok()) return other.status();
  if (kOp == 0) return Equals(v, *other);
  if (kOp == 1) return !Equals(v, *other);
  static constexpr const char* kNames[] = {"==", "!=", "<", "<=", ">", ">="};
  absl::StatusOr<int> c = Compare(v, *other, kNames[kOp]);
  if (!c.ok()) return c.status();
  return kOp == 2 ? *c < 0 : kOp == 3 ? *c <= 0 : kOp == 4 ? *c > 0 : *c >= 0;
}

absl::StatusOr<bool> In(const Value& v, const CallArgs& args) {
  absl::StatusOr<Value> seq = Other("in", args);
  if (!seq.ok()) return seq.status();
  return Contains(*seq, v);
}

// `is`: identity. None, True and False are singletons; CPython caches small ints.
absl::StatusOr<bool> SameAs(const Value& v, const CallArgs& args) {
  absl::StatusOr<Value> other = Other("sameas", args);
  if (!other.ok()) return other.status();
  if (v.kind() != other->kind()) return false;
  switch (v.kind()) {
    case Value::Kind::kNone:
    case Value::Kind::kUndefined: return v.is_none();
    case Value::Kind::kBool: return v.as_bool() == other->as_bool();
    case Value::Kind::kInt: return v.as_int() == other->as_int() && v.as_int() >= -5 && v.as_int() <= 256;
    case Value::Kind::kList:
    case Value::Kind::kTuple: return &v.items() == &other->items();
    case Value::Kind::kDict: return &v.dict() == &other->dict();
    case Value::Kind::kObject: return &v.object() == &other->object();
    case Value::Kind::kString: return &v.str() == &other->str();
    default: return false;
  }
}

absl::StatusOr<bool> IsFilter(const Value& v, const CallArgs& args) {
  return v.is_string() && FindFilter(v.str()) != nullptr;
}
absl::StatusOr<bool> IsTest(const Value& v, const CallArgs& args) {
  return v.is_string() && FindTest(v.str()) != nullptr;
}

// ---- globals ----

absl::StatusOr<Value> Range(const CallArgs& args) {
  if (!args.keyword.empty()) return TypeError("range() takes no keyword arguments");
  int64_t start = 0, stop = 0, step = 1;
  for (const Value& v : args.positional) {
    if (!v.is_int()) return TypeError(absl::StrCat("'", TypeName(v), "' object cannot be interpreted as an integer"));
  }
  switch (args.positional.size()) {
    case 1: stop = args.positional[0].as_int(); break;
    case 2: start = args.positional[0].as_int(); stop = args.positional[1].as_int(); break;
    case 3:
      start = args.positional[0].as_int();
      stop = args.positional[1].as_int();
      step = args.positional[2].as_int();
      break;
    default: return TypeError("range expected 1 to 3 arguments");
  }
  if (step == 0) return ValueError("range() arg 3 must not be zero");
  std::vector<Value> out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (out.size() >= 100000) {  // jinja2's sandbox MAX_RANGE
      return absl::InvalidArgumentError("OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    }
    out.push_back(Value::Int(i));
  }
  return Value::List(std::move(out));
}

absl::StatusOr<Value> DictGlobal(const CallArgs& args) {
  if (!args.positional.empty()) return TypeError("dict() with positional arguments is not supported");
  Dict dict;
  for (const auto& [key, value] : args.keyword) dict.Set(Value::String(key), value);
  return Value::FromDict(std::move(dict));
}

absl::StatusOr<Value> NamespaceGlobal(const CallArgs& args) {
  auto ns = std::make_shared<Object>();
  ns->type_name = "Namespace";
  if (args.positional.size() > 1) return TypeError("namespace() takes at most 1 positional argument");
  if (!args.positional.empty()) {
    if (args.positional[0].kind() != Value::Kind::kDict) return TypeError("namespace() needs a mapping");
    for (const auto& [key, value] : args.positional[0].dict().entries) ns->attributes.Set(key, value);
  }
  for (const auto& [key, value] : args.keyword) ns->attributes.Set(Value::String(key), value);
  return Value::FromObject(std::move(ns));
}

absl::StatusOr<Value> RaiseException(const CallArgs& args) {
  std::vector<std::optional<Value>> a;
  if (absl::Status s = BindArgs("raise_exception", args, {"message"}, &a); !s.ok()) return s;
  return absl::InvalidArgumentError(absl::StrCat("TemplateError: ", a[0].has_value() ? Str(*a[0]) : ""));
}

absl::StatusOr<Value> StrftimeNow(const CallArgs& args) {
  std::vector<std::optional<Value>> a;
  if (absl::Status s = BindArgs("strftime_now", args, {"format"}, &a); !s.ok()) return s;
  if (!a[0].has_value() || !a[0]->is_string()) return TypeError("strftime_now() needs a format string");
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[512];
  const size_t n = std::strftime(buf, sizeof(buf), a[0]->str().c_str(), &local);
  return Value::String(std::string(buf, n));
}

}  // namespace

TestFunction FindTest(absl::string_view name) {
  static const auto* const kTests = new std::map<absl::string_view, TestFunction>{
      {"boolean", Unary<IsBoolean>},   {"callable", Unary<IsCallable>},
      {"defined", Unary<IsDefined>},   {"divisibleby", DivisibleBy},
      {"eq", Comparison<0>},           {"equalto", Comparison<0>},
      {"==", Comparison<0>},           {"escaped", Unary<IsEscaped>},
      {"even", Even},                  {"false", Unary<IsFalse>},
      {"filter", IsFilter},            {"float", Unary<IsFloat>},
      {"ge", Comparison<5>},           {">=", Comparison<5>},
      {"gt", Comparison<4>},           {">", Comparison<4>},
      {"greaterthan", Comparison<4>},  {"in", In},
      {"integer", Unary<IsInteger>},   {"iterable", Unary<IsIterable>},
      {"le", Comparison<3>},           {"<=", Comparison<3>},
      {"lower", Unary<IsLower>},       {"lt", Comparison<2>},
      {"<", Comparison<2>},            {"lessthan", Comparison<2>},
      {"mapping", Unary<IsMapping>},   {"ne", Comparison<1>},
      {"!=", Comparison<1>},           {"none", Unary<IsNone>},
      {"number", Unary<IsNumber>},     {"odd", Odd},
      {"sameas", SameAs},              {"sequence", Unary<IsSequence>},
      {"string", Unary<IsString>},     {"test", IsTest},
      {"true", Unary<IsTrue>},         {"undefined", Unary<IsUndefined>},
      {"upper", Unary<IsUpper>},
  };
  const auto it = kTests->find(name);
  return it == kTests->end() ? nullptr : it->second;
}

Value FindGlobal(absl::string_view name) {
  if (name == "range") return Value::FromFunction("range", Range);
  if (name == "dict") return Value::FromFunction("dict", DictGlobal);
  if (name == "namespace") return Value::FromFunction("namespace", NamespaceGlobal);
  if (name == "raise_exception") return Value::FromFunction("raise_exception", RaiseException);
  if (name == "strftime_now") return Value::FromFunction("strftime_now", StrftimeNow);
  return Value::Undefined(absl::StrCat("'", name, "' is undefined"));
}

bool IsSupportedMethod(absl::string_view name) {
  return IsMethodName(name) || name == "cycle" || name == "changed";
}

}  // namespace lockstep::tok::jinja
