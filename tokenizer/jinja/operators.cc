#include "tokenizer/jinja/operators.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "tokenizer/jinja/methods.h"
#include "tokenizer/jinja/py_format.h"
#include "tokenizer/jinja/pyops.h"

namespace lockstep::tok::jinja {
namespace {

absl::Status Unsupported(absl::string_view op, const Value& a, const Value& b) {
  if (a.is_string() && op == "+") {
    return TypeError(absl::StrCat("can only concatenate str (not \"", TypeName(b), "\") to str"));
  }
  if (a.kind() == Value::Kind::kList && op == "+") {
    return TypeError(absl::StrCat("can only concatenate list (not \"", TypeName(b), "\") to list"));
  }
  return TypeError(absl::StrCat("unsupported operand type(s) for ", op, ": '", TypeName(a),
                                "' and '", TypeName(b), "'"));
}

absl::Status ZeroDivision(absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("ZeroDivisionError: ", message));
}

Value Repeat(const Value& seq, int64_t times) {
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += seq.str();
    return Value::String(std::move(out));
  }
  std::vector<Value> out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return seq.kind() == Value::Kind::kTuple ? Value::Tuple(std::move(out)) : Value::List(std::move(out));
}

int64_t FloorDiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

int64_t FloorMod(int64_t a, int64_t b) {
  const int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

absl::StatusOr<Value> Numeric(absl::string_view op, const Value& a, const Value& b) {
  const bool ints = a.is_int() && b.is_int();
  const double x = a.as_double(), y = b.as_double();
  if (op == "+") return ints ? Value::Int(a.as_int() + b.as_int()) : Value::Float(x + y);
  if (op == "-") return ints ? Value::Int(a.as_int() - b.as_int()) : Value::Float(x - y);
  if (op == "*") return ints ? Value::Int(a.as_int() * b.as_int()) : Value::Float(x * y);
  if (op == "/") {
    if (y == 0) return ZeroDivision("division by zero");
    return Value::Float(x / y);
  }
  if (op == "//" || op == "%") {
    if (y == 0) return ZeroDivision(ints ? "integer division or modulo by zero" : "float modulo");
    if (ints) {
      return Value::Int(op == "//" ? FloorDiv(a.as_int(), b.as_int()) : FloorMod(a.as_int(), b.as_int()));
    }
    if (op == "//") return Value::Float(std::floor(x / y));
    double r = std::fmod(x, y);
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    return Value::Float(r);
  }
  // **
  if (ints && b.as_int() >= 0) {
    int64_t result = 1;
    for (int64_t i = 0; i < b.as_int(); ++i) result *= a.as_int();
    return Value::Int(result);
  }
  return Value::Float(std::pow(x, y));
}

}  // namespace

absl::StatusOr<Value> BinaryOp(absl::string_view op, const Value& a, const Value& b) {
  if (op == "~") return Value::String(Str(a) + Str(b));
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  if (a.is_number() && b.is_number()) return Numeric(op, a, b);
  if (op == "+") {
    if (a.is_string() && b.is_string()) return Value::String(a.str() + b.str());
    if (a.is_sequence() && a.kind() == b.kind()) {
      std::vector<Value> out = a.items();
      out.insert(out.end(), b.items().begin(), b.items().end());
      return a.kind() == Value::Kind::kTuple ? Value::Tuple(std::move(out)) : Value::List(std::move(out));
    }
  }
  if (op == "*") {
    if ((a.is_string() || a.is_sequence()) && b.is_int()) return Repeat(a, b.as_int());
    if (a.is_int() && (b.is_string() || b.is_sequence())) return Repeat(b, a.as_int());
  }
  if (op == "%" && a.is_string()) {
    absl::StatusOr<std::string> out = PyPercentFormat(a.str(), b);
    if (!out.ok()) return out.status();
    return Value::String(std::move(*out));
  }
  return Unsupported(op, a, b);
}

absl::StatusOr<Value> UnaryOp(absl::string_view op, const Value& v) {
  if (v.is_undefined()) return UndefinedError(v);
  if (!v.is_number()) {
    return TypeError(absl::StrCat("bad operand type for unary ", op, ": '", TypeName(v), "'"));
  }
  if (op == "+") return v.is_int() ? Value::Int(v.as_int()) : v;
  return v.is_int() ? Value::Int(-v.as_int()) : Value::Float(-v.as_double());
}

}  // namespace lockstep::tok::jinja
