// Python methods of str, dict and list that templates call (`s.startswith('x')`,
// `d.items()`), bound to their object, and the string operations filters share.
// Case mappings are the C library's simple Unicode mappings (no ß -> SS, no final
// sigma). Thread-safe.
#ifndef LOCKSTEP_TOKENIZER_JINJA_METHODS_H_
#define LOCKSTEP_TOKENIZER_JINJA_METHODS_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tokenizer/jinja/value.h"

namespace lockstep::tok::jinja {

// The method `name` of `obj` (a str, dict, list or tuple) as a callable, or nullopt
// when the interpreter does not support it on that type.
std::optional<Value> BoundMethod(const Value& obj, absl::string_view name);
// Whether some type has a supported method `name`.
bool IsMethodName(absl::string_view name);

std::string PyUpper(absl::string_view s);
std::string PyLower(absl::string_view s);
std::string PyTitle(absl::string_view s);
std::string PyCapitalize(absl::string_view s);
// str.strip/lstrip/rstrip; `chars` nullopt strips whitespace.
std::string PyStrip(absl::string_view s, const std::optional<std::string>& chars, bool left,
                    bool right);
// str.replace(old, new, count); count < 0 replaces all.
std::string PyReplace(absl::string_view s, absl::string_view old, absl::string_view with,
                      int64_t count);

}  // namespace lockstep::tok::jinja

#endif  // LOCKSTEP_TOKENIZER_JINJA_METHODS_H_
