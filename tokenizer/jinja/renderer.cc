#include "tokenizer/jinja/renderer.h"

#include <algorithm>
#include <map>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/operators.h"
#include "tokenizer/jinja/pyops.h"

namespace lockstep::tok::jinja {
namespace {

// Variables of one jinja2 frame; lookups fall back to the parent.
struct Scope : std::enable_shared_from_this<Scope> {
  std::shared_ptr<Scope> parent;
  std::map<std::string, Value, std::less<>> vars;

  const Value* Find(absl::string_view name) const {
    for (const Scope* s = this; s != nullptr; s = s->parent.get()) {
      if (const auto it = s->vars.find(name); it != s->vars.end()) return &it->second;
    }
    return nullptr;
  }
};
using ScopePtr = std::shared_ptr<Scope>;

ScopePtr Child(const ScopePtr& parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  return s;
}

enum class Flow { kNormal, kBreak, kContinue };

// Prefixes the line of the construct that failed, once.
absl::Status AtLine(const absl::Status& status, int line) {
  if (status.ok() || absl::StartsWith(status.message(), "line ")) return status;
  return absl::Status(status.code(), absl::StrCat("line ", line, ": ", status.message()));
}

#define RETURN_IF_ERROR_AT(expr, line)                                  \
  do {                                                                  \
    if (absl::Status s_ = (expr); !s_.ok()) return AtLine(s_, (line)); \
  } while (false)

class Renderer {
 public:
  Renderer() = default;
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;
  // Namespaces are the only mutable values, so the only way to a reference cycle (a
  // namespace holding itself, e.g. `set ns.me = [ns]`), which shared ownership would
  // leak: once the render is over nothing reads them, so their attributes go.
  ~Renderer() {
    for (const Value& ns : assigned_) ns.object().attributes.entries.clear();
  }

  absl::Status Render(const Body& body, const ScopePtr& scope, std::string* out, Flow* flow) {
    for (const auto& node : body) {
      RETURN_IF_ERROR_AT(RenderNode(*node, scope, out, flow), node->line);
      if (*flow != Flow::kNormal) return absl::OkStatus();
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Value> Eval(const Expr& e, const ScopePtr& scope) {
    absl::StatusOr<Value> v = EvalInner(e, scope);
    if (!v.ok()) return AtLine(v.status(), e.line);
    return v;
  }

 private:
  absl::Status RenderNode(const Node& node, const ScopePtr& scope, std::string* out, Flow* flow) {
    switch (node.kind) {
      case Node::Kind::kText:
        out->append(node.text);
        return absl::OkStatus();
      case Node::Kind::kOutput: {
        absl::StatusOr<Value> v = Eval(*node.exprs[0], scope);
        if (!v.ok()) return v.status();
        out->append(Str(*v));
        return absl::OkStatus();
      }
      case Node::Kind::kIf:
        for (size_t i = 0; i < node.bodies.size(); ++i) {
          if (i < node.exprs.size()) {
            absl::StatusOr<Value> test = Eval(*node.exprs[i], scope);
            if (!test.ok()) return test.status();
            if (!Truthy(*test)) continue;
          }
          return Render(node.bodies[i], scope, out, flow);
        }
        return absl::OkStatus();
      case Node::Kind::kFor:
        return For(node, scope, out);
      case Node::Kind::kSet: {
        absl::StatusOr<Value> v = Eval(*node.exprs[0], scope);
        if (!v.ok()) return v.status();
        if (node.attribute) {
          const Value* ns = scope->Find(node.targets[0]);
          if (ns == nullptr || ns->kind() != Value::Kind::kObject ||
              ns->object().type_name != "Namespace") {
            return absl::InvalidArgumentError(
                "TemplateRuntimeError: cannot assign attribute on non-namespace object");
          }
          if (assigned_objects_.insert(&ns->object()).second) assigned_.push_back(*ns);
          ns->object().attributes.Set(Value::String(node.name), std::move(*v));
          return absl::OkStatus();
        }
        return Assign(node.targets, *v, scope.get());
      }
      case Node::Kind::kSetBlock: {
        absl::StatusOr<Value> v = Captured(node, scope);
        if (!v.ok()) return v.status();
        scope->vars[node.targets[0]] = std::move(*v);
        return absl::OkStatus();
      }
      case Node::Kind::kFilterBlock: {
        absl::StatusOr<Value> v = Captured(node, scope);
        if (!v.ok()) return v.status();
        out->append(Str(*v));
        return absl::OkStatus();
      }
      case Node::Kind::kMacro:
        scope->vars[node.name] = Macro(node.name, node.bodies[0], node.params, scope);
        return absl::OkStatus();
      case Node::Kind::kCallBlock: {
        const Value caller = Macro("caller", node.bodies[0], node.params, scope);
        absl::StatusOr<Value> v = Call(*node.exprs[0], scope, &caller);
        if (!v.ok()) return v.status();
        out->append(Str(*v));
        return absl::OkStatus();
      }
      case Node::Kind::kBreak:
        *flow = Flow::kBreak;
        return absl::OkStatus();
      case Node::Kind::kContinue:
        *flow = Flow::kContinue;
        return absl::OkStatus();
    }
    return absl::OkStatus();
  }

  // A block set's or filter block's body, rendered, with its filters applied.
  absl::StatusOr<Value> Captured(const Node& node, const ScopePtr& scope) {
    std::string text;
    Flow flow = Flow::kNormal;
    const ScopePtr inner = Child(scope);
    if (absl::Status s = Render(node.bodies[0], inner, &text, &flow); !s.ok()) return s;
    if (node.exprs.empty()) return Value::String(std::move(text));
    inner->vars[kBlockValueName] = Value::String(std::move(text));
    return Eval(*node.exprs[0], inner);
  }

  static absl::Status Assign(const std::vector<std::string>& targets, const Value& v, Scope* scope) {
    if (targets.size() == 1) {
      scope->vars[targets[0]] = v;
      return absl::OkStatus();
    }
    absl::StatusOr<std::vector<Value>> items = Iterate(v);
    if (!items.ok()) return TypeError(absl::StrCat("cannot unpack non-iterable ", TypeName(v), " object"));
    if (items->size() != targets.size()) {
      return ValueError(absl::StrCat(items->size() < targets.size() ? "not enough" : "too many",
                                     " values to unpack (expected ", targets.size(), ")"));
    }
    for (size_t i = 0; i < targets.size(); ++i) scope->vars[targets[i]] = (*items)[i];
    return absl::OkStatus();
  }

  absl::Status For(const Node& node, const ScopePtr& scope, std::string* out) {
    absl::StatusOr<Value> iterable = Eval(*node.exprs[0], scope);
    if (!iterable.ok()) return iterable.status();
    absl::StatusOr<std::vector<Value>> all = Iterate(*iterable);
    if (!all.ok()) return all.status();
    std::vector<Value> items;
    if (node.exprs.size() > 1) {
      for (const Value& item : *all) {
        const ScopePtr probe = Child(scope);
        if (absl::Status s = Assign(node.targets, item, probe.get()); !s.ok()) return s;
        absl::StatusOr<Value> keep = Eval(*node.exprs[1], probe);
        if (!keep.ok()) return keep.status();
        if (Truthy(*keep)) items.push_back(item);
      }
    } else {
      items = std::move(*all);
    }
    Flow flow = Flow::kNormal;
    if (items.empty()) return Render(node.bodies[1], Child(scope), out, &flow);
    const auto length = static_cast<int64_t>(items.size());
    auto last_changed = std::make_shared<std::optional<Value>>();
    // The last value given to loop.changed may be the loop object itself, which holds
    // the function that holds it: forget it when the loop ends (no reference cycle).
    struct Forget {
      std::shared_ptr<std::optional<Value>> value;
      ~Forget() { value->reset(); }
    } forget{last_changed};
    for (int64_t i = 0; i < length; ++i) {
      const ScopePtr inner = Child(scope);
      if (absl::Status s = Assign(node.targets, items[i], inner.get()); !s.ok()) return s;
      auto loop = std::make_shared<Object>();
      loop->type_name = "LoopContext";
      Dict& a = loop->attributes;
      a.Set(Value::String("index0"), Value::Int(i));
      a.Set(Value::String("index"), Value::Int(i + 1));
      a.Set(Value::String("revindex0"), Value::Int(length - i - 1));
      a.Set(Value::String("revindex"), Value::Int(length - i));
      a.Set(Value::String("first"), Value::Bool(i == 0));
      a.Set(Value::String("last"), Value::Bool(i == length - 1));
      a.Set(Value::String("length"), Value::Int(length));
      a.Set(Value::String("depth"), Value::Int(1));
      a.Set(Value::String("depth0"), Value::Int(0));
      a.Set(Value::String("previtem"), i > 0 ? items[i - 1] : Value::Undefined("there is no previous item"));
      a.Set(Value::String("nextitem"), i + 1 < length ? items[i + 1] : Value::Undefined("there is no next item"));
      a.Set(Value::String("cycle"), Value::FromFunction("loop.cycle", [i](const CallArgs& args) -> absl::StatusOr<Value> {
              if (args.positional.empty()) return TypeError("no items for cycling given");
              return args.positional[static_cast<size_t>(i) % args.positional.size()];
            }));
      a.Set(Value::String("changed"), Value::FromFunction("loop.changed", [last_changed](const CallArgs& args) -> absl::StatusOr<Value> {
              const Value now = Value::Tuple(args.positional);
              if (last_changed->has_value() && Equals(**last_changed, now)) return Value::Bool(false);
              *last_changed = now;
              return Value::Bool(true);
            }));
      inner->vars["loop"] = Value::FromObject(std::move(loop));
      flow = Flow::kNormal;
      if (absl::Status s = Render(node.bodies[0], inner, out, &flow); !s.ok()) return s;
      if (flow == Flow::kBreak) break;
    }
    return absl::OkStatus();
  }

  // A macro (or a call block's caller) as a callable bound to its defining scope. The
  // callable holds the scope by pointer (a scope may hold the macro: no cycles); the
  // renderer keeps the scope alive until the render ends.
  Value Macro(const std::string& name, const Body& body, const Params& params,
              const ScopePtr& defining) {
    pinned_.push_back(defining);
    Scope* const scope = defining.get();
    return Value::FromFunction(name, [this, &body, &params, scope](const CallArgs& args) -> absl::StatusOr<Value> {
      if (call_depth_ >= kMaxCallDepth) {
        return absl::InvalidArgumentError("RecursionError: maximum macro call depth exceeded");
      }
      ++call_depth_;
      absl::StatusOr<Value> result = CallMacro(body, params, scope, args);
      --call_depth_;
      return result;
    });
  }

  absl::StatusOr<Value> CallMacro(const Body& body, const Params& params, Scope* scope,
                                  const CallArgs& args) {
      const ScopePtr inner = Child(scope->shared_from_this());
      std::vector<Value> varargs;
      Dict kwargs;
      for (size_t i = 0; i < args.positional.size(); ++i) {
        if (i < params.names.size()) {
          inner->vars[params.names[i]] = args.positional[i];
        } else {
          varargs.push_back(args.positional[i]);
        }
      }
      for (const auto& [key, value] : args.keyword) {
        const bool is_param = std::find(params.names.begin(), params.names.end(), key) != params.names.end();
        if (is_param || key == "caller") {
          inner->vars[key] = value;
        } else {
          kwargs.Set(Value::String(key), value);
        }
      }
      for (size_t i = 0; i < params.names.size(); ++i) {
        if (inner->vars.count(params.names[i])) continue;
        if (params.defaults[i]) {
          absl::StatusOr<Value> d = Eval(*params.defaults[i], inner);
          if (!d.ok()) return d.status();
          inner->vars[params.names[i]] = std::move(*d);
        } else {
          inner->vars[params.names[i]] =
              Value::Undefined(absl::StrCat("parameter '", params.names[i], "' was not provided"));
        }
      }
      inner->vars["varargs"] = Value::Tuple(std::move(varargs));
      inner->vars["kwargs"] = Value::FromDict(std::move(kwargs));
      std::string text;
      Flow flow = Flow::kNormal;
      if (absl::Status s = Render(body, inner, &text, &flow); !s.ok()) return s;
      return Value::String(std::move(text));
  }

  absl::StatusOr<CallArgs> Arguments(const Expr& e, size_t first, const ScopePtr& scope) {
    CallArgs args;
    for (size_t i = first; i < e.args.size(); ++i) {
      absl::StatusOr<Value> v = Eval(*e.args[i], scope);
      if (!v.ok()) return v.status();
      args.positional.push_back(std::move(*v));
    }
    for (const auto& [key, expr] : e.kwargs) {
      absl::StatusOr<Value> v = Eval(*expr, scope);
      if (!v.ok()) return v.status();
      args.keyword.emplace_back(key, std::move(*v));
    }
    return args;
  }

  absl::StatusOr<Value> Call(const Expr& e, const ScopePtr& scope, const Value* caller) {
    absl::StatusOr<Value> callee = Eval(*e.args[0], scope);
    if (!callee.ok()) return callee.status();
    absl::StatusOr<CallArgs> args = Arguments(e, 1, scope);
    if (!args.ok()) return args.status();
    if (caller != nullptr) args->keyword.emplace_back("caller", *caller);
    return CallValue(*callee, *args);
  }

  absl::StatusOr<Value> EvalInner(const Expr& e, const ScopePtr& scope) {
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        return e.value;
      case Expr::Kind::kName: {
        if (const Value* v = scope->Find(e.name)) return *v;
        return FindGlobal(e.name);
      }
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        absl::StatusOr<CallArgs> items = Arguments(e, 0, scope);
        if (!items.ok()) return items.status();
        return e.kind == Expr::Kind::kList ? Value::List(std::move(items->positional))
                                           : Value::Tuple(std::move(items->positional));
      }
      case Expr::Kind::kDict: {
        absl::StatusOr<CallArgs> items = Arguments(e, 0, scope);
        if (!items.ok()) return items.status();
        Dict dict;
        for (size_t i = 0; i + 1 < items->positional.size(); i += 2) {
          dict.Set(items->positional[i], items->positional[i + 1]);
        }
        return Value::FromDict(std::move(dict));
      }
      case Expr::Kind::kGetattr: {
        absl::StatusOr<Value> obj = Eval(*e.args[0], scope);
        if (!obj.ok()) return obj.status();
        return GetAttr(*obj, e.name);
      }
      case Expr::Kind::kGetitem: {
        absl::StatusOr<Value> obj = Eval(*e.args[0], scope);
        if (!obj.ok()) return obj.status();
        const Expr& key = *e.args[1];
        if (key.kind == Expr::Kind::kSlice) {
          Value bounds[3] = {Value::None(), Value::None(), Value::None()};
          for (size_t i = 0; i < 3; ++i) {
            if (!key.args[i]) continue;
            absl::StatusOr<Value> b = Eval(*key.args[i], scope);
            if (!b.ok()) return b.status();
            bounds[i] = std::move(*b);
          }
          return GetSlice(*obj, bounds[0], bounds[1], bounds[2]);
        }
        absl::StatusOr<Value> k = Eval(key, scope);
        if (!k.ok()) return k.status();
        return GetItem(*obj, *k);
      }
      case Expr::Kind::kSlice:
        return absl::InternalError("a slice outside of a subscript");
      case Expr::Kind::kCall:
        return Call(e, scope, nullptr);
      case Expr::Kind::kFilter: {
        absl::StatusOr<Value> subject = Eval(*e.args[0], scope);
        if (!subject.ok()) return subject.status();
        absl::StatusOr<CallArgs> args = Arguments(e, 1, scope);
        if (!args.ok()) return args.status();
        return FindFilter(e.name)(*subject, *args);
      }
      case Expr::Kind::kTest: {
        absl::StatusOr<Value> subject = Eval(*e.args[0], scope);
        if (!subject.ok()) return subject.status();
        absl::StatusOr<CallArgs> args = Arguments(e, 1, scope);
        if (!args.ok()) return args.status();
        absl::StatusOr<bool> r = FindTest(e.name)(*subject, *args);
        if (!r.ok()) return r.status();
        return Value::Bool(*r != e.negated);
      }
      case Expr::Kind::kNot: {
        absl::StatusOr<Value> v = Eval(*e.args[0], scope);
        if (!v.ok()) return v.status();
        return Value::Bool(!Truthy(*v));
      }
      case Expr::Kind::kNeg:
      case Expr::Kind::kPos: {
        absl::StatusOr<Value> v = Eval(*e.args[0], scope);
        if (!v.ok()) return v.status();
        return UnaryOp(e.kind == Expr::Kind::kNeg ? "-" : "+", *v);
      }
      case Expr::Kind::kBinary: {
        absl::StatusOr<Value> a = Eval(*e.args[0], scope);
        if (!a.ok()) return a.status();
        absl::StatusOr<Value> b = Eval(*e.args[1], scope);
        if (!b.ok()) return b.status();
        return BinaryOp(e.name, *a, *b);
      }
      case Expr::Kind::kCompare:
        return Comparison(e, scope);
      case Expr::Kind::kAnd:
      case Expr::Kind::kOr: {
        absl::StatusOr<Value> a = Eval(*e.args[0], scope);
        if (!a.ok()) return a.status();
        if (Truthy(*a) == (e.kind == Expr::Kind::kOr)) return a;
        return Eval(*e.args[1], scope);
      }
      case Expr::Kind::kCondExpr: {
        absl::StatusOr<Value> test = Eval(*e.args[0], scope);
        if (!test.ok()) return test.status();
        if (Truthy(*test)) return Eval(*e.args[1], scope);
        if (e.args[2]) return Eval(*e.args[2], scope);
        return Value::Undefined(absl::StrCat("the inline if-expression on line ", e.line,
                                             " evaluated to false and no else section was defined."));
      }
    }
    return absl::InternalError("unknown expression");
  }

  absl::StatusOr<Value> Comparison(const Expr& e, const ScopePtr& scope) {
    absl::StatusOr<Value> left = Eval(*e.args[0], scope);
    if (!left.ok()) return left.status();
    for (size_t i = 0; i < e.ops.size(); ++i) {
      absl::StatusOr<Value> right = Eval(*e.args[i + 1], scope);
      if (!right.ok()) return right.status();
      const std::string& op = e.ops[i];
      bool result;
      if (op == "==" || op == "!=") {
        result = Equals(*left, *right) == (op == "==");
      } else if (op == "in" || op == "not in") {
        absl::StatusOr<bool> in = Contains(*right, *left);
        if (!in.ok()) return in.status();
        result = *in == (op == "in");
      } else {
        absl::StatusOr<int> c = Compare(*left, *right, op);
        if (!c.ok()) return c.status();
        result = op == "<" ? *c < 0 : op == "<=" ? *c <= 0 : op == ">" ? *c > 0 : *c >= 0;
      }
      if (!result) return Value::Bool(false);
      left = std::move(right);
    }
    return Value::Bool(true);
  }

  static constexpr int kMaxCallDepth = 200;

  std::vector<ScopePtr> pinned_;  // scopes that macros refer to
  // The namespaces given an attribute during the render (cleared by the destructor).
  std::vector<Value> assigned_;
  absl::flat_hash_set<const Object*> assigned_objects_;
  int call_depth_ = 0;            // macro calls in progress
};

}  // namespace

absl::StatusOr<std::string> RenderBody(const Body& body, const Dict& variables) {
  auto root = std::make_shared<Scope>();
  for (const auto& [key, value] : variables.entries) {
    if (key.is_string()) root->vars[key.str()] = value;
  }
  std::string out;
  Flow flow = Flow::kNormal;
  Renderer renderer;
  if (absl::Status s = renderer.Render(body, root, &out, &flow); !s.ok()) return s;
  return out;
}

}  // namespace lockstep::tok::jinja
