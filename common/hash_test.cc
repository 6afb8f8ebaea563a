#include "common/hash.h"

#include "gtest/gtest.h"

namespace lockstep {
namespace {

// Reference values of splitmix64 (Vigna's generator seeded with 0 and 1234567).
TEST(HashTest, SplitMix64MatchesTheReferenceStream) {
  uint64_t state = 0;
  auto next = [&state] {
    const uint64_t out = SplitMix64(state);
    state += kSplitMix64Gamma;
    return out;
  };
  EXPECT_EQ(next(), 0xe220a8397b1dcdafull);
  EXPECT_EQ(next(), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(next(), 0x06c45d188009454full);
  state = 1234567;
  EXPECT_EQ(next(), 6457827717110365317ull);
  EXPECT_EQ(next(), 3203168211198807973ull);
}

TEST(HashTest, SplitMix64IsConstexpr) { static_assert(SplitMix64(0) == 0xe220a8397b1dcdafull); }

// Reference values of 64-bit FNV-1a.
TEST(HashTest, Fnv1a64MatchesTheReference) {
  EXPECT_EQ(Fnv1a64().value(), 0xcbf29ce484222325ull);
  Fnv1a64 a;
  a.Add("a");
  EXPECT_EQ(a.value(), 0xaf63dc4c8601ec8cull);
  Fnv1a64 foobar;
  foobar.Add("foo");
  foobar.Add("bar");
  EXPECT_EQ(foobar.value(), 0x85944171f73967e8ull);
}

}  // namespace
}  // namespace lockstep
