// The CRC32C self-check of an architecture this machine cannot run natively (AArch64:
// the hosts of GB300-class nodes): crc32c_aarch64_test.sh builds this file and
// crc32c.cc for it and runs them under qemu. Depends on nothing but crc32c (no gtest or
// Abseil in the cross sysroot). Checks the known values on every path the CPU has, and
// every path against the byte table on seeded random spans and alignments; prints the
// paths and the seed ("crc32c_check [seed]"), exits 1 on the first mismatch.
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "runtime/transfer/crc32c.h"

namespace lockstep::transfer {
namespace {

int Check(uint64_t seed) {
  std::vector<Crc32cPath> paths;
  for (Crc32cPath path : {Crc32cPath::kPortable, Crc32cPath::kInstruction, Crc32cPath::kFold512}) {
    if (Crc32cSupports(path)) {
      paths.push_back(path);
      std::printf("path: %s\n", Crc32cPathName(path));
    }
  }
  std::printf("fastest: %s\nseed: %" PRIu64 "\n", Crc32cPathName(Crc32cFastestPath()), seed);
  int failures = 0;
  const auto expect = [&](uint32_t got, uint32_t want, const char* what, Crc32cPath path,
                          size_t size, size_t offset) {
    if (got == want) return;
    std::printf("MISMATCH %s on %s: size %zu offset %zu, got %08x, want %08x (seed %" PRIu64
                ")\n",
                what, Crc32cPathName(path), size, offset, got, want, seed);
    ++failures;
  };
  // RFC 3720 (iSCSI) B.4, and "123456789".
  const std::string digits = "123456789";
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xFF);
  for (Crc32cPath path : paths) {
    expect(Crc32cExtendWith(path, 0, digits.data(), digits.size()), 0xE3069283u, "known", path, 9,
           0);
    expect(Crc32cExtendWith(path, 0, zeros.data(), zeros.size()), 0x8A9136AAu, "known", path, 32,
           0);
    expect(Crc32cExtendWith(path, 0, ones.data(), ones.size()), 0x62A8AB43u, "known", path, 32, 0);
  }
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> data(3 * 8192 * 2 + 4096);
  for (uint8_t& b : data) b = static_cast<uint8_t>(rng());
  // Around the 256-byte folding rounds, the crc32 path's 768-byte and 24 KiB rounds.
  std::vector<size_t> sizes = {0,   1,   7,    8,    9,    15,    16,    255,  256,
                               257, 767, 768,  769,  1031, 24575, 24576, 24589, 40000};
  for (int i = 0; i < 40; ++i) sizes.push_back(rng() % (data.size() - 8));
  for (size_t size : sizes) {
    for (size_t offset : {0, 1, 3, 7}) {
      const uint32_t init = static_cast<uint32_t>(rng());
      const uint32_t want = Crc32cExtendWith(Crc32cPath::kPortable, init, data.data() + offset,
                                             size);
      for (Crc32cPath path : paths) {
        expect(Crc32cExtendWith(path, init, data.data() + offset, size), want, "random span", path,
               size, offset);
      }
      expect(Crc32cExtend(init, data.data() + offset, size), want, "Crc32cExtend",
             Crc32cFastestPath(), size, offset);
    }
  }
  std::printf("%s: %zu sizes x 4 alignments on %zu paths\n", failures == 0 ? "OK" : "FAILED",
              sizes.size(), paths.size());
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace lockstep::transfer

int main(int argc, char** argv) {
  const uint64_t seed = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 20261207;
  return lockstep::transfer::Check(seed);
}
