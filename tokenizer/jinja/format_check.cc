#include "tokenizer/jinja/format_check.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "tokenizer/jinja/py_format.h"

namespace lockstep::tok::jinja {
namespace {

const std::string* LiteralString(const Expr* expr) {
  if (expr == nullptr || expr->kind != Expr::Kind::kLiteral || !expr->value.is_string()) {
    return nullptr;
  }
  return &expr->value.str();
}

absl::Status AtLine(int line, absl::string_view construct, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::InvalidArgumentError(
      absl::StrCat("line ", line, ": ", construct, ": ", status.message()));
}

absl::Status CheckExpr(const Expr* expr) {
  if (expr == nullptr) return absl::OkStatus();
  absl::Status status;
  if (expr->kind == Expr::Kind::kCall && expr->args[0]->kind == Expr::Kind::kGetattr &&
      expr->args[0]->name == "format") {
    if (const std::string* format = LiteralString(expr->args[0]->args[0].get())) {
      status = AtLine(expr->line, "str.format", CheckFormat(*format));
    }
  } else if (expr->kind == Expr::Kind::kFilter && expr->name == "format") {
    if (!expr->kwargs.empty()) {
      status = AtLine(expr->line, "the format filter",
                      absl::InvalidArgumentError("keyword arguments are not supported"));
    } else if (const std::string* format = LiteralString(expr->args[0].get())) {
      status = AtLine(expr->line, "the format filter", CheckPercentFormat(*format));
    }
  } else if (expr->kind == Expr::Kind::kBinary && expr->name == "%") {
    if (const std::string* format = LiteralString(expr->args[0].get())) {
      status = AtLine(expr->line, "the % operator", CheckPercentFormat(*format));
    }
  }
  if (!status.ok()) return status;
  for (const ExprPtr& arg : expr->args) {
    if (absl::Status s = CheckExpr(arg.get()); !s.ok()) return s;
  }
  for (const auto& [name, value] : expr->kwargs) {
    if (absl::Status s = CheckExpr(value.get()); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckFormatStrings(const Body& body) {
  for (const auto& node : body) {
    for (const ExprPtr& expr : node->exprs) {
      if (absl::Status s = CheckExpr(expr.get()); !s.ok()) return s;
    }
    for (const ExprPtr& expr : node->params.defaults) {
      if (absl::Status s = CheckExpr(expr.get()); !s.ok()) return s;
    }
    for (const Body& inner : node->bodies) {
      if (absl::Status s = CheckFormatStrings(inner); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace lockstep::tok::jinja
