#include "runtime/router/http/chat_template.h"

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/router/core/request_validation.h"

namespace lockstep::router {
namespace {

using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

TEST(ChatTemplateTest, RendersRolesAndEndsWithTheAssistantHeader) {
  absl::StatusOr<std::string> prompt = RenderChatPrompt(
      {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello"}, {"user", "Bye"}});
  ASSERT_TRUE(prompt.ok());
  EXPECT_EQ(*prompt,
            "<|system|>\nBe brief.\n<|user|>\nHi\n<|assistant|>\nHello\n<|user|>\nBye\n"
            "<|assistant|>\n");
  EXPECT_EQ(*RenderChatPrompt({{"developer", "x"}}), "<|system|>\nx\n<|assistant|>\n");
  EXPECT_EQ(*RenderChatPrompt({{"user", "x"}}, /*add_generation_prompt=*/false), "<|user|>\nx\n");
}

TEST(ChatTemplateTest, RejectsEmptyAndUnknownRoles) {
  absl::StatusOr<std::string> empty = RenderChatPrompt({});
  EXPECT_THAT(empty, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(ParamOf(empty.status()), "messages");
  EXPECT_THAT(RenderChatPrompt({{"user", "a"}, {"tool", "b"}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("messages[1].role must be system, developer, user or "
                                 "assistant, got 'tool'")));
}

}  // namespace
}  // namespace lockstep::router
