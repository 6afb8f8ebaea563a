// The syntax tree the parser builds and the renderer walks. Immutable after parsing.
#ifndef LOCKSTEP_TOKENIZER_JINJA_AST_H_
#define LOCKSTEP_TOKENIZER_JINJA_AST_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja/value.h"

namespace lockstep::tok::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,   // value
    kName,      // name
    kList,      // args: items
    kTuple,     // args: items
    kDict,      // args: key, value, key, value, ...
    kGetattr,   // args[0].name
    kGetitem,   // args[0][args[1]]
    kSlice,     // args: start, stop, step (null when absent); only as a kGetitem key
    kCall,      // args[0](args[1:], kwargs)
    kFilter,    // args[0] | name(args[1:], kwargs)
    kTest,      // args[0] is [not] name(args[1:]); negated
    kNot,       // not args[0]
    kNeg,       // -args[0]
    kPos,       // +args[0]
    kBinary,    // args[0] name args[1]; name in + - * / // % ** ~
    kCompare,   // args[0] ops[0] args[1] ops[1] args[2] ... (Python chained comparison)
    kAnd,       // args[0] and args[1]
    kOr,        // args[0] or args[1]
    kCondExpr,  // args[1] if args[0] else args[2] (args[2] null when absent)
  };

  Expr(Kind kind, int line) : kind(kind), line(line) {}

  Kind kind;
  int line;
  std::string name;
  Value value;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // kCompare: ==, !=, <, <=, >, >=, in, not in
  bool negated = false;
};

struct Node;
using Body = std::vector<std::unique_ptr<Node>>;

// Macro and call-block parameters: names with optional default expressions.
struct Params {
  std::vector<std::string> names;
  std::vector<ExprPtr> defaults;  // aligned with names; null when none
};

struct Node {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ exprs[0] }}
    kIf,           // exprs: conditions; bodies: one per condition, then else if present
    kFor,          // targets in exprs[0] [if exprs[1]]; bodies: body, else
    kSet,          // targets = exprs[0]; or attribute: targets[0].name = exprs[0]
    kSetBlock,     // targets[0] = rendered bodies[0] [| exprs[0] applied to it]
    kMacro,        // name(params): bodies[0]
    kCallBlock,    // exprs[0] (a call) with caller(params) rendering bodies[0]
    kFilterBlock,  // bodies[0] rendered, then exprs[0] (if any) applied to it
    kBreak,
    kContinue,
  };

  Node(Kind kind, int line) : kind(kind), line(line) {}

  Kind kind;
  int line;
  std::string text;
  std::string name;
  std::vector<std::string> targets;
  bool attribute = false;  // kSet: `set ns.name = ...`
  std::vector<ExprPtr> exprs;
  std::vector<Body> bodies;
  Params params;
};

// The placeholder name a kSetBlock or kFilterBlock filter chain applies to.
inline constexpr char kBlockValueName[] = " block";

}  // namespace lockstep::tok::jinja

#endif  // LOCKSTEP_TOKENIZER_JINJA_AST_H_
