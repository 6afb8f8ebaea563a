#include "tokenizer/jinja/parser.h"

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/parser_internal.h"

namespace lockstep::tok::jinja {
namespace internal {

absl::StatusOr<Body> Parser::Run() {
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

// Statements until `{% end %}` for one of `ends` (stops before its name, *end set)
// or the end of the template when `ends` is empty.
bool Parser::Subparse(const std::set<std::string>& ends, Body* body, std::string* end) {
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
bool Parser::Block(const std::set<std::string>& ends, Body* body, std::string* end) {
  if (!Expect(Type::kBlockEnd, "'%}'")) return false;
  return Subparse(ends, body, end);
}

bool Parser::Statement(Body* body) {
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
    node =
        std::make_unique<Node>(name == "break" ? Node::Kind::kBreak : Node::Kind::kContinue, line);
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

std::unique_ptr<Node> Parser::If(int line) {
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
bool Parser::Targets(std::vector<std::string>* names) {
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

std::unique_ptr<Node> Parser::For(int line) {
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

std::unique_ptr<Node> Parser::Set(int line) {
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
  if (!Block({"endset"}, &node->bodies[0], &end) || !Expect(Type::kBlockEnd, "'%}'"))
    return nullptr;
  return node;
}

bool Parser::ParseParams(Params* params) {
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

std::unique_ptr<Node> Parser::Macro(int line) {
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

std::unique_ptr<Node> Parser::CallBlock(int line) {
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

ExprPtr Parser::BlockValue(int line) {
  auto e = std::make_unique<Expr>(Expr::Kind::kName, line);
  e->name = kBlockValueName;
  return e;
}

}  // namespace internal

absl::StatusOr<Body> Parse(const std::vector<Token>& tokens) {
  return internal::Parser(tokens).Run();
}

}  // namespace lockstep::tok::jinja
