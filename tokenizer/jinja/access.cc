// Attribute and item lookup, calls, argument binding and globals (builtins.h).
#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/methods.h"
#include "tokenizer/jinja/pyops.h"

namespace lockstep::tok::jinja {
namespace {

// Python methods of dict and list that mutate: jinja2's immutable sandbox makes them
// unsafe (an Undefined whose use fails with a SecurityError message).
bool IsMutator(const Value& obj, absl::string_view name) {
  static const auto* const kList = new std::set<absl::string_view>{
      "append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"};
  static const auto* const kDict =
      new std::set<absl::string_view>{"clear", "pop", "popitem", "setdefault", "update"};
  if (obj.kind() == Value::Kind::kList) return kList->count(name) > 0;
  return obj.kind() == Value::Kind::kDict && kDict->count(name) > 0;
}

Value Unsafe(const Value& obj, absl::string_view name) {
  return Value::Undefined(absl::StrCat("access to attribute '", name, "' of '", TypeName(obj),
                                       "' object is unsafe."));
}

Value NoAttribute(const Value& obj, absl::string_view name) {
  return Value::Undefined(
      absl::StrCat("'", ObjectTypeRepr(obj), "' has no attribute '", name, "'"));
}

Value NoElement(const Value& obj, const Value& key) {
  return Value::Undefined(
      absl::StrCat("'", ObjectTypeRepr(obj), "' has no element ", Repr(key)));
}

// Python's slice.indices: start, stop, step for a sequence of `length`.
absl::Status SliceIndices(const Value& start_v, const Value& stop_v, const Value& step_v,
                          int64_t length, int64_t* start, int64_t* stop, int64_t* step) {
  for (const Value* v : {&start_v, &stop_v, &step_v}) {
    if (!v->is_none() && !v->is_int()) {
      return TypeError("slice indices must be integers or None or have an __index__ method");
    }
  }
  *step = step_v.is_none() ? 1 : step_v.as_int();
  if (*step == 0) return ValueError("slice step cannot be zero");
  const auto clamp = [&](const Value& v, int64_t fallback) {
    if (v.is_none()) return fallback;
    int64_t i = v.as_int();
    if (i < 0) i += length;
    if (*step > 0) return std::clamp<int64_t>(i, 0, length);
    return std::clamp<int64_t>(i, -1, length - 1);
  };
  *start = clamp(start_v, *step > 0 ? 0 : length - 1);
  *stop = clamp(stop_v, *step > 0 ? length : -1);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Value> GetAttr(const Value& obj, absl::string_view name) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined:
      return UndefinedError(obj);
    case Value::Kind::kDict:
    case Value::Kind::kList:
    case Value::Kind::kTuple:
    case Value::Kind::kString: {
      if (name.rfind("__", 0) == 0) return Unsafe(obj, name);
      if (std::optional<Value> method = BoundMethod(obj, name)) return *method;
      if (IsMutator(obj, name)) return Unsafe(obj, name);
      if (obj.kind() == Value::Kind::kDict) {
        if (const Value* v = obj.dict().Find(name)) return *v;
      }
      return NoAttribute(obj, name);
    }
    case Value::Kind::kObject:
      if (const Value* v = obj.object().attributes.Find(name)) return *v;
      return NoAttribute(obj, name);
    default:
      return NoAttribute(obj, name);
  }
}

absl::StatusOr<Value> GetItem(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined:
      return UndefinedError(obj);
    case Value::Kind::kDict:
      if (const Value* v = obj.dict().Find(key)) return *v;
      break;
    case Value::Kind::kList:
    case Value::Kind::kTuple:
    case Value::Kind::kString:
      if (key.is_int()) {
        const absl::StatusOr<int64_t> length = Length(obj);
        if (!length.ok()) return length.status();
        int64_t i = key.as_int();
        if (i < 0) i += *length;
        if (i < 0 || i >= *length) return NoElement(obj, key);
        if (obj.is_string()) return GetSlice(obj, Value::Int(i), Value::Int(i + 1), Value::None());
        return obj.items()[static_cast<size_t>(i)];
      }
      break;
    case Value::Kind::kObject:
      if (key.is_string()) return GetAttr(obj, key.str());
      break;
    default:
      break;
  }
  if (key.is_string()) {
    if (std::optional<Value> method = BoundMethod(obj, key.str())) return *method;
    return NoAttribute(obj, key.str());
  }
  return NoElement(obj, key);
}

absl::StatusOr<Value> GetSlice(const Value& obj, const Value& start, const Value& stop,
                               const Value& step) {
  if (obj.is_undefined()) return UndefinedError(obj);
  if (!obj.is_string() && !obj.is_sequence()) {
    return TypeError(absl::StrCat("'", TypeName(obj), "' object is not subscriptable"));
  }
  const std::u32string chars = obj.is_string() ? ToCodePoints(obj.str()) : std::u32string();
  const int64_t length = obj.is_string() ? static_cast<int64_t>(chars.size())
                                         : static_cast<int64_t>(obj.items().size());
  int64_t i, end, by;
  if (absl::Status s = SliceIndices(start, stop, step, length, &i, &end, &by); !s.ok()) return s;
  std::u32string out_chars;
  std::vector<Value> out_items;
  for (; by > 0 ? i < end : i > end; i += by) {
    if (obj.is_string()) {
      out_chars.push_back(chars[static_cast<size_t>(i)]);
    } else {
      out_items.push_back(obj.items()[static_cast<size_t>(i)]);
    }
  }
  if (obj.is_string()) return Value::String(FromCodePoints(out_chars));
  return obj.kind() == Value::Kind::kTuple ? Value::Tuple(std::move(out_items))
                                           : Value::List(std::move(out_items));
}

absl::StatusOr<Value> CallValue(const Value& callee, const CallArgs& args) {
  if (callee.is_undefined()) return UndefinedError(callee);
  if (callee.kind() != Value::Kind::kFunction) {
    return TypeError(absl::StrCat("'", TypeName(callee), "' object is not callable"));
  }
  return callee.function().call(args);
}

absl::Status BindArgs(absl::string_view function, const CallArgs& args,
                      std::initializer_list<absl::string_view> names,
                      std::vector<std::optional<Value>>* out) {
  out->assign(names.size(), std::nullopt);
  if (args.positional.size() > names.size()) {
    return TypeError(absl::StrCat(function, "() takes at most ", names.size(), " argument(s) (",
                                  args.positional.size(), " given)"));
  }
  for (size_t i = 0; i < args.positional.size(); ++i) (*out)[i] = args.positional[i];
  for (const auto& [key, value] : args.keyword) {
    size_t i = 0;
    for (const absl::string_view name : names) {
      if (name == key) break;
      ++i;
    }
    if (i == names.size()) {
      return TypeError(absl::StrCat(function, "() got an unexpected keyword argument '", key, "'"));
    }
    if ((*out)[i].has_value()) {
      return TypeError(absl::StrCat(function, "() got multiple values for argument '", key, "'"));
    }
    (*out)[i] = value;
  }
  return absl::OkStatus();
}

}  // namespace lockstep::tok::jinja
