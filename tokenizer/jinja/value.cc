#include "tokenizer/jinja/value.h"

#include <string>

#include "tokenizer/jinja/pyops.h"

namespace lockstep::tok::jinja {

const Value* Dict::Find(const Value& key) const {
  for (const auto& [k, v] : entries) {
    if (Equals(k, key)) return &v;
  }
  return nullptr;
}

const Value* Dict::Find(absl::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k.is_string() && k.str() == key) return &v;
  }
  return nullptr;
}

void Dict::Set(Value key, Value value) {
  for (auto& [k, v] : entries) {
    if (Equals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

Value Value::Undefined(std::string hint) {
  Value v(Kind::kUndefined);
  v.ref_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

const std::string& Value::undefined_hint() const {
  static const std::string* const kNoHint = new std::string("value is undefined");
  const auto* hint = std::get_if<std::shared_ptr<const std::string>>(&ref_);
  return hint != nullptr && *hint != nullptr ? **hint : *kNoHint;
}

Value Value::Bool(bool b) {
  Value v(Kind::kBool);
  v.scalar_ = int64_t{b ? 1 : 0};
  return v;
}

Value Value::Int(int64_t i) {
  Value v(Kind::kInt);
  v.scalar_ = i;
  return v;
}

Value Value::Float(double d) {
  Value v(Kind::kFloat);
  v.scalar_ = d;
  return v;
}

Value Value::String(std::string s) {
  Value v(Kind::kString);
  v.ref_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

Value Value::List(std::vector<Value> items) {
  Value v(Kind::kList);
  v.ref_ = std::make_shared<const std::vector<Value>>(std::move(items));
  return v;
}

Value Value::Tuple(std::vector<Value> items) {
  Value v(Kind::kTuple);
  v.ref_ = std::make_shared<const std::vector<Value>>(std::move(items));
  return v;
}

Value Value::FromDict(Dict dict) {
  Value v(Kind::kDict);
  v.ref_ = std::make_shared<const Dict>(std::move(dict));
  return v;
}

Value Value::FromObject(std::shared_ptr<Object> object) {
  Value v(Kind::kObject);
  v.ref_ = std::move(object);
  return v;
}

Value Value::FromFunction(std::string name, NativeFunction call) {
  Value v(Kind::kFunction);
  v.ref_ = std::make_shared<const Function>(Function{std::move(name), std::move(call)});
  return v;
}

namespace {

// Value::FromJson at nesting level `depth` (the top-level value is 1).
Value FromJsonAt(const nlohmann::ordered_json& json, int depth) {
  using Type = nlohmann::ordered_json::value_t;
  if ((json.type() == Type::array || json.type() == Type::object) && depth > Value::kMaxJsonDepth) {
    return Value::Undefined("a JSON value nested deeper than " +
                            std::to_string(Value::kMaxJsonDepth) + " levels");
  }
  switch (json.type()) {
    case Type::null:
      return Value::None();
    case Type::boolean:
      return Value::Bool(json.get<bool>());
    case Type::number_integer:
      return Value::Int(json.get<int64_t>());
    case Type::number_unsigned: {
      const auto u = json.get<uint64_t>();
      return u <= static_cast<uint64_t>(INT64_MAX) ? Value::Int(static_cast<int64_t>(u))
                                                   : Value::Float(static_cast<double>(u));
    }
    case Type::number_float:
      return Value::Float(json.get<double>());
    case Type::string:
      return Value::String(json.get<std::string>());
    case Type::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(FromJsonAt(item, depth + 1));
      return Value::List(std::move(items));
    }
    case Type::object: {
      Dict dict;
      dict.entries.reserve(json.size());
      for (const auto& [key, item] : json.items()) {
        dict.entries.emplace_back(Value::String(key), FromJsonAt(item, depth + 1));
      }
      return Value::FromDict(std::move(dict));
    }
    default:  // binary, discarded
      return Value::None();
  }
}

}  // namespace

Value Value::FromJson(const nlohmann::ordered_json& json) { return FromJsonAt(json, 1); }

}  // namespace lockstep::tok::jinja
