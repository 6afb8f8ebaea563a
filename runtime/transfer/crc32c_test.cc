#include "runtime/transfer/crc32c.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/testing/seed.h"
#include "gtest/gtest.h"

namespace lockstep::transfer {
namespace {

using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;

// Check values from RFC 3720 (iSCSI), appendix B.4, and the usual "123456789".
TEST(Crc32cTest, KnownValues) {
  const std::string digits = "123456789";
  EXPECT_EQ(Crc32c(digits.data(), digits.size()), 0xE3069283u);
  std::vector<uint8_t> bytes(32, 0);
  EXPECT_EQ(Crc32c(bytes.data(), bytes.size()), 0x8A9136AAu);
  bytes.assign(32, 0xFF);
  EXPECT_EQ(Crc32c(bytes.data(), bytes.size()), 0x62A8AB43u);
  for (int i = 0; i < 32; ++i) bytes[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(Crc32c(bytes.data(), bytes.size()), 0x46DD794Eu);
  for (int i = 0; i < 32; ++i) bytes[i] = static_cast<uint8_t>(31 - i);
  EXPECT_EQ(Crc32c(bytes.data(), bytes.size()), 0x113FDB5Cu);
  EXPECT_EQ(Crc32c(nullptr, 0), 0u);
  EXPECT_EQ(Crc32cExtendPortable(0, digits.data(), digits.size()), 0xE3069283u);
}

// The accelerated paths (512-bit folding; three crc32 streams with shift tables;
// unaligned heads and tails) agree with the byte table on every length and alignment.
TEST(Crc32cTest, MatchesPortableOnRandomSpans) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  SCOPED_TRACE(::testing::Message() << "crc32 instruction: " << Crc32cIsAccelerated()
                                    << ", 512-bit folding: " << Crc32cIsWide());
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> data(3 * 8192 * 2 + 4096);
  for (uint8_t& b : data) b = static_cast<uint8_t>(rng());
  // Around the wide path's 256-byte rounds and 16-byte folds, and the crc32 path's
  // 768-byte and 24 KiB rounds.
  std::vector<size_t> sizes = {
      0,   1,   7,   8,   9,   15,   16,           255,      256,           257,   271,  272,
      511, 512, 767, 768, 769, 1031, 3 * 8192 - 1, 3 * 8192, 3 * 8192 + 13, 32768, 40000};
  for (int i = 0; i < 40; ++i) sizes.push_back(rng() % (data.size() - 8));
  for (size_t size : sizes) {
    for (size_t offset : {0, 1, 3, 7}) {
      if (offset + size > data.size()) continue;
      const uint32_t init = static_cast<uint32_t>(rng());
      EXPECT_EQ(Crc32cExtend(init, data.data() + offset, size),
                Crc32cExtendPortable(init, data.data() + offset, size))
          << "size " << size << " offset " << offset;
    }
  }
}

TEST(Crc32cTest, ExtendConcatenates) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> data(70000);
  for (uint8_t& b : data) b = static_cast<uint8_t>(rng());
  const uint32_t whole = Crc32c(data.data(), data.size());
  for (int i = 0; i < 20; ++i) {
    const size_t cut = rng() % data.size();
    EXPECT_EQ(Crc32cExtend(Crc32c(data.data(), cut), data.data() + cut, data.size() - cut), whole)
        << "cut at " << cut;
  }
}

TEST(Crc32cTest, DetectsEveryFlippedByte) {
  std::vector<uint8_t> data(4096);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 131 + 7);
  const uint32_t good = Crc32c(data.data(), data.size());
  for (size_t i = 0; i < data.size(); i += 97) {
    data[i] ^= 0x10;
    EXPECT_NE(Crc32c(data.data(), data.size()), good) << "byte " << i;
    data[i] ^= 0x10;
  }
}

}  // namespace
}  // namespace lockstep::transfer
