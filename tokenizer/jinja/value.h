// The values a Jinja template computes with, modelled on the Python objects jinja2
// works with: Undefined (jinja2's default Undefined), None, bool, int, float, str,
// list, tuple, dict (insertion-ordered), objects (namespace(), loop) and callables
// (builtins, bound methods, macros).
//
// Strings, lists and dicts are immutable and shared between copies (the chat-template
// sandbox never mutates them); objects are shared and mutable (namespace attributes).
// A Value is not thread-safe to mutate, but values of a parsed template's literals are
// only read. Python semantics on values (str(), ==, <, json.dumps) are in pyops.h.
#ifndef LOCKSTEP_TOKENIZER_JINJA_VALUE_H_
#define LOCKSTEP_TOKENIZER_JINJA_VALUE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace lockstep::tok::jinja {

class Value;

// Arguments of a call: f(a, b, key=c).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

using NativeFunction = std::function<absl::StatusOr<Value>(const CallArgs&)>;

struct Function {
  std::string name;  // for messages
  NativeFunction call;
};

// A dict: entries in insertion order, keys unique by Python equality.
struct Dict {
  std::vector<std::pair<Value, Value>> entries;

  const Value* Find(const Value& key) const;
  const Value* Find(absl::string_view key) const;
  // Sets `key`, replacing an equal key's value in place.
  void Set(Value key, Value value);
};

// namespace() and loop: named attributes, mutable (`set ns.x = ...`).
struct Object {
  std::string type_name;  // "Namespace", "LoopContext"
  Dict attributes;        // string keys
};

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kTuple,
    kDict,
    kObject,
    kFunction,
  };

  // An Undefined whose use fails with `hint` (jinja2's message, e.g. "'x' is undefined").
  Value() : Value(Kind::kUndefined) {}
  static Value Undefined(std::string hint);
  static Value None() { return Value(Kind::kNone); }
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double d);
  static Value String(std::string s);
  static Value List(std::vector<Value> items);
  static Value Tuple(std::vector<Value> items);
  static Value FromDict(Dict dict);
  static Value FromObject(std::shared_ptr<Object> object);
  static Value FromFunction(std::string name, NativeFunction call);
  // JSON as Python's json.loads gives it: objects become dicts in key order. An array
  // or object nested deeper than kMaxJsonDepth levels (the top-level value is level 1)
  // becomes an Undefined saying so: converting, copying, destroying and printing a
  // Value recurse once per level, so no deeper one is built. (The router refuses
  // bodies deeper than 64 levels before they get here: common/bounded_json.h.)
  static constexpr int kMaxJsonDepth = 128;
  static Value FromJson(const nlohmann::ordered_json& json);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  // bool counts as an integer, as in Python.
  bool is_int() const { return kind_ == Kind::kInt || kind_ == Kind::kBool; }
  bool is_number() const { return is_int() || kind_ == Kind::kFloat; }
  bool is_sequence() const { return kind_ == Kind::kList || kind_ == Kind::kTuple; }

  bool as_bool() const { return std::get<int64_t>(scalar_) != 0; }
  int64_t as_int() const { return std::get<int64_t>(scalar_); }
  double as_double() const {
    return kind_ == Kind::kFloat ? std::get<double>(scalar_)
                                 : static_cast<double>(std::get<int64_t>(scalar_));
  }
  const std::string& str() const { return *std::get<std::shared_ptr<const std::string>>(ref_); }
  const std::vector<Value>& items() const {
    return *std::get<std::shared_ptr<const std::vector<Value>>>(ref_);
  }
  const Dict& dict() const { return *std::get<std::shared_ptr<const Dict>>(ref_); }
  Object& object() const { return *std::get<std::shared_ptr<Object>>(ref_); }
  const Function& function() const { return *std::get<std::shared_ptr<const Function>>(ref_); }
  // For Undefined: the message its use fails with.
  const std::string& undefined_hint() const;

 private:
  explicit Value(Kind kind) : kind_(kind) {}

  Kind kind_;
  std::variant<int64_t, double> scalar_ = int64_t{0};
  std::variant<std::monostate, std::shared_ptr<const std::string>,
               std::shared_ptr<const std::vector<Value>>, std::shared_ptr<const Dict>,
               std::shared_ptr<Object>, std::shared_ptr<const Function>>
      ref_;
};

}  // namespace lockstep::tok::jinja

#endif  // LOCKSTEP_TOKENIZER_JINJA_VALUE_H_
