#include "tokenizer/jinja/parser.h"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tokenizer/jinja/builtins.h"

namespace lockstep::tok::jinja {
namespace {

using Type = Token::Type;

// Recursive descent over the tokens. Parse functions return null after recording the
// first error in `error_`.
class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : tokens_(tokens) {}

  absl::StatusOr<Body> Run() {
    Body body;
    std::string end;
    if (!Subparse({}, &body, &end)) return error_;
    for (const auto& [name, line] : called_names_) {
      if (FindGlobal(name).is_undefined() && !assigned_.count(name) && name != "caller") {
        return absl::InvalidArgumentError(
            absl::StrCat("line ", line, ": unsupported function '", name, "'"));
      }
    }
    return body;
  }

 private:
  const Token& Cur() const { return tokens_[pos_]; }
  const Token& Peek(size_t n = 1) const { return tokens_[std::min(pos_ + n, tokens_.size() - 1)]; }
  void Next() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  bool IsOp(absl::string_view op) const { return Cur().type == Type::kOperator && Cur().text == op; }
  bool IsName(absl::string_view name) const { return Cur().type == Type::kName && Cur().text == name; }
  bool SkipOp(absl::string_view op) {
    if (!IsOp(op)) return false;
    Next();
    return true;
  }
  bool SkipName(absl::string_view name) {
    if (!IsName(name)) return false;
    Next();
    return true;
  }

  std::string Describe(const Token& t) const {
    switch (t.type) {
      case Type::kEof: return "end of template";
      case Type::kBlockEnd: return "'%}'";
      case Type::kVariableEnd: return "'}}'";
      case Type::kBlockBegin: return "'{%'";
      case Type::kVariableBegin: return "'{{'";
      case Type::kData: return "template text";
      case Type::kString: return "a string";
      default: return absl::StrCat("'", t.text, "'");
    }
  }

  bool Fail(int line, absl::string_view message) {
    if (error_.ok()) error_ = absl::InvalidArgumentError(absl::StrCat("line ", line, ": ", message));
    return false;
  }
  ExprPtr FailExpr(int line, absl::string_view message) {
    Fail(line, message);
    return nullptr;
  }
  bool Expect(Type type, absl::string_view what) {
    if (Cur().type == type) {
      Next();
      return true;
    }
    return Fail(Cur().line, absl::StrCat("expected ", what, ", got ", Describe(Cur())));
  }
  bool ExpectOp(absl::string_view op) {
    if (SkipOp(op)) return true;
    return Fail(Cur().line, absl::StrCat("expected '", op, "', got ", Describe(Cur())));
  }
  bool ExpectName(absl::string_view name) {
    if (SkipName(name)) return true;
    return Fail(Cur().line, absl::StrCat("expected '", name, "', got ", Describe(Cur())));
  }

  // Statements until `{% end %}` for one of `ends` (stops before its name, *end set)
  // or the end of the template when `ends` is empty.
  bool Subparse(const std::set<std::string>& ends, Body* body, std::string* end) {
    while (true) {
      const Token& t = Cur();
      switch (t.type) {
        case Type::kEof:
          if (ends.empty()) return true;
          for (const std::string& e : ends) {
            if (e.rfind("end", 0) == 0) {
              return Fail(t.line, absl::StrCat("unexpected end of template, expected '", e, "'"));
            }
          }
          return Fail(t.line, "unexpected end of template");
        case Type::kData: {
          auto node = std::make_unique<Node>(Node::Kind::kText, t.line);
          node->text = t.text;
          body->push_back(std::move(node));
          Next();
          break;
        }
        case Type::kVariableBegin: {
          Next();
          auto node = std::make_unique<Node>(Node::Kind::kOutput, t.line);
          ExprPtr e = ParseTuple(true, {});
          if (!e || !Expect(Type::kVariableEnd, "'}}'")) return false;
          node->exprs.push_back(std::move(e));
          body->push_back(std::move(node));
          break;
        }
        case Type::kBlockBegin: {
          Next();
          if (Cur().type != Type::kName) return Fail(Cur().line, "expected a tag name after '{%'");
          if (ends.count(Cur().text)) {
            *end = Cur().text;
            Next();
            return true;
          }
          if (!Statement(body)) return false;
          break;
        }
        default:
          return Fail(t.line, absl::StrCat("unexpected ", Describe(t)));
      }
    }
  }

  // The body of a block up to one of `ends`; leaves the parser after `%}` of the end tag
  // when it takes no arguments.
  bool Block(const std::set<std::string>& ends, Body* body, std::string* end) {
    if (!Expect(Type::kBlockEnd, "'%}'")) return false;
    return Subparse(ends, body, end);
  }

  bool Statement(Body* body) {
    const Token& tag = Cur();
    const int line = tag.line;
    const std::string name = tag.text;
    Next();
    std::unique_ptr<Node> node;
    if (name == "if") {
      node = If(line);
    } else if (name == "for") {
      node = For(line);
    } else if (name == "set") {
      node = Set(line);
    } else if (name == "macro") {
      node = Macro(line);
    } else if (name == "call") {
      node = CallBlock(line);
    } else if (name == "filter") {
      node = std::make_unique<Node>(Node::Kind::kFilterBlock, line);
      ExprPtr chain = Filters(BlockValue(line), /*start_inline=*/true);
      std::string end;
      node->exprs.push_back(std::move(chain));
      node->bodies.emplace_back();
      if (!node->exprs[0] || !Block({"endfilter"}, &node->bodies[0], &end) ||
          !Expect(Type::kBlockEnd, "'%}'")) {
        return false;
      }
    } else if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) return Fail(line, absl::StrCat("'", name, "' outside of a loop"));
      node = std::make_unique<Node>(name == "break" ? Node::Kind::kBreak : Node::Kind::kContinue, line);
      if (!Expect(Type::kBlockEnd, "'%}'")) return false;
    } else if (name == "generation") {
      // transformers' AssistantTracker tag: a call block that renders its body (it only
      // marks assistant spans): a filter block without filters.
      node = std::make_unique<Node>(Node::Kind::kFilterBlock, line);
      node->bodies.emplace_back();
      std::string end;
      if (!Block({"endgeneration"}, &node->bodies[0], &end) || !Expect(Type::kBlockEnd, "'%}'")) {
        return false;
      }
    } else {
      // include, extends, import, block, with, autoescape, do, trans, ...
      if (name.rfind("end", 0) != 0) return Fail(line, absl::StrCat("unsupported tag '", name, "'"));
      return Fail(line, absl::StrCat("unexpected '", name, "' (no block is open that it ends)"));
    }
    if (!node) return false;
    body->push_back(std::move(node));
    return true;
  }

  std::unique_ptr<Node> If(int line) {
    auto node = std::make_unique<Node>(Node::Kind::kIf, line);
    std::string end = "if";
    while (end == "if" || end == "elif") {
      ExprPtr test = ParseTuple(false, {});
      if (!test) return nullptr;
      node->exprs.push_back(std::move(test));
      node->bodies.emplace_back();
      if (!Block({"elif", "else", "endif"}, &node->bodies.back(), &end)) return nullptr;
    }
    if (end == "else") {
      node->bodies.emplace_back();
      if (!Block({"endif"}, &node->bodies.back(), &end)) return nullptr;
    }
    if (!Expect(Type::kBlockEnd, "'%}'")) return nullptr;
    return node;
  }

  // Names of an assignment target: `a`, `a, b`, `(a, b)`.
  bool Targets(std::vector<std::string>* names) {
    const bool paren = SkipOp("(");
    do {
      if (paren && IsOp(")")) break;
      if (Cur().type != Type::kName) {
        return Fail(Cur().line, absl::StrCat("cannot assign to ", Describe(Cur())));
      }
      names->push_back(Cur().text);
      assigned_.insert(Cur().text);
      Next();
    } while (SkipOp(","));
    return !paren || ExpectOp(")");
  }

  std::unique_ptr<Node> For(int line) {
    auto node = std::make_unique<Node>(Node::Kind::kFor, line);
    if (!Targets(&node->targets) || !ExpectName("in")) return nullptr;
    ExprPtr iter = ParseTuple(false, {"recursive", "if"});
    if (!iter) return nullptr;
    node->exprs.push_back(std::move(iter));
    if (SkipName("if")) {
      ExprPtr cond = ParseExpression(true);
      if (!cond) return nullptr;
      node->exprs.push_back(std::move(cond));
    }
    if (IsName("recursive")) return Fail(Cur().line, "unsupported: recursive for loops"), nullptr;
    node->bodies.resize(2);
    std::string end;
    ++loop_depth_;
    const bool ok = Block({"endfor", "else"}, &node->bodies[0], &end);
    --loop_depth_;
    if (!ok) return nullptr;
    if (end == "else" && !Block({"endfor"}, &node->bodies[1], &end)) return nullptr;
    if (!Expect(Type::kBlockEnd, "'%}'")) return nullptr;
    return node;
  }

  std::unique_ptr<Node> Set(int line) {
    auto node = std::make_unique<Node>(Node::Kind::kSet, line);
    if (Cur().type == Type::kName && Peek().type == Type::kOperator && Peek().text == ".") {
      node->attribute = true;
      node->targets.push_back(Cur().text);
      Next();
      Next();
      if (Cur().type != Type::kName) return Fail(Cur().line, "expected an attribute name"), nullptr;
      node->name = Cur().text;
      Next();
    } else if (!Targets(&node->targets)) {
      return nullptr;
    }
    if (SkipOp("=")) {
      ExprPtr value = ParseTuple(true, {});
      if (!value || !Expect(Type::kBlockEnd, "'%}'")) return nullptr;
      node->exprs.push_back(std::move(value));
      return node;
    }
    if (node->attribute || node->targets.size() != 1) {
      return Fail(line, "a block set assigns one name"), nullptr;
    }
    node->kind = Node::Kind::kSetBlock;
    if (IsOp("|")) {
      ExprPtr chain = Filters(BlockValue(line));
      if (!chain) return nullptr;
      node->exprs.push_back(std::move(chain));
    }
    node->bodies.emplace_back();
    std::string end;
    if (!Block({"endset"}, &node->bodies[0], &end) || !Expect(Type::kBlockEnd, "'%}'")) return nullptr;
    return node;
  }

  bool ParseParams(Params* params) {
    if (!ExpectOp("(")) return false;
    while (!IsOp(")")) {
      if (!params->names.empty() && !ExpectOp(",")) return false;
      if (IsOp(")")) break;
      if (Cur().type != Type::kName) return Fail(Cur().line, "expected a parameter name");
      params->names.push_back(Cur().text);
      assigned_.insert(Cur().text);
      Next();
      ExprPtr def;
      if (SkipOp("=")) {
        def = ParseExpression(true);
        if (!def) return false;
      } else if (!params->defaults.empty() && params->defaults.back()) {
        return Fail(Cur().line, "parameter without a default follows one with a default");
      }
      params->defaults.push_back(std::move(def));
    }
    Next();
    return true;
  }

  std::unique_ptr<Node> Macro(int line) {
    auto node = std::make_unique<Node>(Node::Kind::kMacro, line);
    if (Cur().type != Type::kName) return Fail(Cur().line, "expected a macro name"), nullptr;
    node->name = Cur().text;
    assigned_.insert(node->name);
    Next();
    if (!ParseParams(&node->params)) return nullptr;
    node->bodies.emplace_back();
    std::string end;
    const int saved = loop_depth_;
    loop_depth_ = 0;
    const bool ok = Block({"endmacro"}, &node->bodies[0], &end);
    loop_depth_ = saved;
    if (!ok) return nullptr;
    if (Cur().type == Type::kName && Cur().text == node->name) Next();
    if (!Expect(Type::kBlockEnd, "'%}'")) return nullptr;
    return node;
  }

  std::unique_ptr<Node> CallBlock(int line) {
    auto node = std::make_unique<Node>(Node::Kind::kCallBlock, line);
    if (IsOp("(") && !ParseParams(&node->params)) return nullptr;
    ExprPtr call = ParseExpression(true);
    if (!call) return nullptr;
    if (call->kind != Expr::Kind::kCall) return Fail(line, "expected a call after 'call'"), nullptr;
    node->exprs.push_back(std::move(call));
    node->bodies.emplace_back();
    std::string end;
    const int saved = loop_depth_;
    loop_depth_ = 0;
    const bool ok = Block({"endcall"}, &node->bodies[0], &end);
    loop_depth_ = saved;
    if (!ok || !Expect(Type::kBlockEnd, "'%}'")) return nullptr;
    return node;
  }

  static ExprPtr BlockValue(int line) {
    auto e = std::make_unique<Expr>(Expr::Kind::kName, line);
    e->name = kBlockValueName;
    return e;
  }

  // ---- expressions (jinja2's precedence, lowest first) ----

  bool TupleEnd(const std::set<std::string>& extra_ends) const {
    if (Cur().type == Type::kVariableEnd || Cur().type == Type::kBlockEnd || IsOp(")")) return true;
    return Cur().type == Type::kName && extra_ends.count(Cur().text) > 0;
  }

  ExprPtr ParseTuple(bool with_condexpr, const std::set<std::string>& extra_ends,
                     bool explicit_parens = false) {
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
      if (!explicit_parens) return FailExpr(Cur().line, absl::StrCat("expected an expression, got ", Describe(Cur())));
    }
    auto tuple = std::make_unique<Expr>(Expr::Kind::kTuple, line);
    tuple->args = std::move(items);
    return tuple;
  }

  ExprPtr ParseExpression(bool with_condexpr) {
    if (depth_ >= kMaxDepth) return FailExpr(Cur().line, "expression nested too deeply");
    ++depth_;
    ExprPtr e = with_condexpr ? CondExpr() : Or();
    --depth_;
    return e;
  }

  ExprPtr CondExpr() {
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

  ExprPtr Binary(Expr::Kind kind, std::string op, ExprPtr left, ExprPtr right, int line) {
    if (!left || !right) return nullptr;
    auto node = std::make_unique<Expr>(kind, line);
    node->name = std::move(op);
    node->args.push_back(std::move(left));
    node->args.push_back(std::move(right));
    return node;
  }

  ExprPtr Or() {
    ExprPtr left = And();
    while (left && IsName("or")) {
      const int line = Cur().line;
      Next();
      left = Binary(Expr::Kind::kOr, "or", std::move(left), And(), line);
    }
    return left;
  }

  ExprPtr And() {
    ExprPtr left = Not();
    while (left && IsName("and")) {
      const int line = Cur().line;
      Next();
      left = Binary(Expr::Kind::kAnd, "and", std::move(left), Not(), line);
    }
    return left;
  }

  ExprPtr Not() {
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

  ExprPtr Compare() {
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
  ExprPtr Arithmetic(int level = 0) {
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

  ExprPtr Unary(bool with_filter) {
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

  ExprPtr Literal(Value v, int line) {
    auto node = std::make_unique<Expr>(Expr::Kind::kLiteral, line);
    node->value = std::move(v);
    return node;
  }

  ExprPtr Primary() {
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
        if (!absl::SimpleAtoi(t.text, &i)) return FailExpr(line, absl::StrCat("integer out of range: ", t.text));
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

  ExprPtr Postfix(ExprPtr node) {
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
          return FailExpr(line, absl::StrCat("expected an attribute name after '.', got ", Describe(Cur())));
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

  ExprPtr Subscribed() {
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
  bool CallArgs(Expr* node) {
    if (!ExpectOp("(")) return false;
    bool first = true;
    while (!IsOp(")")) {
      if (!first && !ExpectOp(",")) return false;
      first = false;
      if (IsOp(")")) break;
      if (IsOp("*") || IsOp("**")) return Fail(Cur().line, "unsupported: *args and **kwargs in calls");
      if (Cur().type == Type::kName && Peek().type == Type::kOperator && Peek().text == "=") {
        std::string key = Cur().text;
        Next();
        Next();
        ExprPtr value = ParseExpression(true);
        if (!value) return false;
        node->kwargs.emplace_back(std::move(key), std::move(value));
      } else {
        if (!node->kwargs.empty()) return Fail(Cur().line, "positional argument after a keyword argument");
        ExprPtr value = ParseExpression(true);
        if (!value) return false;
        node->args.push_back(std::move(value));
      }
    }
    Next();
    return true;
  }

  ExprPtr Call(ExprPtr callee) {
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
  bool DottedName(std::string* name) {
    if (Cur().type != Type::kName) return Fail(Cur().line, absl::StrCat("expected a name, got ", Describe(Cur())));
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
  ExprPtr Filters(ExprPtr node, bool start_inline = false) {
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

  ExprPtr FilterExpr(ExprPtr node) {
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

  ExprPtr Test(ExprPtr node) {
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

  static constexpr int kMaxDepth = 100;

  const std::vector<Token>& tokens_;
  size_t pos_ = 0;
  int depth_ = 0;  // nested ParseExpression calls
  absl::Status error_;
  int loop_depth_ = 0;
  std::set<std::string> assigned_;  // names a template may bind to a callable
  std::vector<std::pair<std::string, int>> called_names_;
};

}  // namespace

absl::StatusOr<Body> Parse(const std::vector<Token>& tokens) { return Parser(tokens).Run(); }

}  // namespace lockstep::tok::jinja
