// The JSON mutator makes what byte mutations of the corpus never do (docs/security.md
// §6): values nested past the router's 64-level bound, around it and thousands of
// levels past it; containers of thousands of elements; integers at a type's edge. A
// mutator that lost one of these would leave the fuzz targets blind to that class
// (the deep body that overflowed the router's stack), while every fuzz test still
// passed: these counts fail instead.

#include "fuzz/json_mutator.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "common/testing/seed.h"
#include "gtest/gtest.h"

// libFuzzer's byte mutator, which MutateJsonInput calls for half its inputs: here it
// only counts (fuzz_driver.cc's is a real one).
static int byte_mutations = 0;
extern "C" size_t LLVMFuzzerMutate(uint8_t*, size_t size, size_t) {
  ++byte_mutations;
  return size;
}

namespace lockstep::fuzz {
namespace {

// A chat request as the corpus holds them.
constexpr std::string_view kBody =
    R"({"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":8,)"
    R"("logit_bias":{"5":1.5},"stop_token_ids":[1,2]})";

// The deepest nesting of `json` and the most elements of one container (outside
// strings; no parse, so any depth is measured without recursion).
struct Shape {
  size_t depth = 0;
  size_t width = 0;
};

Shape ShapeOf(std::string_view json) {
  Shape shape;
  std::vector<size_t> elements;  // per open container: commas seen + 1
  bool in_string = false;
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (in_string) {
      if (c == '\\') ++i;
      if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      elements.push_back(1);
      shape.depth = std::max(shape.depth, elements.size());
    } else if (c == ',' && !elements.empty()) {
      shape.width = std::max(shape.width, ++elements.back());
    } else if ((c == ']' || c == '}') && !elements.empty()) {
      elements.pop_back();
    }
  }
  return shape;
}

bool HasEdgeInteger(std::string_view json) {
  for (std::string_view edge : {"2147483648", "-2147483649", "9223372036854775808",
                                "-9223372036854775809", "18446744073709551616"}) {
    if (json.find(edge) != std::string_view::npos) return true;
  }
  return false;
}

TEST(JsonMutatorTest, MakesDeepWideAndEdgeValuesWithinTheSizeLimit) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 rng(seed);
  constexpr size_t kMaxSize = 1 << 20;  // run_fuzzers.sh's -max_len
  constexpr int kMutations = 1000;
  int near_the_bound = 0;  // 65..200 levels
  int far_past_it = 0;     // over 1000 levels
  int wide = 0;            // a container of 1000+ elements
  int edges = 0;
  size_t deepest = 0;
  for (int i = 0; i < kMutations; ++i) {
    const std::string out = MutateJson(kBody, rng, kMaxSize);
    ASSERT_LE(out.size(), kMaxSize) << "mutation " << i;
    const Shape shape = ShapeOf(out);
    deepest = std::max(deepest, shape.depth);
    near_the_bound += shape.depth > 64 && shape.depth <= 200;
    far_past_it += shape.depth > 1000;
    wide += shape.width >= 1000;
    edges += HasEdgeInteger(out);
  }
  // Each kind is drawn often (about one mutation in 5 to 20): 10 of 1000 is a wide margin.
  EXPECT_GE(near_the_bound, 10);
  EXPECT_GE(far_past_it, 10);
  EXPECT_GE(deepest, 10000u);
  EXPECT_GE(wide, 10);
  EXPECT_GE(edges, 10);
}

TEST(JsonMutatorTest, GeneratedTreesAreDeepAndWideToo) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 rng(seed);
  Shape most;
  for (int i = 0; i < 200; ++i) {
    const std::string out = GenerateJson(rng, 1 << 20);
    const Shape shape = ShapeOf(out);
    most.depth = std::max(most.depth, shape.depth);
    most.width = std::max(most.width, shape.width);
  }
  EXPECT_GT(most.depth, 1000u);
  EXPECT_GE(most.width, 1000u);
}

TEST(JsonMutatorTest, DeterministicForASeedAndSafeOnMalformedInput) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 a(seed);
  std::mt19937_64 b(seed);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(MutateJson(kBody, a, 4096), MutateJson(kBody, b, 4096));
  for (std::string_view broken : {"", "{", R"({"a":[1,)", R"(["\)", "]]]}", "tru"}) {
    for (int i = 0; i < 50; ++i) EXPECT_LE(MutateJson(broken, a, 256).size(), 256u) << broken;
  }
}

TEST(JsonMutatorTest, TheInputPrefixIsKept) {
  const std::string prefix = "template|";
  std::string data = prefix + std::string(kBody);
  data.resize(1 << 16);
  for (unsigned int seed = 1; seed <= 50; ++seed) {
    std::string copy = data;
    const size_t size = MutateJsonInput(reinterpret_cast<uint8_t*>(copy.data()),
                                        prefix.size() + kBody.size(), copy.size(), seed,
                                        prefix.size());
    ASSERT_LE(size, copy.size());
    EXPECT_EQ(copy.substr(0, prefix.size()), prefix) << "seed " << seed;
  }
  EXPECT_GT(byte_mutations, 0);  // half the inputs get byte mutations,
  EXPECT_LT(byte_mutations, 50);  // the others JSON ones
}

}  // namespace
}  // namespace lockstep::fuzz
