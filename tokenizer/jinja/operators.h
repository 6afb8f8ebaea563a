// Python's arithmetic operators on jinja Values: + - * / // % ** (and Jinja's ~), unary
// - and +. Using an Undefined operand is an UndefinedError, as in jinja2. Thread-safe.
#ifndef LOCKSTEP_TOKENIZER_JINJA_OPERATORS_H_
#define LOCKSTEP_TOKENIZER_JINJA_OPERATORS_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tokenizer/jinja/value.h"

namespace lockstep::tok::jinja {

absl::StatusOr<Value> BinaryOp(absl::string_view op, const Value& a, const Value& b);
// op is "-" or "+".
absl::StatusOr<Value> UnaryOp(absl::string_view op, const Value& v);

}  // namespace lockstep::tok::jinja

#endif  // LOCKSTEP_TOKENIZER_JINJA_OPERATORS_H_
