#include "runtime/transfer/crc32c.h"

#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/testing/seed.h"
#include "gtest/gtest.h"

namespace lockstep::transfer {
namespace {

using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;

constexpr Crc32cPath kAllPaths[] = {Crc32cPath::kPortable, Crc32cPath::kInstruction,
                                    Crc32cPath::kFold512};

// The paths this CPU runs (every test covers each), and their names for the log.
std::vector<Crc32cPath> SupportedPaths() {
  std::vector<Crc32cPath> paths;
  for (Crc32cPath path : kAllPaths) {
    if (Crc32cSupports(path)) paths.push_back(path);
  }
  return paths;
}

std::string PathNames() {
  std::ostringstream names;
  for (Crc32cPath path : SupportedPaths()) names << Crc32cPathName(path) << "; ";
  names << "fastest: " << Crc32cPathName(Crc32cFastestPath());
  return names.str();
}

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
  SCOPED_TRACE(PathNames());
  for (Crc32cPath path : SupportedPaths()) {
    EXPECT_EQ(Crc32cExtendWith(path, 0, digits.data(), digits.size()), 0xE3069283u)
        << Crc32cPathName(path);
  }
}

TEST(Crc32cTest, NamesEveryPathAndPicksASupportedOne) {
  EXPECT_TRUE(Crc32cSupports(Crc32cPath::kPortable));
  EXPECT_TRUE(Crc32cSupports(Crc32cFastestPath()));
  // The fastest is the last supported one (the paths are listed slowest first), and the
  // folding path comes with the instruction its tail needs.
  EXPECT_EQ(Crc32cFastestPath(), SupportedPaths().back()) << PathNames();
  if (Crc32cSupports(Crc32cPath::kFold512)) {
    EXPECT_TRUE(Crc32cSupports(Crc32cPath::kInstruction));
  }
  std::vector<std::string> names;
  for (Crc32cPath path : kAllPaths) names.push_back(Crc32cPathName(path));
  EXPECT_EQ(names, (std::vector<std::string>{"portable", "crc32 instruction", "512-bit clmul"}));
}

// Every path this CPU has (folding; three crc32 streams with shift tables; unaligned
// heads and tails) agrees with the byte table on every length and alignment; a path it
// lacks runs the byte table.
TEST(Crc32cTest, EveryPathMatchesPortableOnRandomSpans) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  SCOPED_TRACE(PathNames());
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> data(3 * 8192 * 2 + 4096);
  for (uint8_t& b : data) b = static_cast<uint8_t>(rng());
  // Around the folding path's 256-byte rounds and 16-byte folds, and the crc32 path's
  // 768-byte and 24 KiB rounds.
  std::vector<size_t> sizes = {
      0,   1,   7,   8,   9,   15,   16,           255,      256,           257,   271,  272,
      511, 512, 767, 768, 769, 1031, 3 * 8192 - 1, 3 * 8192, 3 * 8192 + 13, 32768, 40000};
  for (int i = 0; i < 40; ++i) sizes.push_back(rng() % (data.size() - 8));
  for (size_t size : sizes) {
    for (size_t offset : {0, 1, 3, 7}) {
      if (offset + size > data.size()) continue;
      const uint32_t init = static_cast<uint32_t>(rng());
      const uint32_t expected =
          Crc32cExtendWith(Crc32cPath::kPortable, init, data.data() + offset, size);
      EXPECT_EQ(Crc32cExtend(init, data.data() + offset, size), expected)
          << "size " << size << " offset " << offset;
      for (Crc32cPath path : kAllPaths) {
        EXPECT_EQ(Crc32cExtendWith(path, init, data.data() + offset, size), expected)
            << Crc32cPathName(path) << ", size " << size << " offset " << offset;
      }
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
