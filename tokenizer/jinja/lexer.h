// Splits Jinja template source into tokens the way jinja2's lexer does with Hugging
// Face's settings (trim_blocks, lstrip_blocks, keep_trailing_newline off): newlines
// normalized to "\n", one trailing newline dropped, `{%-`/`-%}` and `{%+`/`+%}`
// whitespace control, comments dropped, `{% raw %}` kept as text.
#ifndef LOCKSTEP_TOKENIZER_JINJA_LEXER_H_
#define LOCKSTEP_TOKENIZER_JINJA_LEXER_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lockstep::tok::jinja {

struct Token {
  enum class Type {
    kData,           // template text (text: the text)
    kVariableBegin,  // {{
    kVariableEnd,    // }}
    kBlockBegin,     // {%
    kBlockEnd,       // %}
    kName,           // identifier or keyword
    kString,         // text: the decoded literal
    kInteger,        // text: digits (underscores removed)
    kFloat,          // text: the literal (underscores removed)
    kOperator,       // text: the operator, e.g. "//"
    kEof,
  };
  Type type;
  std::string text;
  int line;
};

// Errors name the line: "line 3: unexpected end of template (missing '%}')".
absl::StatusOr<std::vector<Token>> Tokenize(absl::string_view source);

}  // namespace lockstep::tok::jinja

#endif  // LOCKSTEP_TOKENIZER_JINJA_LEXER_H_
