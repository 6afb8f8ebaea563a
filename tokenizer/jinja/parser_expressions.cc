// The expression half of the parser (parser_internal.h): jinja2's precedence, loosest
// first: tuples, conditional expressions, or, and, not, comparisons, arithmetic, unary
// signs, then primaries with their postfixes (attributes, subscripts, calls), filters
// and tests.
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/parser_internal.h"

namespace lockstep::tok::jinja::internal {

bool Parser::TupleEnd(const std::set<std::string>& extra_ends) const {
  if (Cur().type == Type::kVariableEnd || Cur().type == Type::kBlockEnd || IsOp(")")) return true;
  return Cur().type == Type::kName && extra_ends.count(Cur().text) > 0;
}

ExprPtr Parser::ParseTuple(bool with_condexpr, const std::set<std::string>& extra_ends,
                           bool explicit_parens) {
  const int line = Cur().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty() && !ExpectOp(",")) return nullptr;
    if (TupleEnd(extra_ends)) break;
    ExprPtr e = ParseExpression(with_condexpr);
    if (!e) return nullptr;
    items.push_back(std::move(e));
    if (IsOp(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens)
      return FailExpr(Cur().line, absl::StrCat("expected an expression, got ", Describe(Cur())));
  }
  auto tuple = std::make_unique<Expr>(Expr::Kind::kTuple, line);
  tuple->args = std::move(items);
  return tuple;
}

ExprPtr Parser::ParseExpression(bool with_condexpr) {
  if (depth_ >= kMaxDepth) return FailExpr(Cur().line, "expression nested too deeply");
  ++depth_;
  ExprPtr e = with_condexpr ? CondExpr() : Or();
  --depth_;
  return e;
}

ExprPtr Parser::CondExpr() {
  ExprPtr expr = Or();
  while (expr && IsName("if")) {
    const int line = Cur().line;
    Next();
    ExprPtr test = Or();
    if (!test) return nullptr;
    ExprPtr otherwise;
    if (SkipName("else")) {
      otherwise = CondExpr();
      if (!otherwise) return nullptr;
    }
    auto node = std::make_unique<Expr>(Expr::Kind::kCondExpr, line);
    node->args.push_back(std::move(test));
    node->args.push_back(std::move(expr));
    node->args.push_back(std::move(otherwise));
    expr = std::move(node);
  }
  return expr;
}

ExprPtr Parser::Binary(Expr::Kind kind, std::string op, ExprPtr left, ExprPtr right, int line) {
  if (!left || !right) return nullptr;
  auto node = std::make_unique<Expr>(kind, line);
  node->name = std::move(op);
  node->args.push_back(std::move(left));
  node->args.push_back(std::move(right));
  return node;
}

ExprPtr Parser::Or() {
  ExprPtr left = And();
  while (left && IsName("or")) {
    const int line = Cur().line;
    Next();
    left = Binary(Expr::Kind::kOr, "or", std::move(left), And(), line);
  }
  return left;
}

ExprPtr Parser::And() {
  ExprPtr left = Not();
  while (left && IsName("and")) {
    const int line = Cur().line;
    Next();
    left = Binary(Expr::Kind::kAnd, "and", std::move(left), Not(), line);
  }
  return left;
}

ExprPtr Parser::Not() {
  if (IsName("not")) {
    const int line = Cur().line;
    Next();
    ExprPtr operand = Not();
    if (!operand) return nullptr;
    auto node = std::make_unique<Expr>(Expr::Kind::kNot, line);
    node->args.push_back(std::move(operand));
    return node;
  }
  return Compare();
}

ExprPtr Parser::Compare() {
  const int line = Cur().line;
  ExprPtr first = Arithmetic();
  if (!first) return nullptr;
  auto node = std::make_unique<Expr>(Expr::Kind::kCompare, line);
  node->args.push_back(std::move(first));
  while (true) {
    std::string op;
    if (Cur().type == Type::kOperator &&
        (Cur().text == "==" || Cur().text == "!=" || Cur().text == "<" || Cur().text == "<=" ||
         Cur().text == ">" || Cur().text == ">=")) {
      op = Cur().text;
      Next();
    } else if (IsName("in")) {
      op = "in";
      Next();
    } else if (IsName("not") && Peek().type == Type::kName && Peek().text == "in") {
      op = "not in";
      Next();
      Next();
    } else {
      break;
    }
    ExprPtr right = Arithmetic();
    if (!right) return nullptr;
    node->ops.push_back(std::move(op));
    node->args.push_back(std::move(right));
  }
  if (node->ops.empty()) return std::move(node->args[0]);
  return node;
}

// Left-associative binary operators, loosest first: + -, ~, * / // %, **.
ExprPtr Parser::Arithmetic(int level) {
  static const std::vector<std::vector<std::string>> kLevels = {
      {"+", "-"}, {"~"}, {"*", "/", "//", "%"}, {"**"}};
  const auto operand = [&] { return level + 1 < 4 ? Arithmetic(level + 1) : Unary(true); };
  ExprPtr left = operand();
  const auto& ops = kLevels[static_cast<size_t>(level)];
  while (left && Cur().type == Type::kOperator &&
         std::find(ops.begin(), ops.end(), Cur().text) != ops.end()) {
    const int line = Cur().line;
    std::string op = Cur().text;
    Next();
    left = Binary(Expr::Kind::kBinary, op, std::move(left), operand(), line);
  }
  return left;
}

ExprPtr Parser::Unary(bool with_filter) {
  const int line = Cur().line;
  ExprPtr node;
  if (IsOp("-") || IsOp("+")) {
    const bool neg = IsOp("-");
    Next();
    ExprPtr operand = Unary(false);
    if (!operand) return nullptr;
    node = std::make_unique<Expr>(neg ? Expr::Kind::kNeg : Expr::Kind::kPos, line);
    node->args.push_back(std::move(operand));
  } else {
    node = Primary();
  }
  node = Postfix(std::move(node));
  if (with_filter) node = FilterExpr(std::move(node));
  return node;
}

ExprPtr Parser::Literal(Value v, int line) {
  auto node = std::make_unique<Expr>(Expr::Kind::kLiteral, line);
  node->value = std::move(v);
  return node;
}

ExprPtr Parser::Primary() {
  const Token& t = Cur();
  const int line = t.line;
  switch (t.type) {
    case Type::kName: {
      const std::string name = t.text;
      Next();
      if (name == "true" || name == "True") return Literal(Value::Bool(true), line);
      if (name == "false" || name == "False") return Literal(Value::Bool(false), line);
      if (name == "none" || name == "None") return Literal(Value::None(), line);
      auto node = std::make_unique<Expr>(Expr::Kind::kName, line);
      node->name = name;
      return node;
    }
    case Type::kString: {
      std::string s;
      while (Cur().type == Type::kString) {
        s += Cur().text;
        Next();
      }
      return Literal(Value::String(std::move(s)), line);
    }
    case Type::kInteger: {
      int64_t i = 0;
      if (!absl::SimpleAtoi(t.text, &i))
        return FailExpr(line, absl::StrCat("integer out of range: ", t.text));
      Next();
      return Literal(Value::Int(i), line);
    }
    case Type::kFloat: {
      const double d = std::strtod(t.text.c_str(), nullptr);
      Next();
      return Literal(Value::Float(d), line);
    }
    case Type::kOperator:
      if (t.text == "(") {
        Next();
        ExprPtr inner = ParseTuple(true, {}, true);
        if (!inner || !ExpectOp(")")) return nullptr;
        return inner;
      }
      if (t.text == "[" || t.text == "{") {
        const bool dict = t.text == "{";
        const std::string close = dict ? "}" : "]";
        Next();
        auto node = std::make_unique<Expr>(dict ? Expr::Kind::kDict : Expr::Kind::kList, line);
        while (!IsOp(close)) {
          if (!node->args.empty() && !ExpectOp(",")) return nullptr;
          if (IsOp(close)) break;
          ExprPtr item = ParseExpression(true);
          if (!item) return nullptr;
          node->args.push_back(std::move(item));
          if (dict) {
            if (!ExpectOp(":")) return nullptr;
            ExprPtr value = ParseExpression(true);
            if (!value) return nullptr;
            node->args.push_back(std::move(value));
          }
        }
        Next();
        return node;
      }
      [[fallthrough]];
    default:
      return FailExpr(line, absl::StrCat("unexpected ", Describe(t)));
  }
}

ExprPtr Parser::Postfix(ExprPtr node) {
  while (node) {
    const int line = Cur().line;
    if (SkipOp(".")) {
      if (Cur().type == Type::kName) {
        auto attr = std::make_unique<Expr>(Expr::Kind::kGetattr, line);
        attr->name = Cur().text;
        attr->args.push_back(std::move(node));
        Next();
        node = std::move(attr);
      } else if (Cur().type == Type::kInteger) {
        auto item = std::make_unique<Expr>(Expr::Kind::kGetitem, line);
        item->args.push_back(std::move(node));
        item->args.push_back(Primary());
        node = std::move(item);
      } else {
        return FailExpr(
            line, absl::StrCat("expected an attribute name after '.', got ", Describe(Cur())));
      }
    } else if (SkipOp("[")) {
      std::vector<ExprPtr> keys;
      while (!IsOp("]")) {
        if (!keys.empty() && !ExpectOp(",")) return nullptr;
        if (IsOp("]")) break;
        ExprPtr key = Subscribed();
        if (!key) return nullptr;
        keys.push_back(std::move(key));
      }
      Next();
      if (keys.empty()) return FailExpr(line, "expected a subscript");
      auto item = std::make_unique<Expr>(Expr::Kind::kGetitem, line);
      item->args.push_back(std::move(node));
      if (keys.size() == 1) {
        item->args.push_back(std::move(keys[0]));
      } else {
        auto tuple = std::make_unique<Expr>(Expr::Kind::kTuple, line);
        tuple->args = std::move(keys);
        item->args.push_back(std::move(tuple));
      }
      node = std::move(item);
    } else if (IsOp("(")) {
      node = Call(std::move(node));
    } else {
      break;
    }
  }
  return node;
}

ExprPtr Parser::Subscribed() {
  const int line = Cur().line;
  std::vector<ExprPtr> parts;
  if (!SkipOp(":")) {
    ExprPtr e = ParseExpression(true);
    if (!e || !IsOp(":")) return e;
    Next();
    parts.push_back(std::move(e));
  } else {
    parts.push_back(nullptr);
  }
  const auto optional = [&]() -> bool {
    if (IsOp(":") || IsOp("]") || IsOp(",")) {
      parts.push_back(nullptr);
      return true;
    }
    ExprPtr e = ParseExpression(true);
    if (!e) return false;
    parts.push_back(std::move(e));
    return true;
  };
  if (!optional()) return nullptr;
  if (SkipOp(":")) {
    if (!optional()) return nullptr;
  } else {
    parts.push_back(nullptr);
  }
  auto slice = std::make_unique<Expr>(Expr::Kind::kSlice, line);
  slice->args = std::move(parts);
  return slice;
}

// `(args)` after a callee, into `node` (a kCall, kFilter or kTest whose args[0] is
// already set).
bool Parser::CallArgs(Expr* node) {
  if (!ExpectOp("(")) return false;
  bool first = true;
  while (!IsOp(")")) {
    if (!first && !ExpectOp(",")) return false;
    first = false;
    if (IsOp(")")) break;
    if (IsOp("*") || IsOp("**"))
      return Fail(Cur().line, "unsupported: *args and **kwargs in calls");
    if (Cur().type == Type::kName && Peek().type == Type::kOperator && Peek().text == "=") {
      std::string key = Cur().text;
      Next();
      Next();
      ExprPtr value = ParseExpression(true);
      if (!value) return false;
      node->kwargs.emplace_back(std::move(key), std::move(value));
    } else {
      if (!node->kwargs.empty())
        return Fail(Cur().line, "positional argument after a keyword argument");
      ExprPtr value = ParseExpression(true);
      if (!value) return false;
      node->args.push_back(std::move(value));
    }
  }
  Next();
  return true;
}

ExprPtr Parser::Call(ExprPtr callee) {
  const int line = Cur().line;
  if (callee->kind == Expr::Kind::kName) {
    called_names_.emplace_back(callee->name, line);
  } else if (callee->kind == Expr::Kind::kGetattr && !IsSupportedMethod(callee->name)) {
    return FailExpr(line, absl::StrCat("unsupported method '", callee->name, "'"));
  }
  auto node = std::make_unique<Expr>(Expr::Kind::kCall, line);
  node->args.push_back(std::move(callee));
  if (!CallArgs(node.get())) return nullptr;
  return node;
}

// A dotted filter or test name.
bool Parser::DottedName(std::string* name) {
  if (Cur().type != Type::kName)
    return Fail(Cur().line, absl::StrCat("expected a name, got ", Describe(Cur())));
  *name = Cur().text;
  Next();
  while (IsOp(".") && Peek().type == Type::kName) {
    Next();
    absl::StrAppend(name, ".", Cur().text);
    Next();
  }
  return true;
}

// `| f(...) | g` applied to `node` (`f(...) | g` when `start_inline`, as in a filter
// block).
ExprPtr Parser::Filters(ExprPtr node, bool start_inline) {
  while (node && (std::exchange(start_inline, false) || SkipOp("|"))) {
    const int line = Cur().line;
    auto filter = std::make_unique<Expr>(Expr::Kind::kFilter, line);
    if (!DottedName(&filter->name)) return nullptr;
    if (FindFilter(filter->name) == nullptr) {
      return FailExpr(line, absl::StrCat("unsupported filter '", filter->name, "'"));
    }
    filter->args.push_back(std::move(node));
    if (IsOp("(") && !CallArgs(filter.get())) return nullptr;
    node = std::move(filter);
  }
  return node;
}

ExprPtr Parser::FilterExpr(ExprPtr node) {
  while (node) {
    if (IsOp("|")) {
      node = Filters(std::move(node));
    } else if (IsName("is")) {
      node = Test(std::move(node));
    } else if (IsOp("(")) {
      node = Call(std::move(node));
    } else {
      break;
    }
  }
  return node;
}

ExprPtr Parser::Test(ExprPtr node) {
  const int line = Cur().line;
  Next();  // is
  auto test = std::make_unique<Expr>(Expr::Kind::kTest, line);
  test->negated = SkipName("not");
  if (!DottedName(&test->name)) return nullptr;
  if (FindTest(test->name) == nullptr) {
    return FailExpr(line, absl::StrCat("unsupported test '", test->name, "'"));
  }
  test->args.push_back(std::move(node));
  if (IsOp("(")) {
    if (!CallArgs(test.get())) return nullptr;
  } else if ((Cur().type == Type::kName || Cur().type == Type::kString ||
              Cur().type == Type::kInteger || Cur().type == Type::kFloat || IsOp("[") ||
              IsOp("{")) &&
             !IsName("else") && !IsName("or") && !IsName("and")) {
    if (IsName("is")) return FailExpr(Cur().line, "cannot chain multiple tests with is");
    ExprPtr arg = Postfix(Primary());
    if (!arg) return nullptr;
    test->args.push_back(std::move(arg));
  }
  return test;
}

}  // namespace lockstep::tok::jinja::internal
