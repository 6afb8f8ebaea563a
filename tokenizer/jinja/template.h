// A parsed Jinja template and its rendering, with jinja2's semantics under Hugging
// Face's settings (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, default
// Undefined, loop controls). Only the subset chat templates use is supported; anything
// else fails in Parse with its line (parser.h; format_check.h for literal format
// strings).
//
//   ASSIGN_OR_RETURN(std::shared_ptr<const Template> t, Template::Parse("{{ x }}!"));
//   Dict vars;
//   vars.Set(Value::String("x"), Value::Int(1));
//   ASSIGN_OR_RETURN(std::string text, t->Render(vars));  // "1!"
//
// Immutable after parsing; Render is thread-safe (each call has its own state).
#ifndef LOCKSTEP_TOKENIZER_JINJA_TEMPLATE_H_
#define LOCKSTEP_TOKENIZER_JINJA_TEMPLATE_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/value.h"

namespace lockstep::tok::jinja {

class Template {
 public:
  // Errors: "line 3: unsupported filter 'wordwrap'", "line 1: unexpected '}'", ...
  static absl::StatusOr<std::shared_ptr<const Template>> Parse(absl::string_view source);

  // Renders with `variables` (string keys) as the template's context. Errors name the
  // line and the Python exception jinja2 would raise: "line 7: TemplateError: ...".
  absl::StatusOr<std::string> Render(const Dict& variables) const;

 private:
  explicit Template(Body body) : body_(std::move(body)) {}

  Body body_;
};

}  // namespace lockstep::tok::jinja

#endif  // LOCKSTEP_TOKENIZER_JINJA_TEMPLATE_H_
