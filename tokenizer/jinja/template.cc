#include "tokenizer/jinja/template.h"

#include "tokenizer/jinja/format_check.h"
#include "tokenizer/jinja/lexer.h"
#include "tokenizer/jinja/parser.h"
#include "tokenizer/jinja/renderer.h"

namespace lockstep::tok::jinja {

absl::StatusOr<std::shared_ptr<const Template>> Template::Parse(absl::string_view source) {
  absl::StatusOr<std::vector<Token>> tokens = Tokenize(source);
  if (!tokens.ok()) return tokens.status();
  absl::StatusOr<Body> body = jinja::Parse(*tokens);
  if (!body.ok()) return body.status();
  if (absl::Status status = CheckFormatStrings(*body); !status.ok()) return status;
  return std::shared_ptr<const Template>(new Template(std::move(*body)));
}

absl::StatusOr<std::string> Template::Render(const Dict& variables) const {
  return RenderBody(body_, variables);
}

}  // namespace lockstep::tok::jinja
