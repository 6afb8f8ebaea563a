#include "runtime/router/http/chat_prompt.h"

#include <memory>
#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/router/core/request_validation.h"
#include "runtime/router/testing/test_tokenizer.h"
#include "runtime/router/text/serving_tokenizer.h"
#include "tokenizer/byte_tokenizer.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/hf_tokenizer.h"

namespace lockstep::router {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using Json = nlohmann::ordered_json;
using ::testing::HasSubstr;

// The test tokenizer (ids 0..255 are bytes, 301 is "<s>") with a post-processor that
// adds <s>, and a template that shows what it gets.
ServingTokenizer TemplateTokenizer() {
  nlohmann::json config = testing::TokenizerJson();
  config["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", {{{"SpecialToken", {{"id", "<s>"}}}}, {{"Sequence", {{"id", "A"}}}}}},
      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {301}}}}}}};
  absl::StatusOr<std::unique_ptr<tok::HfTokenizer>> hf =
      tok::HfTokenizer::FromJson(config.dump(), "test");
  EXPECT_THAT(hf, IsOk());
  absl::StatusOr<tok::ChatTemplate> chat = tok::ChatTemplate::FromSource(
      "{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}"
      "{% if tools %}tools={{ tools | map(attribute='name') | join(',') }};{% endif %}"
      "{% if enable_thinking is defined %}thinking={{ enable_thinking }};{% endif %}"
      "{% if add_generation_prompt %}>{% endif %}",
      Json{{"bos_token", "<s>"}});
  EXPECT_THAT(chat, IsOk());
  return ServingTokenizer(std::shared_ptr<const tok::HfTokenizer>(*std::move(hf)),
                          std::make_shared<const tok::ChatTemplate>(*std::move(chat)));
}

const Json kMessages = Json::parse(R"([{"role": "user", "content": "hi"}])");

std::string Prompt(const ServingTokenizer& tokenizer, const std::string& body) {
  absl::StatusOr<ChatPromptOptions> options = ParseChatPromptOptions(Json::parse(body));
  EXPECT_THAT(options, IsOk());
  absl::StatusOr<std::vector<int32_t>> ids = EncodeChatPrompt(kMessages, tokenizer, *options);
  EXPECT_THAT(ids, IsOk());
  return ids.ok() ? tokenizer.Decode(*ids) : "";
}

TEST(ChatPromptTest, OptionsReachTheModelsTemplate) {
  const ServingTokenizer tokenizer = TemplateTokenizer();
  EXPECT_EQ(Prompt(tokenizer, "{}"), "[user:hi]>");
  EXPECT_EQ(Prompt(tokenizer, R"({"add_generation_prompt": false})"), "[user:hi]");
  EXPECT_EQ(Prompt(tokenizer, R"({"add_special_tokens": true})"), "<s>[user:hi]>");
  EXPECT_EQ(Prompt(tokenizer, R"({"chat_template_kwargs": {"enable_thinking": false,
                                                          "unused": 1}})"),
            "[user:hi]thinking=False;>");
  EXPECT_EQ(Prompt(tokenizer, R"({"tools": [{"name": "a"}, {"name": "b"}]})"),
            "[user:hi]tools=a,b;>");
  EXPECT_EQ(Prompt(tokenizer, R"({"tools": [], "chat_template_kwargs": null})"), "[user:hi]>");
}

TEST(ChatPromptTest, TheFixedTemplateTakesAddGenerationPromptAndRefusesTools) {
  const ServingTokenizer tokenizer(*tok::ByteTokenizer::Create(300, 256, 257));
  EXPECT_EQ(Prompt(tokenizer, R"({"add_generation_prompt": false})"), "<|user|>\nhi\n");
  EXPECT_EQ(Prompt(tokenizer, R"({"chat_template_kwargs": {"enable_thinking": true}})"),
            "<|user|>\nhi\n<|assistant|>\n");
  ChatPromptOptions options;
  options.tools = Json::parse(R"([{"name": "a"}])");
  const absl::StatusOr<std::vector<int32_t>> ids = EncodeChatPrompt(kMessages, tokenizer, options);
  EXPECT_THAT(ids, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("chat template")));
  EXPECT_EQ(ParamOf(ids.status()), "tools");
}

TEST(ChatPromptTest, BadOptionsNameTheField) {
  for (const auto& [body, param] : std::vector<std::pair<std::string, std::string>>{
           {R"({"add_generation_prompt": 1})", "add_generation_prompt"},
           {R"({"add_special_tokens": "yes"})", "add_special_tokens"},
           {R"({"chat_template_kwargs": "x"})", "chat_template_kwargs"},
           {R"({"chat_template_kwargs": {"messages": []}})", "chat_template_kwargs"},
           {R"({"chat_template_kwargs": {"tools": []}})", "chat_template_kwargs"},
           {R"({"tools": {"name": "a"}})", "tools"},
       }) {
    const absl::StatusOr<ChatPromptOptions> options = ParseChatPromptOptions(Json::parse(body));
    EXPECT_THAT(options, StatusIs(absl::StatusCode::kInvalidArgument)) << body;
    EXPECT_EQ(ParamOf(options.status()), param) << body;
  }
}

// Each variable is set by a linear search of the template's variables: 200,000 of them
// took minutes; at most kMaxChatTemplateKwargs are taken.
TEST(ChatPromptTest, ChatTemplateKwargsAreBounded) {
  Json body = {{"chat_template_kwargs", Json::object()}};
  for (size_t i = 0; i < kMaxChatTemplateKwargs; ++i) {
    body["chat_template_kwargs"]["v" + std::to_string(i)] = i;
  }
  EXPECT_THAT(ParseChatPromptOptions(body), IsOk());
  body["chat_template_kwargs"]["one_more"] = true;
  const absl::StatusOr<ChatPromptOptions> options = ParseChatPromptOptions(body);
  EXPECT_THAT(options, StatusIs(absl::StatusCode::kInvalidArgument,
                                HasSubstr("chat_template_kwargs may hold at most 256 variables, "
                                          "got 257")));
  EXPECT_EQ(ParamOf(options.status()), "chat_template_kwargs");
}

// A template's raise_exception is the client's error, naming "messages".
TEST(ChatPromptTest, ATemplateErrorNamesMessages) {
  absl::StatusOr<tok::ChatTemplate> chat =
      tok::ChatTemplate::FromSource("{{ raise_exception('roles must alternate') }}");
  ASSERT_THAT(chat, IsOk());
  absl::StatusOr<std::unique_ptr<tok::HfTokenizer>> hf =
      tok::HfTokenizer::FromJson(testing::TokenizerJson().dump(), "test");
  ASSERT_THAT(hf, IsOk());
  const ServingTokenizer tokenizer(std::shared_ptr<const tok::HfTokenizer>(*std::move(hf)),
                                   std::make_shared<const tok::ChatTemplate>(*std::move(chat)));
  const absl::StatusOr<std::vector<int32_t>> ids = EncodeChatPrompt(kMessages, tokenizer);
  EXPECT_THAT(ids, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("roles must alternate")));
  EXPECT_EQ(ParamOf(ids.status()), "messages");
}

}  // namespace
}  // namespace lockstep::router
