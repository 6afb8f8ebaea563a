// Python semantics on jinja Values, as jinja2 inherits them from Python: truth, str(),
// repr(), ==, ordering, len(), iteration, float repr and json.dumps, plus the error
// statuses jinja2 would raise (messages start with the Python exception's name).
// Strings are UTF-8; lengths, indexes and slices count code points, as Python does.
// All functions are pure and thread-safe.
#ifndef LOCKSTEP_TOKENIZER_JINJA_PYOPS_H_
#define LOCKSTEP_TOKENIZER_JINJA_PYOPS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tokenizer/jinja/value.h"

namespace lockstep::tok::jinja {

// The std::string_view that unicode.h takes.
inline std::string_view StdView(absl::string_view s) { return {s.data(), s.size()}; }

// Render-time errors, named like the Python exceptions jinja2 raises.
absl::Status TypeError(absl::string_view message);
absl::Status ValueError(absl::string_view message);
absl::Status UndefinedError(const Value& undefined);
absl::Status SecurityError(absl::string_view message);

bool Truthy(const Value& v);
std::string Str(const Value& v);   // str(v); "" for Undefined
std::string Repr(const Value& v);  // repr(v)
std::string TypeName(const Value& v);
// jinja2's object_type_repr: "None", "dict object", ...
std::string ObjectTypeRepr(const Value& v);
std::string FloatRepr(double d);

bool Equals(const Value& a, const Value& b);
// Three-way comparison for <, <=, >, >=: numbers, strings (by code point) and
// sequences of the same kind; TypeError otherwise (UndefinedError for Undefined).
absl::StatusOr<int> Compare(const Value& a, const Value& b, absl::string_view op);

absl::StatusOr<int64_t> Length(const Value& v);
// `item in container`.
absl::StatusOr<bool> Contains(const Value& container, const Value& item);
// The items `for` visits: a sequence's items, a dict's keys, a string's characters;
// nothing for Undefined.
absl::StatusOr<std::vector<Value>> Iterate(const Value& v);

// UTF-8 <-> code points (input is valid UTF-8).
std::u32string ToCodePoints(absl::string_view s);
std::string FromCodePoints(std::u32string_view s);
// Python's str.isspace for one character.
bool IsPySpace(char32_t c);

struct JsonOptions {
  bool ensure_ascii = false;
  int indent = -1;  // -1: None (one line)
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};
// Python json.dumps(v, ...); TypeError for values JSON cannot hold.
absl::StatusOr<std::string> JsonDumps(const Value& v, const JsonOptions& options);

}  // namespace lockstep::tok::jinja

#endif  // LOCKSTEP_TOKENIZER_JINJA_PYOPS_H_
