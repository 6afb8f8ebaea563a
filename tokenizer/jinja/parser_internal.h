// The recursive-descent parser behind Parse (parser.h), shared by its two source files:
// parser.cc (statements: tags and blocks) and parser_expressions.cc (expressions, with
// jinja2's precedence). Internal to the jinja library.
#ifndef LOCKSTEP_TOKENIZER_JINJA_PARSER_INTERNAL_H_
#define LOCKSTEP_TOKENIZER_JINJA_PARSER_INTERNAL_H_

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/lexer.h"

namespace lockstep::tok::jinja::internal {

// Recursive descent over the tokens. Parse functions return null (or false) after
// recording the first error in `error_`. One parser per template; not thread-safe.
class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : tokens_(tokens) {}

  absl::StatusOr<Body> Run();

 private:
  using Type = Token::Type;

  // ---- the token cursor and errors ----

  const Token& Cur() const { return tokens_[pos_]; }
  const Token& Peek(size_t n = 1) const { return tokens_[std::min(pos_ + n, tokens_.size() - 1)]; }
  void Next() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  bool IsOp(absl::string_view op) const {
    return Cur().type == Type::kOperator && Cur().text == op;
  }
  bool IsName(absl::string_view name) const {
    return Cur().type == Type::kName && Cur().text == name;
  }
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
      case Type::kEof:
        return "end of template";
      case Type::kBlockEnd:
        return "'%}'";
      case Type::kVariableEnd:
        return "'}}'";
      case Type::kBlockBegin:
        return "'{%'";
      case Type::kVariableBegin:
        return "'{{'";
      case Type::kData:
        return "template text";
      case Type::kString:
        return "a string";
      default:
        return absl::StrCat("'", t.text, "'");
    }
  }

  bool Fail(int line, absl::string_view message) {
    if (error_.ok())
      error_ = absl::InvalidArgumentError(absl::StrCat("line ", line, ": ", message));
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

  // ---- statements (parser.cc) ----

  bool Subparse(const std::set<std::string>& ends, Body* body, std::string* end);
  bool Block(const std::set<std::string>& ends, Body* body, std::string* end);
  bool Statement(Body* body);
  std::unique_ptr<Node> If(int line);
  bool Targets(std::vector<std::string>* names);
  std::unique_ptr<Node> For(int line);
  std::unique_ptr<Node> Set(int line);
  bool ParseParams(Params* params);
  std::unique_ptr<Node> Macro(int line);
  std::unique_ptr<Node> CallBlock(int line);
  static ExprPtr BlockValue(int line);

  // ---- expressions (parser_expressions.cc) ----

  bool TupleEnd(const std::set<std::string>& extra_ends) const;
  ExprPtr ParseTuple(bool with_condexpr, const std::set<std::string>& extra_ends,
                     bool explicit_parens = false);
  ExprPtr ParseExpression(bool with_condexpr);
  ExprPtr CondExpr();
  ExprPtr Binary(Expr::Kind kind, std::string op, ExprPtr left, ExprPtr right, int line);
  ExprPtr Or();
  ExprPtr And();
  ExprPtr Not();
  ExprPtr Compare();
  ExprPtr Arithmetic(int level = 0);
  ExprPtr Unary(bool with_filter);
  ExprPtr Literal(Value v, int line);
  ExprPtr Primary();
  ExprPtr Postfix(ExprPtr node);
  ExprPtr Subscribed();
  bool CallArgs(Expr* node);
  ExprPtr Call(ExprPtr callee);
  bool DottedName(std::string* name);
  ExprPtr Filters(ExprPtr node, bool start_inline = false);
  ExprPtr FilterExpr(ExprPtr node);
  ExprPtr Test(ExprPtr node);

  static constexpr int kMaxDepth = 100;

  const std::vector<Token>& tokens_;
  size_t pos_ = 0;
  int depth_ = 0;  // nested ParseExpression calls
  absl::Status error_;
  int loop_depth_ = 0;
  std::set<std::string> assigned_;  // names a template may bind to a callable
  std::vector<std::pair<std::string, int>> called_names_;
};

}  // namespace lockstep::tok::jinja::internal

#endif  // LOCKSTEP_TOKENIZER_JINJA_PARSER_INTERNAL_H_
