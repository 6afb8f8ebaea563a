// Python's string formatting as templates use it: `'{} {name}'.format(...)` and
// `'%s' % x` (also the `format` filter). The subset: fields {}, {0}, {name}, {0[key]},
// {x.attr} with !r or !s and no format spec; % conversions %s %r %d %i %f (no flags,
// width or precision) and %%.
//
// The Check* functions look at a format string alone, so that a template whose format
// string is a literal fails at load when it uses anything outside the subset (parser.h).
// Thread-safe.
#ifndef LOCKSTEP_TOKENIZER_JINJA_PY_FORMAT_H_
#define LOCKSTEP_TOKENIZER_JINJA_PY_FORMAT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tokenizer/jinja/value.h"

namespace lockstep::tok::jinja {

// str.format(*args, **kwargs).
absl::StatusOr<std::string> PyFormat(absl::string_view format, const CallArgs& args);
// `format % args` (`args` a tuple of values, or one value).
absl::StatusOr<std::string> PyPercentFormat(absl::string_view format, const Value& args);

// The error PyFormat / PyPercentFormat would give for `format` whatever the arguments
// (an unsupported spec or conversion, a lone brace, a trailing '%'), else OK.
absl::Status CheckFormat(absl::string_view format);
absl::Status CheckPercentFormat(absl::string_view format);

}  // namespace lockstep::tok::jinja

#endif  // LOCKSTEP_TOKENIZER_JINJA_PY_FORMAT_H_
