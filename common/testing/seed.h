// Seeds for randomized tests: taken from --gtest_random_seed when it is set (non-zero),
// else from LOCKSTEP_TEST_SEED, else a fixed default, so a failing seed can be replayed.
// Print the seed in every failure message (SCOPED_TRACE(SeedTrace(seed))).
#ifndef LOCKSTEP_COMMON_TESTING_SEED_H_
#define LOCKSTEP_COMMON_TESTING_SEED_H_

#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace lockstep::testing {

inline uint64_t TestSeed(uint64_t fallback = 20261129) {
  const int gtest_seed = ::testing::UnitTest::GetInstance()->random_seed();
  if (GTEST_FLAG_GET(random_seed) != 0 && gtest_seed != 0) return gtest_seed;
  if (const char* env = std::getenv("LOCKSTEP_TEST_SEED")) {
    uint64_t seed = 0;
    if (absl::SimpleAtoi(env, &seed)) return seed;
  }
  return fallback;
}

inline std::string SeedTrace(uint64_t seed) {
  return absl::StrCat("seed=", seed, " (replay with LOCKSTEP_TEST_SEED=", seed, ")");
}

}  // namespace lockstep::testing

#endif  // LOCKSTEP_COMMON_TESTING_SEED_H_
