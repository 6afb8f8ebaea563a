// One case per construct: the template, its variables (JSON) and what jinja2 3.1
// (Hugging Face's settings: trim_blocks, lstrip_blocks, sandboxed, HF's tojson) renders.
// Plus the constructs that must fail at load, with their line, and render-time errors.
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tokenizer/jinja/template.h"
#include "tokenizer/jinja/value.h"

namespace lockstep::tok::jinja {
namespace {

struct Case {
  const char* name;
  const char* source;
  const char* vars;  // a JSON object
  const char* want;
};

// Expected outputs are jinja2's (python3-jinja2 3.1 with Hugging Face's environment).
const Case kCases[] = {
    // Whitespace control: trim_blocks, lstrip_blocks, -, +, trailing newline dropped.
    {"trim_blocks", R"j({% if true %}
yes
{% endif %}
done
)j", R"j({})j", R"j(yes
done)j"},
    {"lstrip_blocks", R"j(a
    {% if true %}
  b
    {% endif %}
c)j", R"j({})j", R"j(a
  b
c)j"},
    {"minus_control", R"j(a   {%- if true -%}   b   {%- endif -%}   c)j", R"j({})j", R"j(abc)j"},
    {"plus_keeps_lstrip", "  {%+ if true %}x{% endif %}", R"j({})j", "  x"},
    {"variable_minus", "a\n  {{- 'b' -}}  \n c", R"j({})j", "abc"},
    {"variable_not_lstripped", "a\n  {{ 'b' }}\nc", R"j({})j", "a\n  b\nc"},
    {"comment_trimmed", "a\n  {# note #}\nb", R"j({})j", "a\nb"},
    {"raw", "{% raw %}{{ x }}{% endraw %}", R"j({})j", "{{ x }}"},
    {"crlf_normalized", "a\r\nb\rc", R"j({})j", "a\nb\nc"},
    // Literals and printing (Python str()).
    {"literals", R"j({{ 1 }} {{ 1.5 }} {{ 1e20 }} {{ 'a\tb' }} {{ true }} {{ none }} {{ [1, 'x', none] }} {{ {'a': 1} }} {{ (1,) }})j",
     R"j({})j", "1 1.5 1e+20 a\tb True None [1, 'x', None] {'a': 1} (1,)"},
    {"repr_quotes", R"j({{ ["it's", 'say "hi"', 'both \' "'] }})j", R"j({})j",
     R"j(["it's", 'say "hi"', 'both \' "'])j"},
    {"float_repr", R"j({{ 0.1 + 0.2 }} {{ 1 / 3 }} {{ 10 / 2 }} {{ 1e-5 }} {{ 123456789012345678.0 }})j",
     R"j({})j", "0.30000000000000004 0.3333333333333333 5.0 1e-05 1.2345678901234568e+17"},
    // Operators.
    {"arithmetic", R"j({{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 7 / 2 }} {{ 'ab' * 2 }} {{ [1] + [2] }})j",
     R"j({})j", "3 -4 2 1024 3.5 abab [1, 2]"},
    {"concat_tilde", R"j({{ 'a' ~ 1 ~ none ~ x }})j", R"j({})j", "a1None"},
    {"comparisons", R"j({{ 1 < 2 < 3 }} {{ 1 == 1.0 }} {{ 'a' in 'cat' }} {{ 2 not in [1, 3] }} {{ 'k' in {'k': 1} }} {{ true == 1 }})j",
     R"j({})j", "True True True True True True"},
    {"and_or_values", R"j({{ 0 or 'x' }} {{ 'a' and 'b' }} {{ none or [] }} {{ not '' }})j",
     R"j({})j", "x b [] True"},
    {"conditional_expr", R"j({{ 'y' if x else 'n' }}|{{ 'y' if not x }}|{{ 'a' if 0 else 'b' if 1 else 'c' }})j",
     R"j({"x": false})j", "n|y|b"},
    // Attribute and item access.
    {"attribute_and_item", R"j({{ m.role }} {{ m['content'] }} {{ m.missing }}|{{ items[-1] }} {{ items.0 }})j",
     R"j({"m": {"role": "user", "content": "hi"}, "items": [1, 2, 3]})j", "user hi |3 1"},
    {"dict_method_before_key", R"j({{ d.items()|list }} {{ d['items'] }})j",
     R"j({"d": {"items": 5}})j", "[('items', 5)] 5"},
    {"slices", R"j({{ s[1:3] }} {{ s[::-1] }} {{ l[1:] }} {{ l[:-1] }} {{ l[::2] }} {{ s[-2:] }})j",
     R"j({"s": "h\u00e9llo", "l": [1, 2, 3, 4]})j", "\u00e9l oll\u00e9h [2, 3, 4] [1, 2, 3] [1, 3] lo"},
    // Control flow and loop.*.
    {"if_elif_else", R"j({% for x in [1, 2, 3] %}{% if x == 1 %}one{% elif x == 2 %}two{% else %}many{% endif %} {% endfor %})j",
     R"j({})j", "one two many "},
    {"loop_variables", R"j({% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %})j",
     R"j({})j", "1032TrueFalse3;2121FalseFalse3;3210FalseTrue3;"},
    {"loop_prev_next_cycle", R"j({% for x in [1, 2, 3] %}{{ loop.previtem }}-{{ loop.nextitem }}-{{ loop.cycle('a', 'b') }} {% endfor %})j",
     R"j({})j", "-2-a 1-3-b 2--a "},
    {"for_else_and_filter", R"j({% for x in [] %}x{% else %}empty{% endfor %} {% for x in [1, 2, 3, 4] if x is even %}{{ x }}{{ loop.length }}{% endfor %})j",
     R"j({})j", "empty 2242"},
    {"for_unpack_items", R"j({% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k, v in d|items %}{{ k }}{% endfor %})j",
     R"j({"d": {"b": 1, "a": 2}})j", "b=1;a=2;ba"},
    {"break_continue", R"j({% for x in range(10) %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %})j",
     R"j({})j", "023"},
    {"loop_scoping", R"j({% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = x + 10 %}{{ x }},{% endfor %}{{ x }})j",
     R"j({})j", "111,111,1"},
    {"namespace", R"j({% set ns = namespace(n=0, s='') %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }})j",
     R"j({})j", "6"},
    {"set_tuple_and_block", R"j({% set a, b = 1, 2 %}{% set t %}  {{ a + b }}  {% endset %}[{{ t }}]{% set u | trim | upper %} x {% endset %}[{{ u }}])j",
     R"j({})j", "[  3  ][X]"},
    // Macros and call blocks.
    {"macro", R"j({% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', punct='?') }} {{ greet(name='C') }})j",
     R"j({})j", "Hi A! Hi B? Hi C!"},
    {"call_block", R"j({% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold{% endcall %})j",
     R"j({})j", "<b>bold</b>"},
    {"filter_block", R"j({% filter upper %}abc{% endfilter %})j", R"j({})j", "ABC"},
    // Filters.
    {"tojson", R"j({{ v|tojson }} {{ v|tojson(indent=2) }})j",
     R"j({"v": {"b": [1, 2.5, null, true], "a": "\u00e9\"\n<&>"}})j",
     "{\"b\": [1, 2.5, null, true], \"a\": \"\u00e9\\\"\\n<&>\"} {\n  \"b\": [\n    1,\n    2.5,\n    null,\n    true\n  ],\n  \"a\": \"\u00e9\\\"\\n<&>\"\n}"},
    {"string_filters", R"j({{ '  a b  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ 'Ab'|lower }}{{ 'Ab'|upper }}|{{ 'hello wORLD-x'|title }}|{{ 'hELLO'|capitalize }}|{{ 'aaa'|replace('a', 'b', 2) }})j",
     R"j({})j", "a b|a|abAB|Hello World-X|Hello|bba"},
    {"default_and_length", R"j({{ x|default('d') }} {{ ''|default('e', true) }} {{ none|default('n') }} {{ [1, 2]|length }} {{ 'h\u00e9'|length }} {{ x|length }})j",
     R"j({})j", "d e None 2 2 0"},
    {"list_filters", R"j({{ l|join(', ') }} {{ l|first }} {{ l|last }} {{ l|reverse|list }} {{ l|sort }} {{ l|unique|list }} {{ l|sum }} {{ l|min }} {{ l|max }})j",
     R"j({"l": [3, 1, 2, 1]})j", "3, 1, 2, 1 3 1 [1, 2, 1, 3] [1, 1, 2, 3] [3, 1, 2] 7 1 3"},
    {"map_select", R"j({{ ms|map(attribute='role')|join(',') }} {{ ms|selectattr('role', 'equalto', 'user')|list|length }} {{ ms|rejectattr('role', 'eq', 'user')|map(attribute='role')|first }} {{ [1, 2, 3]|select('odd')|list }} {{ ['a', 'b']|map('upper')|list }})j",
     R"j({"ms": [{"role": "user"}, {"role": "assistant"}, {"role": "user"}]})j",
     "user,assistant,user 2 assistant [1, 3] ['A', 'B']"},
    {"string_and_numbers", R"j({{ 5|string ~ '' }} {{ '42'|int + 1 }} {{ '2.5'|float }} {{ -3|abs }} {{ 2.567|round(2) }} {{ 'x'|int }} {{ '%s-%d'|format('a', 3) }})j",
     R"j({})j", "5 43 2.5 3 2.57 0 a-3"},
    {"indent_dictsort", R"j({{ 'a\nb\n\nc'|indent(2) }}|{{ {'b': 1, 'a': 2}|dictsort }})j",
     R"j({})j", "a\n  b\n\n  c|[('a', 2), ('b', 1)]"},
    // Tests.
    {"tests", R"j({{ x is defined }}{{ y is undefined }}{{ n is none }}{{ 's' is string }}{{ d is mapping }}{{ l is iterable }}{{ 1 is number }}{{ 1 is integer }}{{ 1.0 is float }}{{ true is boolean }}{{ 4 is divisibleby 2 }}{{ 3 is odd }}{{ false is sameas false }}{{ 2 is in [1, 2] }}{{ 'ab' is lower }}{{ x is not none }})j",
     R"j({"x": 1, "n": null, "d": {}, "l": []})j",
     "TrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrue"},
    // String methods.
    {"string_methods", R"j({{ s.startswith('He') }} {{ s.endswith(('x', 'd')) }} {{ s.split() }} {{ s.split('l', 1) }} {{ s.rsplit('o', 1) }} {{ '  x  '.strip() }}|{{ '\nx\n'.lstrip('\n') }}|{{ s.replace('l', 'L') }} {{ s.upper() }} {{ s.lower() }} {{ 'a b'.title() }} {{ s.find('o') }} {{ s.count('l') }} {{ '-'.join(['a', 'b']) }} {{ '{} {name}'.format(1, name='n') }})j",
     R"j({"s": "Hello world"})j",
     "True True ['Hello', 'world'] ['He', 'lo world'] ['Hello w', 'rld'] x|x\n|HeLLo worLd HELLO WORLD hello world A B 4 3 a-b 1 n"},
    {"unicode_whitespace_strip", R"j([{{ s|trim }}] [{{ s.strip() }}] {{ s.split() }})j",
     R"j({"s": "\u3000\u00a0 a\u2003b \u3000"})j", "[a\u2003b] [a\u2003b] ['a', 'b']"},
    // Globals and HF additions.
    {"globals", R"j({{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ dict(a=1) }} {% generation %}gen{% endgeneration %})j",
     R"j({})j", "[0, 1, 2] [1, 3, 5] {'a': 1} gen"},
    // A namespace that holds itself (found by fuzzing: repr recursed until the stack
    // overflowed; fuzz/corpus/chat_template_fuzzer/regression_self_holding_namespace).
    {"self_holding_namespace",
     R"j({% set ns = namespace(n=0) %}{% set ns.n = ns %}{{ ns }}|{{ ns.n.n.n is defined }})j",
     R"j({})j", "<Namespace {'n': <Namespace {...}>}>|True"},
    {"namespace_in_its_list",
     R"j({% set ns = namespace(n=0) %}{% set ns.n = [ns, (ns,)] %}{{ ns.n }}|{{ ns.n|string|length }})j",
     R"j({})j", "[<Namespace {'n': [...]}>, (<Namespace {'n': [...]}>,)]|55"},
    {"namespace_in_its_dict",
     R"j({% set ns = namespace() %}{% set ns.d = {"k": ns} %}{{ ns }})j", R"j({})j",
     "<Namespace {'d': {'k': <Namespace {...}>}}>"},
};

class RenderTest : public ::testing::TestWithParam<Case> {};

TEST_P(RenderTest, MatchesJinja2) {
  const Case& c = GetParam();
  absl::StatusOr<std::shared_ptr<const Template>> t = Template::Parse(c.source);
  ASSERT_TRUE(t.ok()) << t.status();
  const Value vars = Value::FromJson(nlohmann::ordered_json::parse(c.vars));
  absl::StatusOr<std::string> got = (*t)->Render(vars.dict());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, c.want) << c.source;
}

INSTANTIATE_TEST_SUITE_P(Constructs, RenderTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

struct LoadError {
  const char* source;
  const char* message;  // expected in the error, with its line
};

class LoadErrorTest : public ::testing::TestWithParam<LoadError> {};

TEST_P(LoadErrorTest, FailsAtLoadNamingTheConstructAndLine) {
  const LoadError& c = GetParam();
  absl::StatusOr<std::shared_ptr<const Template>> t = Template::Parse(c.source);
  ASSERT_FALSE(t.ok()) << c.source;
  EXPECT_TRUE(absl::StrContains(t.status().message(), c.message)) << t.status();
}

INSTANTIATE_TEST_SUITE_P(
    Unsupported, LoadErrorTest,
    ::testing::Values(
        LoadError{"a\n{{ x|wordwrap(3) }}", "line 2: unsupported filter 'wordwrap'"},
        LoadError{"{% if x is escaped_html %}{% endif %}", "line 1: unsupported test 'escaped_html'"},
        LoadError{"\n\n{% include 'x.j2' %}", "line 3: unsupported tag 'include'"},
        LoadError{"{% extends 'base' %}", "line 1: unsupported tag 'extends'"},
        LoadError{"{% with a = 1 %}{% endwith %}", "line 1: unsupported tag 'with'"},
        LoadError{"{{ s.encode('utf-8') }}", "line 1: unsupported method 'encode'"},
        LoadError{"{{ messages.append(1) }}", "line 1: unsupported method 'append'"},
        LoadError{"\n{{ lipsum(2) }}", "line 2: unsupported function 'lipsum'"},
        LoadError{"{% for x in y recursive %}{% endfor %}", "line 1: unsupported: recursive"},
        LoadError{"{{ f(*args) }}", "line 1: unsupported: *args"},
        LoadError{"a\n\n{{ '[{:>5}]'.format(x) }}",
                  "line 3: str.format: ValueError: unsupported format spec in '{:>5}'"},
        LoadError{"{% if x %}{{ '{0!a}'.format(x) }}{% endif %}",
                  "line 1: str.format: ValueError: unsupported conversion in '{0!a}'"},
        LoadError{"{% macro m(s='{x:.2f}'.format(x=1)) %}{% endmacro %}",
                  "line 1: str.format: ValueError: unsupported format spec in '{x:.2f}'"},
        LoadError{"\n{% for m in ms %}{{ '%5d'|format(m) }}{% endfor %}",
                  "line 2: the format filter: ValueError: unsupported format character '5'"},
        LoadError{"{{ '%(a)s'|format(a=1) }}",
                  "line 1: the format filter: keyword arguments are not supported"},
        LoadError{"{% set y = [1, '%.2f' % x] %}",
                  "line 1: the % operator: ValueError: unsupported format character '.'"},
        LoadError{"{{ 'x' ~ ('{' ~ '}').format(1) ~ '%'|format() }}",
                  "line 1: the format filter: ValueError: incomplete format"},
        LoadError{"{% if x %}\nno end", "line 2: unexpected end of template, expected 'endif'"},
        LoadError{"{{ x ", "line 1: unexpected end of template (missing '}}')"},
        LoadError{"{% break %}", "line 1: 'break' outside of a loop"},
        LoadError{"{{ 'a' }\n}", "line 1: unexpected '}'"}));

absl::StatusOr<std::string> Render(const char* source, const char* vars = "{}") {
  absl::StatusOr<std::shared_ptr<const Template>> t = Template::Parse(source);
  if (!t.ok()) return t.status();
  return (*t)->Render(Value::FromJson(nlohmann::ordered_json::parse(vars)).dict());
}

TEST(RenderErrorTest, RaiseExceptionCarriesTheMessageAndLine) {
  absl::StatusOr<std::string> got = Render("a\n{{ raise_exception('Roles must alternate') }}");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(), "line 2: TemplateError: Roles must alternate");
}

TEST(RenderErrorTest, UndefinedSemanticsFollowJinja2) {
  // Printing, iterating and testing an Undefined is fine; using it is not.
  EXPECT_EQ(*Render("[{{ x }}]{% for i in x %}i{% endfor %}{{ x is defined }}{{ x|length }}"),
            "[]False0");
  EXPECT_EQ(Render("{{ x.y }}").status().message(), "line 1: UndefinedError: 'x' is undefined");
  EXPECT_EQ(Render("{{ m.a.b }}", R"({"m": {}})").status().message(),
            "line 1: UndefinedError: 'dict object' has no attribute 'a'");
  EXPECT_FALSE(Render("{{ x + 1 }}").ok());
  EXPECT_FALSE(Render("{{ x < 1 }}").ok());
  EXPECT_EQ(*Render("{{ x == y }}{{ x == 1 }}"), "TrueFalse");
}

TEST(RenderErrorTest, PythonTypeErrors) {
  EXPECT_TRUE(absl::StrContains(Render("{{ 'a' + 1 }}").status().message(),
                                "TypeError: can only concatenate str (not \"int\") to str"));
  EXPECT_TRUE(absl::StrContains(Render("{{ 1 / 0 }}").status().message(), "ZeroDivisionError"));
  EXPECT_TRUE(absl::StrContains(Render("{{ x|tojson }}").status().message(),
                                "Object of type Undefined is not JSON serializable"));
  EXPECT_TRUE(absl::StrContains(Render("{% set x = 1 %}{% set x.a = 2 %}").status().message(),
                                "cannot assign attribute on non-namespace object"));
}

TEST(RenderErrorTest, FormatStringsOutsideTheSubsetFailAtRenderOnlyWhenComputed) {
  // Literal format strings in the subset load and render.
  EXPECT_EQ(*Render("{{ '{}-{n!r}'.format(1, n='a') }} {{ '%s=%d%%'|format('x', 2) }} "
                    "{{ '%i' % 3 }}"),
            "1-'a' x=2% 3");
  // A format string that is not a literal is checked when it is used.
  absl::StatusOr<std::string> computed = Render("{{ f.format(1) }}", R"({"f": "{:>5}"})");
  ASSERT_FALSE(computed.ok());
  EXPECT_TRUE(absl::StrContains(computed.status().message(),
                                "line 1: ValueError: unsupported format spec in '{:>5}'"))
      << computed.status();
}

TEST(RenderErrorTest, RecursionAndNestingAreBounded) {
  EXPECT_TRUE(absl::StrContains(
      Render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").status().message(),
      "RecursionError"));
  const std::string deep = "{{ " + std::string(500, '(') + "1" + std::string(500, ')') + " }}";
  EXPECT_TRUE(absl::StrContains(Template::Parse(deep).status().message(),
                                "line 1: expression nested too deeply"));
}

// JSON deeper than Value::kMaxJsonDepth becomes an Undefined at that level instead of
// a Value whose conversion, printing and destruction recurse 100,000 times.
TEST(RenderErrorTest, DeepJsonIsCutAtTheDepthLimit) {
  std::string deep = "{\"x\": ";
  for (int i = 0; i < 100000; ++i) deep += "[";
  for (int i = 0; i < 100000; ++i) deep += "]";
  deep += "}";
  // nlohmann's parser and destructor do not recurse; FromJson did.
  const Value vars = Value::FromJson(nlohmann::ordered_json::parse(deep));
  const Value* x = vars.dict().Find("x");
  ASSERT_NE(x, nullptr);
  int depth = 2;  // x's level; the object around it is level 1
  const Value* v = x;
  while (v->kind() == Value::Kind::kList && !v->items().empty()) {
    v = &v->items()[0];
    ++depth;
  }
  EXPECT_EQ(depth, Value::kMaxJsonDepth + 1);
  EXPECT_TRUE(v->is_undefined());
  EXPECT_TRUE(absl::StrContains(v->undefined_hint(), "nested deeper than 128 levels"));
  absl::StatusOr<std::shared_ptr<const Template>> t = Template::Parse("{{ x|length }}");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*(*t)->Render(vars.dict()), "1");
}

}  // namespace
}  // namespace lockstep::tok::jinja
