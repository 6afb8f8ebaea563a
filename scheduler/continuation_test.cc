#include "scheduler/continuation.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::sched {
namespace {

using ::testing::ElementsAre;

TEST(ContinuationTest, CarriesTheDeliveredTokensAndTheRestOfTheBudget) {
  SamplingParams sampling;
  sampling.max_tokens = 8;
  sampling.seed = 99;
  sampling.temperature = 0.7f;
  sampling.min_tokens = 4;
  sampling.presence_penalty = 0.5f;
  sampling.stop_token_ids = {2};
  const std::vector<int32_t> prompt = {10, 11};
  const std::vector<int32_t> delivered = {20, 21, 22};
  const Continuation next = ContinueAfter(prompt, sampling, delivered);
  EXPECT_THAT(next.prompt, ElementsAre(10, 11, 20, 21, 22));
  EXPECT_EQ(next.sampling.max_tokens, 5);
  EXPECT_EQ(next.sampling.num_generated_in_prompt, 3);
  // The rest is unchanged: the same draw for each position, the same penalties, and
  // min_tokens still counts from the original request's first token.
  EXPECT_EQ(next.sampling.seed, 99u);
  EXPECT_EQ(next.sampling.temperature, 0.7f);
  EXPECT_EQ(next.sampling.min_tokens, 4);
  EXPECT_EQ(next.sampling.presence_penalty, 0.5f);
  EXPECT_THAT(next.sampling.stop_token_ids, ElementsAre(2));
  EXPECT_TRUE(next.sampling.Validate(256).ok());
  // A continuation of a continuation counts every earlier token.
  const std::vector<int32_t> more = {23};
  const Continuation again = ContinueAfter(next.prompt, next.sampling, more);
  EXPECT_THAT(again.prompt, ElementsAre(10, 11, 20, 21, 22, 23));
  EXPECT_EQ(again.sampling.max_tokens, 4);
  EXPECT_EQ(again.sampling.num_generated_in_prompt, 4);
}

TEST(ContinuationTest, NothingDeliveredIsTheOriginal) {
  SamplingParams sampling;
  sampling.max_tokens = 3;
  const Continuation same = ContinueAfter(std::vector<int32_t>{5}, sampling, {});
  EXPECT_THAT(same.prompt, ElementsAre(5));
  EXPECT_EQ(same.sampling.max_tokens, 3);
  EXPECT_EQ(same.sampling.num_generated_in_prompt, 0);
}

TEST(ContinuationDeathTest, SomethingMustBeLeftToGenerate) {
  SamplingParams sampling;
  sampling.max_tokens = 2;
  EXPECT_DEATH(ContinueAfter(std::vector<int32_t>{1}, sampling, std::vector<int32_t>{7, 8}),
               "nothing left");
}

}  // namespace
}  // namespace lockstep::sched
