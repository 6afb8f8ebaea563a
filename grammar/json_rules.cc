#include "grammar/json_rules.h"

#include <utility>
#include <vector>

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

  ByteSet space;
  for (char c : {' ', '\t', '\n', '\r'}) space.Add(c);
  b->Define(r.ws, Expr::Repeat(Expr::Bytes(space), 0, kMaxWhitespace));

  // Content bytes: printable ASCII but '"' and '\\'; non-ASCII as UTF-8 sequences.
  ByteSet plain = ByteSet::Range(0x20, 0x7F);
  plain.Remove('"');
  plain.Remove('\\');
  ByteSet simple_escapes;
  for (char c : {'"', '\\', '/', 'b', 'f', 'n', 'r', 't'}) simple_escapes.Add(c);
  ByteSet hex = ByteSet::Range('0', '9');
  hex.AddRange('a', 'f');
  hex.AddRange('A', 'F');
  // One character's choices spelled out (each UTF-8 length, each escape) rather than
  // calls to a UTF-8 rule and an escape rule, so a token inside a string never leaves the
  // rule of its first byte: string-chars loops in one rule (a tail call) and a bounded
  // string's copies take these choices as their alternatives (grammar.h), and a
  // position table accepts such a token whatever the stack below (position_table.h).
  // Through a call, every multi-byte character or escape left the called rule, and the
  // mask walked thousands of tokens from the real stack.
  std::vector<Expr> char_choices = {Expr::Bytes(plain)};
  Expr utf8 = Utf8Expr({{0x80, kMaxCodePoint}});
  for (Expr& sequence : utf8.kind == Expr::Kind::kChoice ? utf8.items : std::vector<Expr>{utf8}) {
    char_choices.push_back(std::move(sequence));
  }
  char_choices.push_back(Expr::Sequence({Expr::Byte('\\'), Expr::Bytes(simple_escapes)}));
  char_choices.push_back(
      Expr::Sequence({Expr::Literal("\\u"), Expr::Repeat(Expr::Bytes(hex), 4, 4)}));
  std::vector<Expr> loop;
  for (const Expr& choice : char_choices) {
    loop.push_back(Expr::Sequence({choice, Expr::Ref(chars)}));
  }
  loop.push_back(Expr::Byte('"'));
  b->Define(r.string_char, Expr::Choice(std::move(char_choices)));
  b->Define(chars, Expr::Choice(std::move(loop)));
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
