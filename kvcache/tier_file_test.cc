#include "kvcache/tier_file.h"

#include <cstddef>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace lockstep::kv {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;

std::vector<std::byte> Payload(size_t n) {
  std::vector<std::byte> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<std::byte>(i * 7 + 3);
  return p;
}

std::string TempPath(const char* name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

TEST(TierFileTest, RoundTrips) {
  const TierBlockMeta meta{.key = 42, .parent_key = 7, .tokens = {1, 2, 3, 4}};
  const std::vector<std::byte> payload = Payload(256);
  const std::string path = TempPath("round.kvb");
  ASSERT_THAT(WriteTierFile(path, meta, payload), IsOk());
  std::vector<std::byte> back(payload.size());
  ASSERT_THAT(ReadTierFile(path, meta, absl::MakeSpan(back)), IsOk());
  EXPECT_EQ(back, payload);
}

TEST(TierFileTest, EveryFlippedByteIsDataLoss) {
  const TierBlockMeta meta{.key = 9, .parent_key = 8, .tokens = {5, 6}};
  const std::vector<std::byte> payload = Payload(64);
  const std::string path = TempPath("flip.kvb");
  ASSERT_THAT(WriteTierFile(path, meta, payload), IsOk());
  const size_t size = TierFileBytes(meta.tokens.size(), payload.size());
  std::vector<char> good(size);
  {
    std::ifstream in(path, std::ios::binary);
    ASSERT_TRUE(in.read(good.data(), static_cast<std::streamsize>(size)));
  }
  for (size_t at = 0; at < size; ++at) {
    std::vector<char> bad = good;
    bad[at] ^= 0x10;
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out.write(bad.data(), static_cast<std::streamsize>(size));
    }
    std::vector<std::byte> back(payload.size());
    EXPECT_THAT(ReadTierFile(path, meta, absl::MakeSpan(back)),
                StatusIs(absl::StatusCode::kDataLoss))
        << "byte " << at << " flipped";
  }
}

TEST(TierFileTest, ShortFileAndOtherBlockAreDataLossMissingIsNotFound) {
  const TierBlockMeta meta{.key = 1, .parent_key = 2, .tokens = {3}};
  const std::vector<std::byte> payload = Payload(32);
  const std::string path = TempPath("short.kvb");
  ASSERT_THAT(WriteTierFile(path, meta, payload), IsOk());
  std::vector<std::byte> back(payload.size());
  TierBlockMeta other = meta;
  other.key = 5;
  EXPECT_THAT(ReadTierFile(path, other, absl::MakeSpan(back)),
              StatusIs(absl::StatusCode::kDataLoss));
  other = meta;
  other.tokens = {4};
  EXPECT_THAT(ReadTierFile(path, other, absl::MakeSpan(back)),
              StatusIs(absl::StatusCode::kDataLoss));
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write("LSKV", 4);
  }
  EXPECT_THAT(ReadTierFile(path, meta, absl::MakeSpan(back)),
              StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(ReadTierFile(TempPath("absent.kvb"), meta, absl::MakeSpan(back)),
              StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace lockstep::kv
