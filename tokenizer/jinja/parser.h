// Builds the syntax tree of a token stream (lexer.h) with jinja2's grammar. Constructs
// the interpreter does not support (tags such as include or extends, unknown filters,
// tests, methods or functions, recursive loops, *args) are errors here, at load, with
// their line: "line 4: unsupported filter 'wordwrap'".
#ifndef LOCKSTEP_TOKENIZER_JINJA_PARSER_H_
#define LOCKSTEP_TOKENIZER_JINJA_PARSER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/lexer.h"

namespace lockstep::tok::jinja {

absl::StatusOr<Body> Parse(const std::vector<Token>& tokens);

}  // namespace lockstep::tok::jinja

#endif  // LOCKSTEP_TOKENIZER_JINJA_PARSER_H_
