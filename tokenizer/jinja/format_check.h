// The load-time check of a template's format strings: a literal format string used with
// `.format(...)`, `%` or the `format` filter must stay within py_format.h's subset (no
// format specs such as '{:>5}', no '%5d', no keyword arguments to the filter), so that
// the template fails at load naming the construct and its line, not at a request:
//
//   "line 3: str.format: ValueError: unsupported format spec in '{:>5}'"
//
// A format string computed at render time can only be checked when it is used.
#ifndef LOCKSTEP_TOKENIZER_JINJA_FORMAT_CHECK_H_
#define LOCKSTEP_TOKENIZER_JINJA_FORMAT_CHECK_H_

#include "absl/status/status.h"
#include "tokenizer/jinja/ast.h"

namespace lockstep::tok::jinja {

absl::Status CheckFormatStrings(const Body& body);

}  // namespace lockstep::tok::jinja

#endif  // LOCKSTEP_TOKENIZER_JINJA_FORMAT_CHECK_H_
