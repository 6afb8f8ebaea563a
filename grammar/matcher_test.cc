#include "grammar/matcher.h"

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grammar/testing_vocabulary.h"
#include "gtest/gtest.h"

namespace lockstep::grammar {
namespace {

bool Allowed(const std::vector<uint32_t>& mask, int32_t t) {
  return (mask[t >> 5] >> (t & 31)) & 1;
}

std::vector<uint32_t> Mask(const Matcher& m, const Vocabulary& v) {
  std::vector<uint32_t> mask(MaskWords(v), 0xFFFFFFFFu);
  m.FillNextTokenMask(absl::MakeSpan(mask));
  return mask;
}

class MatcherTest : public ::testing::Test {
 protected:
  std::shared_ptr<const Vocabulary> vocab_ = MakeTestingVocabulary(2000, 7);
  int32_t stop_ = vocab_->stop_tokens[0];
  int32_t Token(const std::string& bytes) {
    for (size_t t = 0; t < vocab_->token_bytes.size(); ++t) {
      if (vocab_->token_bytes[t] == bytes) return static_cast<int32_t>(t);
    }
    ADD_FAILURE() << "no token " << bytes;
    return 0;
  }
};

TEST_F(MatcherTest, MaskAgreesWithAcceptToken) {
  auto compiled = Compile(GrammarSpec{}, vocab_);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  Matcher m(*compiled);
  const uint32_t seed = 11;
  std::mt19937 rng(seed);
  for (int step = 0; step < 40 && !m.IsTerminated(); ++step) {
    std::vector<uint32_t> mask = Mask(m, *vocab_);
    std::vector<int32_t> allowed;
    for (int32_t t = 0; t < static_cast<int32_t>(vocab_->token_bytes.size()); ++t) {
      const bool accepted = m.AcceptToken(t);
      ASSERT_EQ(accepted, Allowed(mask, t))
          << "seed " << seed << " step " << step << " token " << t;
      if (accepted) {
        allowed.push_back(t);
        m.Rollback(1);
      }
    }
    ASSERT_FALSE(allowed.empty()) << "seed " << seed << " step " << step;
    ASSERT_TRUE(m.AcceptToken(allowed[rng() % allowed.size()]));
  }
}

TEST_F(MatcherTest, JsonObjectAndStop) {
  auto compiled = Compile(GrammarSpec{}, vocab_);
  ASSERT_TRUE(compiled.ok());
  Matcher m(*compiled);
  EXPECT_FALSE(Allowed(Mask(m, *vocab_), stop_));
  EXPECT_FALSE(m.AcceptToken(stop_));
  EXPECT_FALSE(m.AcceptToken(Token("[")));
  EXPECT_FALSE(m.AcceptToken(Token("")));
  for (const char* piece : {"{\"", "name", "\": ", "\"", "x", "\"}"})
    ASSERT_TRUE(m.AcceptToken(Token(piece))) << piece;
  EXPECT_TRUE(m.CanTerminate());
  EXPECT_TRUE(Allowed(Mask(m, *vocab_), stop_));
  EXPECT_FALSE(Allowed(Mask(m, *vocab_), Token("x")));
  EXPECT_TRUE(m.AcceptToken(stop_));
  EXPECT_TRUE(m.IsTerminated());
  EXPECT_FALSE(m.CanTerminate());
  EXPECT_FALSE(m.IsDeadEnd());
  EXPECT_FALSE(m.AcceptToken(Token(" ")));
  std::vector<uint32_t> mask = Mask(m, *vocab_);
  for (uint32_t w : mask) EXPECT_EQ(w, 0u);
}

TEST_F(MatcherTest, RollbackRestoresTheMask) {
  auto compiled = Compile(GrammarSpec{}, vocab_);
  ASSERT_TRUE(compiled.ok());
  Matcher m(*compiled);
  std::vector<std::vector<uint32_t>> masks = {Mask(m, *vocab_)};
  for (const char* piece : {"{\"", "name", "\": ", "[", "1", ",", " true", "]", "}"}) {
    ASSERT_TRUE(m.AcceptToken(Token(piece))) << piece;
    masks.push_back(Mask(m, *vocab_));
  }
  ASSERT_TRUE(m.AcceptToken(stop_));
  m.Rollback(1);
  EXPECT_EQ(Mask(m, *vocab_), masks.back());
  m.Rollback(4);
  EXPECT_EQ(m.num_accepted(), 5);
  EXPECT_EQ(Mask(m, *vocab_), masks[5]);
  m.Rollback(100);
  EXPECT_EQ(m.num_accepted(), 0);
  EXPECT_EQ(Mask(m, *vocab_), masks[0]);
}

TEST_F(MatcherTest, DeadEndWhenTheVocabularyCannotContinue) {
  // A vocabulary without '}' cannot close the object.
  auto vocab = std::make_shared<Vocabulary>();
  vocab->token_bytes = {"{", "\"", "a", ":", "1", ""};
  vocab->stop_tokens = {5};
  auto compiled = Compile(GrammarSpec{}, vocab);
  ASSERT_TRUE(compiled.ok());
  Matcher m(*compiled);
  EXPECT_FALSE(m.IsDeadEnd());
  ASSERT_TRUE(m.AcceptToken(0));
  EXPECT_FALSE(m.IsDeadEnd());  // '"' may come
  for (int t : {1, 2, 1, 3, 4}) ASSERT_TRUE(m.AcceptToken(t));
  // {"a":1 then only ',' '}' or more digits/whitespace: '1' is still allowed.
  EXPECT_FALSE(m.IsDeadEnd());
  auto vocab2 = std::make_shared<Vocabulary>();
  vocab2->token_bytes = {"{", "x", ""};
  vocab2->stop_tokens = {2};
  auto compiled2 = Compile(GrammarSpec{}, vocab2);
  ASSERT_TRUE(compiled2.ok());
  Matcher m2(*compiled2);
  ASSERT_TRUE(m2.AcceptToken(0));
  EXPECT_TRUE(m2.IsDeadEnd());
}

TEST_F(MatcherTest, CacheSharesCompiledGrammars) {
  GrammarCache cache(2);
  auto a = cache.Get(GrammarSpec{}, vocab_);
  auto b = cache.Get(GrammarSpec{}, vocab_);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->get(), b->get());
  auto other_vocab = MakeTestingVocabulary(500, 3);
  auto c = cache.Get(GrammarSpec{}, other_vocab);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->get(), c->get());
  EXPECT_EQ(cache.size(), 2u);
}

TEST_F(MatcherTest, BadStopTokenIsInvalidArgument) {
  auto vocab = std::make_shared<Vocabulary>();
  vocab->token_bytes = {"a"};
  vocab->stop_tokens = {3};
  EXPECT_EQ(Compile(GrammarSpec{}, vocab).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lockstep::grammar
