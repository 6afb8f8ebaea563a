#include "grammar/json_rules.h"

#include <utility>

#include "grammar/utf8_ranges.h"

namespace lockstep::grammar {
namespace {

Expr Digits(int min, int max) {
  return Expr::Repeat(Expr::Bytes(ByteSet::Range('0', '9')), min, max);
}

}  // namespace

JsonRules AddJsonRules(GrammarBuilder* b) {
  JsonRules r;
  r.ws = b->Rule("ws");
  r.string_char = b->Rule("string-char");
  r.string = b->Rule("string");
  r.integer = b->Rule("integer");
  r.number = b->Rule("number");
  r.value = b->Rule("value");
  r.object = b->Rule("object");
  r.array = b->Rule("array");
  const int32_t chars = b->Rule("string-chars");
  const int32_t escape = b->Rule("string-escape");
  const int32_t unicode = b->Rule("string-utf8");

  ByteSet space;
  for (char c : {' ', '\t', '\n', '\r'}) space.Add(c);
  b->Define(r.ws, Expr::Repeat(Expr::Bytes(space), 0, kMaxWhitespace));

  // Content bytes: printable ASCII but '"' and '\\'; non-ASCII through string-utf8.
  ByteSet plain = ByteSet::Range(0x20, 0x7F);
  plain.Remove('"');
  plain.Remove('\\');
  b->Define(unicode, Utf8Expr({{0x80, kMaxCodePoint}}));
  ByteSet simple_escapes;
  for (char c : {'"', '\\', '/', 'b', 'f', 'n', 'r', 't'}) simple_escapes.Add(c);
  ByteSet hex = ByteSet::Range('0', '9');
  hex.AddRange('a', 'f');
  hex.AddRange('A', 'F');
  b->Define(escape, Expr::Choice(
                        {Expr::Bytes(simple_escapes),
                         Expr::Sequence({Expr::Byte('u'), Expr::Repeat(Expr::Bytes(hex), 4, 4)})}));
  b->Define(r.string_char, Expr::Choice({Expr::Bytes(plain), Expr::Ref(unicode),
                                         Expr::Sequence({Expr::Byte('\\'), Expr::Ref(escape)})}));
  // string-chars loops in one rule (a tail call), so a token inside a string stays
  // inside this rule until its closing quote.
  b->Define(chars,
            Expr::Choice({Expr::Sequence({Expr::Bytes(plain), Expr::Ref(chars)}),
                          Expr::Sequence({Expr::Ref(unicode), Expr::Ref(chars)}),
                          Expr::Sequence({Expr::Byte('\\'), Expr::Ref(escape), Expr::Ref(chars)}),
                          Expr::Byte('"')}));
  b->Define(r.string, Expr::Sequence({Expr::Byte('"'), Expr::Ref(chars)}));

  b->Define(r.integer,
            Expr::Sequence({Expr::Optional(Expr::Byte('-')),
                            Expr::Choice({Expr::Byte('0'),
                                          Expr::Sequence({Expr::Bytes(ByteSet::Range('1', '9')),
                                                          Digits(0, kMaxDigits - 1)})})}));
  ByteSet sign;
  sign.Add('+');
  sign.Add('-');
  ByteSet e;
  e.Add('e');
  e.Add('E');
  b->Define(
      r.number,
      Expr::Sequence({Expr::Ref(r.integer),
                      Expr::Optional(Expr::Sequence({Expr::Byte('.'), Digits(1, kMaxDigits)})),
                      Expr::Optional(Expr::Sequence(
                          {Expr::Bytes(e), Expr::Optional(Expr::Bytes(sign)), Digits(1, 3)}))}));
  b->Define(r.value, Expr::Choice({Expr::Ref(r.object), Expr::Ref(r.array), Expr::Ref(r.string),
                                   Expr::Ref(r.number), Expr::Literal("true"),
                                   Expr::Literal("false"), Expr::Literal("null")}));
  Expr member = Expr::Sequence({Expr::Ref(r.string), Expr::Ref(r.ws), Expr::Byte(':'),
                                Expr::Ref(r.ws), Expr::Ref(r.value), Expr::Ref(r.ws)});
  Expr more_members = Expr::Star(Expr::Sequence({Expr::Byte(','), Expr::Ref(r.ws), member}));
  b->Define(r.object, Expr::Sequence({Expr::Byte('{'), Expr::Ref(r.ws),
                                      Expr::Optional(Expr::Sequence({member, more_members})),
                                      Expr::Byte('}')}));
  Expr item = Expr::Sequence({Expr::Ref(r.value), Expr::Ref(r.ws)});
  Expr more_items = Expr::Star(Expr::Sequence({Expr::Byte(','), Expr::Ref(r.ws), item}));
  b->Define(r.array,
            Expr::Sequence({Expr::Byte('['), Expr::Ref(r.ws),
                            Expr::Optional(Expr::Sequence({item, more_items})), Expr::Byte(']')}));
  return r;
}

absl::StatusOr<Grammar> JsonObjectGrammar() {
  GrammarBuilder b;
  const int32_t root = b.Rule("root");
  JsonRules r = AddJsonRules(&b);
  b.Define(root, Expr::Sequence({Expr::Ref(r.ws), Expr::Ref(r.object), Expr::Ref(r.ws)}));
  return b.Build(root);
}

}  // namespace lockstep::grammar
