#include "common/bounded_json.h"

#include <functional>
#include <iterator>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using nlohmann::json;
using nlohmann::ordered_json;
using ::testing::HasSubstr;

std::string Nested(int depth, std::string_view open, std::string_view close) {
  std::string text;
  for (int i = 0; i < depth; ++i) text += open;
  text += "1";
  for (int i = 0; i < depth; ++i) text += close;
  return text;
}

TEST(BoundedJsonTest, ParsesAsNlohmannDoes) {
  for (const char* text : {
           R"({"a": [1, -2, 3.5, "x", true, false, null], "b": {"c": {}}, "d": []})",
           R"([{"z": 1, "a": 2, "m": 3}])",
           R"({"k": 1, "j": 2, "k": 3})",  // a duplicate key: first place, last value
           R"({"k": 1, "k": 2, "j": 0, "k": 3, "k": 4})",
           R"("text \u00e9 \ud83d\ude00")",
           R"(18446744073709551615)",
           R"(-9223372036854775808)",
           R"({"": {"": {"": [[], {}]}}})",
       }) {
    SCOPED_TRACE(text);
    absl::StatusOr<json> doc = ParseBoundedJson<json>(text);
    ASSERT_THAT(doc, IsOk());
    EXPECT_EQ(*doc, json::parse(text));
    absl::StatusOr<ordered_json> ordered = ParseBoundedJson<ordered_json>(text);
    ASSERT_THAT(ordered, IsOk());
    EXPECT_EQ(ordered->dump(), ordered_json::parse(text).dump());
  }
}

TEST(BoundedJsonTest, InvalidJsonSaysWhere) {
  for (const char* text : {"", "{", "{\"a\": }", "[1, 2", "1 2", "{\"a\": 1}x", "\"\xff\""}) {
    SCOPED_TRACE(text);
    EXPECT_THAT(ParseBoundedJson<json>(text),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not valid JSON")));
    EXPECT_THAT(ParseBoundedJson<ordered_json>(text),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not valid JSON")));
  }
  EXPECT_THAT(ParseBoundedJson<json>("[1, 2"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("line 1, column 6")));
}

// The depth counts arrays and objects inside one another; the top level is 1.
TEST(BoundedJsonTest, DepthIsBounded) {
  for (const auto& [open, close] : {std::pair{"[", "]"}, std::pair{"{\"a\":", "}"}}) {
    SCOPED_TRACE(open);
    EXPECT_THAT(ParseBoundedJson<json>(Nested(64, open, close)), IsOk());
    EXPECT_THAT(ParseBoundedJson<ordered_json>(Nested(64, open, close)), IsOk());
    EXPECT_THAT(
        ParseBoundedJson<json>(Nested(65, open, close)),
        StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("nested deeper than 64 levels")));
    EXPECT_THAT(
        ParseBoundedJson<json>(Nested(3, open, close), {.max_depth = 2}),
        StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("nested deeper than 2 levels")));
    // 100,000 levels: refused at level 65, nothing deep is built (nor copied, dumped
    // or destroyed).
    EXPECT_THAT(ParseBoundedJson<ordered_json>(Nested(100000, open, close)),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("nested deeper")));
    // Unclosed: refused for the depth before the end is seen.
    std::string unclosed;
    for (int i = 0; i < 100000; ++i) unclosed += open;
    EXPECT_THAT(ParseBoundedJson<json>(unclosed),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("nested deeper")));
  }
}

TEST(BoundedJsonTest, ValueCountIsBounded) {
  // [0,0,0] is 4 values: the array and its three numbers.
  EXPECT_THAT(ParseBoundedJson<json>("[0,0,0]", {.max_values = 4}), IsOk());
  EXPECT_THAT(ParseBoundedJson<json>("[0,0,0,0]", {.max_values = 4}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("more than 4 values")));
  EXPECT_THAT(ParseBoundedJson<ordered_json>(R"({"a":[],"b":{}})", {.max_values = 2}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("more than 2 values")));
  // A 16 MiB body of small numbers: refused at the default bound, after ~0.5 MiB.
  std::string big = "[";
  for (int i = 0; i < (8 << 20) - 1; ++i) big += "0,";
  big += "0]";
  EXPECT_THAT(ParseBoundedJson<json>(big),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(absl::StrCat("more than ", kDefaultMaxJsonValues, " values"))));
}

// An ordered object's members are appended, not looked up one by one: 200,000 members
// (nlohmann's own ordered parser compares each key with every earlier one), with
// duplicates merged as nlohmann merges them.
TEST(BoundedJsonTest, WideOrderedObjectsKeepOrderAndMergeDuplicates) {
  constexpr int kKeys = 200000;
  std::string text = "{";
  for (int i = 0; i < kKeys; ++i) absl::StrAppend(&text, "\"k", kKeys - i, "\":", i, ",");
  text += "\"k7\":\"last\",\"k1\":\"end\"}";
  absl::StatusOr<ordered_json> doc = ParseBoundedJson<ordered_json>(text, {.max_values = 1 << 20});
  ASSERT_THAT(doc, IsOk());
  ASSERT_EQ(doc->size(), static_cast<size_t>(kKeys));
  EXPECT_EQ(doc->begin().key(), absl::StrCat("k", kKeys));
  EXPECT_EQ((*doc)["k7"], "last");
  EXPECT_EQ(std::prev(doc->end()).key(), "k1");
  EXPECT_EQ(std::prev(doc->end()).value(), "end");
}

// Seeded random documents within the bounds parse exactly as nlohmann parses them.
TEST(BoundedJsonTest, RandomDocumentsParseAsNlohmannDoes) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 rng(seed);
  const std::function<std::string(int)> value = [&](int depth) -> std::string {
    switch (depth >= 6 ? rng() % 4 : rng() % 6) {
      case 0:
        return std::to_string(static_cast<int64_t>(rng() % 2000) - 1000);
      case 1:
        return absl::StrCat("\"s", rng() % 5, "\"");
      case 2:
        return rng() % 2 ? "true" : "null";
      case 3:
        return "1.5e3";
      case 4: {
        std::string out = "[";
        for (int i = 0, n = static_cast<int>(rng() % 5); i < n; ++i) {
          if (i > 0) out += ",";
          out += value(depth + 1);
        }
        return out + "]";
      }
      default: {
        std::string out = "{";
        for (int i = 0, n = static_cast<int>(rng() % 6); i < n; ++i) {
          if (i > 0) out += ",";
          absl::StrAppend(&out, "\"k", rng() % 4, "\":", value(depth + 1));  // duplicates too
        }
        return out + "}";
      }
    }
  };
  for (int i = 0; i < 500; ++i) {
    const std::string text = value(0);
    SCOPED_TRACE(text);
    absl::StatusOr<json> doc = ParseBoundedJson<json>(text);
    ASSERT_THAT(doc, IsOk());
    ASSERT_EQ(*doc, json::parse(text));
    absl::StatusOr<ordered_json> ordered = ParseBoundedJson<ordered_json>(text);
    ASSERT_THAT(ordered, IsOk());
    ASSERT_EQ(ordered->dump(), ordered_json::parse(text).dump());
  }
}

}  // namespace
}  // namespace lockstep
