// What templates can use besides syntax: jinja2's filters and tests (the subset chat
// templates use), attribute and item lookup as jinja2's ImmutableSandboxedEnvironment
// does it (Python methods of str, dict and list; mutating ones are unsafe), and the
// globals Hugging Face provides (range, dict, namespace, raise_exception, strftime_now).
// The parser checks names against these tables so that unsupported ones fail at load.
// Thread-safe.
#ifndef LOCKSTEP_TOKENIZER_JINJA_BUILTINS_H_
#define LOCKSTEP_TOKENIZER_JINJA_BUILTINS_H_

#include <initializer_list>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tokenizer/jinja/value.h"

namespace lockstep::tok::jinja {

// A filter: `subject | name(args)`.
using FilterFunction = absl::StatusOr<Value> (*)(const Value& subject, const CallArgs& args);
// A test: `subject is name(args)`.
using TestFunction = absl::StatusOr<bool> (*)(const Value& subject, const CallArgs& args);

// Null when the name is not supported.
FilterFunction FindFilter(absl::string_view name);
TestFunction FindTest(absl::string_view name);
// Whether `x.name(...)` names a supported method of str, dict, list, loop or caller.
bool IsSupportedMethod(absl::string_view name);
// Undefined when `name` is not a global.
Value FindGlobal(absl::string_view name);

// jinja2's sandboxed getattr (x.name) and getitem (x[key]); missing ones are Undefined.
// Using an Undefined `obj` is an UndefinedError.
absl::StatusOr<Value> GetAttr(const Value& obj, absl::string_view name);
absl::StatusOr<Value> GetItem(const Value& obj, const Value& key);
// x[start:stop:step] of a str, list or tuple; absent bounds are None.
absl::StatusOr<Value> GetSlice(const Value& obj, const Value& start, const Value& stop,
                               const Value& step);
absl::StatusOr<Value> CallValue(const Value& callee, const CallArgs& args);

// Binds `args` to parameter names: (*out)[i] is the value passed for names[i], by
// position or keyword, or nullopt. TypeError for unknown, extra or duplicate arguments.
absl::Status BindArgs(absl::string_view function, const CallArgs& args,
                      std::initializer_list<absl::string_view> names,
                      std::vector<std::optional<Value>>* out);

}  // namespace lockstep::tok::jinja

#endif  // LOCKSTEP_TOKENIZER_JINJA_BUILTINS_H_
