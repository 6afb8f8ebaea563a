// End to end with the tiny DeepSeek-V3-family model: `lockstep make-model --preset
// tiny-dsv3` writes it (sharded safetensors, the family's tokenizer files), and the
// deployment of deploy/local/disagg_dsv3_ctx_dep2_gen_dep4.yaml (context DEP2,
// generation DEP4, the model path pointed at the test's copy) serves it through the
// OpenAI API as real processes on loopback. The oracles:
//   - the chat prompt (/v1/tokenize of the messages, and a chat completion's
//     usage.prompt_tokens) is jinja2's rendering of the model's chat template
//     (python3-jinja2, as transformers renders it), which is also the family's shape
//     written out by hand here, tokenized by the served tokenizer;
//   - greedy chat completions are deterministic, streamed text equals whole text, and
//     every request finishes (stop or length) with the tokens it was allowed.
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/launcher/local_deployment.h"
#include "tests/e2e/e2e_util.h"
#include "tokenizer/testing_reference.h"

namespace lockstep::e2e {
namespace {

using nlohmann::json;

constexpr char kModel[] = "tiny-dsv3";
constexpr char kConfig[] = "deploy/local/disagg_dsv3_ctx_dep2_gen_dep4.yaml";
constexpr char kBos[] = "<｜begin▁of▁sentence｜>";
constexpr char kEos[] = "<｜end▁of▁sentence｜>";
constexpr char kUser[] = "<｜User｜>";
constexpr char kAssistant[] = "<｜Assistant｜>";

// The deployment file with its model path replaced by `model_dir`.
std::string DeploymentYaml(const std::string& model_dir) {
  std::ifstream in(kConfig);
  std::stringstream text;
  text << in.rdbuf();
  const std::string yaml = text.str();
  EXPECT_TRUE(absl::StrContains(yaml, "path: ../../models/tiny-dsv3")) << kConfig;
  return absl::StrReplaceAll(yaml, {{"path: ../../models/tiny-dsv3", "path: " + model_dir}});
}

// The text and finish reason of a chat completion, whole or streamed.
struct Chat {
  std::string text;
  std::string finish_reason;
  int64_t prompt_tokens = -1;
  int64_t completion_tokens = -1;
};

class Dsv3Test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string tmp = TestTmpDir();
    model_dir_ = new std::string(tmp + "/models/" + kModel);
    const std::string make = absl::StrCat(LockstepBinary(), " make-model --preset tiny-dsv3 --out '",
                                          *model_dir_, "' > '", tmp, "/make_model.log' 2>&1");
    ASSERT_EQ(std::system(make.c_str()), 0) << make;
    absl::StatusOr<std::unique_ptr<launcher::LocalDeployment>> d =
        launcher::LocalDeployment::Start(DeploymentYaml(*model_dir_), tmp + "/run",
                                         LockstepBinary(), absl::Seconds(120));
    ASSERT_TRUE(d.ok()) << d.status();
    deployment_ = d->release();
  }
  static void TearDownTestSuite() {
    if (deployment_ != nullptr) EXPECT_TRUE(deployment_->Reap().empty()) << "a process died";
    delete deployment_;
    delete model_dir_;
  }
  void SetUp() override { ASSERT_NE(deployment_, nullptr) << "the deployment did not start"; }

  static json PostJson(const std::string& path, const json& body) {
    const auto [status, text] = deployment_->Post(path, body.dump());
    EXPECT_EQ(status, 200) << path << " " << body.dump() << " -> " << text;
    const json out = json::parse(text, nullptr, false);
    EXPECT_TRUE(out.is_object()) << text;
    return out.is_object() ? out : json::object();
  }

  static std::vector<int32_t> Tokens(const json& body) {
    json request = body;
    request["model"] = kModel;
    return PostJson("/v1/tokenize", request).value("tokens", std::vector<int32_t>{});
  }

  static Chat Complete(const json& messages, int max_tokens, bool stream) {
    const json request = {{"model", kModel},     {"messages", messages},
                          {"temperature", 0.0},  {"max_tokens", max_tokens},
                          {"stream", stream}};
    Chat out;
    if (!stream) {
      const json r = PostJson("/v1/chat/completions", request);
      if (!r.contains("choices")) return out;
      out.text = r["choices"][0]["message"].value("content", "");
      out.finish_reason = r["choices"][0].value("finish_reason", "");
      out.prompt_tokens = r["usage"].value("prompt_tokens", -1);
      out.completion_tokens = r["usage"].value("completion_tokens", -1);
      return out;
    }
    const auto [status, body] = deployment_->Post("/v1/chat/completions", request.dump());
    EXPECT_EQ(status, 200) << body;
    bool done = false;
    for (absl::string_view line : absl::StrSplit(body, '\n')) {
      if (!absl::ConsumePrefix(&line, "data: ")) continue;
      if (line == "[DONE]") {
        done = true;
        continue;
      }
      const json chunk = json::parse(line, nullptr, false);
      if (!chunk.is_object() || !chunk.contains("choices") || chunk["choices"].empty()) continue;
      const json& choice = chunk["choices"][0];
      if (choice.contains("delta") && choice["delta"]["content"].is_string()) {
        out.text += choice["delta"]["content"].get<std::string>();
      }
      if (choice["finish_reason"].is_string()) out.finish_reason = choice["finish_reason"];
    }
    if (!done) out.finish_reason = "(the stream did not end with [DONE])";
    return out;
  }

  static std::string* model_dir_;
  static launcher::LocalDeployment* deployment_;
};

std::string* Dsv3Test::model_dir_ = nullptr;
launcher::LocalDeployment* Dsv3Test::deployment_ = nullptr;

const json& Conversation() {
  static const json* const kMessages = new json(json::parse(R"([
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Name three colours. 你好 123456"},
    {"role": "assistant", "content": "Red, green, blue."},
    {"role": "user", "content": "  And three shapes?\n"}])"));
  return *kMessages;
}

TEST_F(Dsv3Test, ChatPromptIsTheFamilysTemplateRenderedByJinja2) {
  const std::string by_hand =
      absl::StrCat(kBos, "You are terse.", kUser, "Name three colours. 你好 123456", kAssistant,
                   "Red, green, blue.", kEos, kUser, "  And three shapes?\n", kAssistant);
  nlohmann::ordered_json input = {
      {"config", *model_dir_ + "/tokenizer_config.json"},
      {"cases",
       {{{"messages", nlohmann::ordered_json::parse(Conversation().dump())},
         {"add_generation_prompt", true}},
        {{"messages", nlohmann::ordered_json::parse(Conversation().dump())},
         {"add_generation_prompt", false}}}}};
  absl::StatusOr<std::vector<nlohmann::ordered_json>> rendered =
      tok::testing::RenderWithJinja2("dsv3", input);
  ASSERT_TRUE(rendered.ok()) << rendered.status();
  ASSERT_EQ(rendered->size(), 2u);
  ASSERT_TRUE((*rendered)[0].contains("text")) << (*rendered)[0].dump();
  EXPECT_EQ((*rendered)[0]["text"], by_hand);
  EXPECT_EQ((*rendered)[1]["text"], by_hand.substr(0, by_hand.size() - strlen(kAssistant)));

  const std::vector<int32_t> want =
      Tokens({{"prompt", (*rendered)[0]["text"].get<std::string>()}, {"add_special_tokens", false}});
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(want.front(), 256) << "BOS";
  EXPECT_EQ(want.back(), 260) << "<｜Assistant｜>";
  EXPECT_EQ(Tokens({{"messages", Conversation()}}), want);
  const Chat chat = Complete(Conversation(), 8, false);
  EXPECT_EQ(chat.prompt_tokens, static_cast<int64_t>(want.size()));
}

TEST_F(Dsv3Test, GreedyChatIsDeterministicAndStreamsTheSameText) {
  const json messages = {{{"role", "user"}, {"content", "Tell me about the sea."}}};
  const Chat first = Complete(messages, 24, false);
  EXPECT_TRUE(first.finish_reason == "length" || first.finish_reason == "stop")
      << first.finish_reason;
  EXPECT_GT(first.completion_tokens, 0);
  EXPECT_LE(first.completion_tokens, 24);
  if (first.finish_reason == "length") EXPECT_EQ(first.completion_tokens, 24);
  const Chat again = Complete(messages, 24, false);
  EXPECT_EQ(again.text, first.text);
  const Chat streamed = Complete(messages, 24, true);
  EXPECT_EQ(streamed.text, first.text);
  EXPECT_EQ(streamed.finish_reason, first.finish_reason);
}

// Several conversations at once across the generation ranks: each greedy answer equals
// the one it gets alone.
TEST_F(Dsv3Test, ConcurrentRequestsAnswerAsAlone) {
  std::vector<json> conversations;
  for (int i = 0; i < 6; ++i) {
    conversations.push_back(
        {{{"role", "user"}, {"content", absl::StrCat("Question ", i, ": count to ", i + 3)}}});
  }
  std::vector<Chat> alone;
  for (const json& c : conversations) alone.push_back(Complete(c, 12, false));
  std::vector<Chat> together(conversations.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < conversations.size(); ++i) {
    threads.emplace_back([&, i] { together[i] = Complete(conversations[i], 12, false); });
  }
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < conversations.size(); ++i) {
    EXPECT_EQ(together[i].text, alone[i].text) << "conversation " << i;
  }
}

}  // namespace
}  // namespace lockstep::e2e
