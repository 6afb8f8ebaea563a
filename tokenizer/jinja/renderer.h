// Walks a template's syntax tree (ast.h) and produces its text: scopes as jinja2 has
// them (a for-loop iteration and a macro call get their own; `set` elsewhere writes the
// enclosing one), loop.*, macros and call blocks, Python operators (pyops.h) and the
// builtins (builtins.h). One call's state lives in the call; thread-safe.
#ifndef LOCKSTEP_TOKENIZER_JINJA_RENDERER_H_
#define LOCKSTEP_TOKENIZER_JINJA_RENDERER_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/value.h"

namespace lockstep::tok::jinja {

absl::StatusOr<std::string> RenderBody(const Body& body, const Dict& variables);

}  // namespace lockstep::tok::jinja

#endif  // LOCKSTEP_TOKENIZER_JINJA_RENDERER_H_
