// GPU checks of the device copier: round trips over random block subsets are bit-exact
// against a host pool driven by HostBlockCopier, with big and tiny bounce buffers, and
// from several threads at once. Skips without a GPU (gpu_test_env.h).
#include "runtime/cuda/device_block_copier.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "common/ids.h"
#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "kvcache/block_copier.h"
#include "kvcache/block_layout.h"
#include "runtime/cuda/device_block_allocator.h"
#include "runtime/cuda/gpu_test_env.h"

namespace lockstep::cuda {
namespace {

using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::StatusIs;
using ::lockstep::testing::TestSeed;

// bf16, head_dim 128: 64 KiB blocks.
constexpr kv::BlockLayout kLayout{.num_layers = 4,
                                  .num_kv_heads = 2,
                                  .head_dim = 128,
                                  .tokens_per_block = 16,
                                  .element_bytes = 2};
constexpr int32_t kNumBlocks = 300;

// Eight bytes per draw (this file builds at -O0, where a draw per byte made the data the
// test's largest cost).
std::vector<std::byte> RandomBytes(std::mt19937_64& rng, size_t n) {
  std::vector<std::byte> out(n);
  for (size_t i = 0; i < n; i += sizeof(uint64_t)) {
    const uint64_t bits = rng();
    std::memcpy(out.data() + i, &bits, std::min(sizeof(bits), n - i));
  }
  return out;
}

size_t TotalBytes(const std::vector<kv::BlockSpan>& spans) {
  size_t total = 0;
  for (const kv::BlockSpan& s : spans) total += s.length;
  return total;
}

// Spans over distinct blocks drawn from `blocks` (so no two spans write the same bytes),
// each a whole block or a random byte range of it, in random order.
std::vector<kv::BlockSpan> RandomSpans(std::mt19937_64& rng, std::vector<int32_t> blocks) {
  std::shuffle(blocks.begin(), blocks.end(), rng);
  blocks.resize(1 + rng() % blocks.size());
  std::vector<kv::BlockSpan> spans;
  const size_t block_bytes = kLayout.BlockBytes();
  for (int32_t b : blocks) {
    if (rng() % 2 == 0) {
      spans.push_back({BlockId(b), 0, block_bytes});
    } else {
      const size_t offset = rng() % block_bytes;
      spans.push_back({BlockId(b), offset, 1 + rng() % (block_bytes - offset)});
    }
  }
  return spans;
}

// A device pool and its host twin, kept equal by applying every CopyIn to both.
class CopierRoundTrip {
 public:
  explicit CopierRoundTrip(DeviceCopierOptions options) : allocator_(0, options) {}
  ~CopierRoundTrip() {
    device_copier_.reset();
    if (slab_ != nullptr) allocator_.Free(slab_, kNumBlocks * kLayout.BlockBytes());
  }

  absl::Status Init() {
    absl::StatusOr<std::byte*> slab = allocator_.Allocate(kNumBlocks * kLayout.BlockBytes());
    if (!slab.ok()) return slab.status();
    slab_ = *slab;
    absl::StatusOr<std::unique_ptr<kv::BlockCopier>> copier =
        allocator_.MakeCopier(slab_, kLayout, kNumBlocks);
    if (!copier.ok()) return copier.status();
    device_copier_ = std::move(copier).value();
    host_slab_.assign(kNumBlocks * kLayout.BlockBytes(), std::byte{0});
    host_copier_ = std::make_unique<kv::HostBlockCopier>(host_slab_.data(), kLayout, kNumBlocks);
    return absl::OkStatus();
  }

  kv::BlockCopier& device() { return *device_copier_; }

  // Writes random bytes into `spans` of both pools.
  void WriteRandom(std::mt19937_64& rng, const std::vector<kv::BlockSpan>& spans) {
    const std::vector<std::byte> data = RandomBytes(rng, TotalBytes(spans));
    LOCKSTEP_ASSERT_OK(device_copier_->CopyIn(data, spans));
    LOCKSTEP_ASSERT_OK(host_copier_->CopyIn(data, spans));
  }

  // Reads `spans` from both pools; they must be equal byte for byte.
  void ExpectEqual(const std::vector<kv::BlockSpan>& spans) {
    std::vector<std::byte> got(TotalBytes(spans)), want(got.size());
    LOCKSTEP_ASSERT_OK(device_copier_->CopyOut(spans, absl::MakeSpan(got)));
    LOCKSTEP_ASSERT_OK(host_copier_->CopyOut(spans, absl::MakeSpan(want)));
    if (std::memcmp(got.data(), want.data(), got.size()) == 0) return;
    const auto mismatch = std::mismatch(got.begin(), got.end(), want.begin());
    ASSERT_TRUE(mismatch.first == got.end())
        << "first differing byte at host offset " << (mismatch.first - got.begin()) << " of "
        << got.size();
  }

 private:
  DeviceBlockAllocator allocator_;
  std::byte* slab_ = nullptr;
  std::unique_ptr<kv::BlockCopier> device_copier_;
  std::vector<std::byte> host_slab_;
  std::unique_ptr<kv::HostBlockCopier> host_copier_;
};

std::vector<int32_t> AllBlocks() {
  std::vector<int32_t> blocks(kNumBlocks);
  std::iota(blocks.begin(), blocks.end(), 0);
  return blocks;
}

void RunRandomRoundTrips(DeviceCopierOptions options) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  CopierRoundTrip pools(options);
  LOCKSTEP_ASSERT_OK(pools.Init());
  std::vector<kv::BlockSpan> whole;
  for (int32_t b = 0; b < kNumBlocks; ++b) whole.push_back({BlockId(b), 0, kLayout.BlockBytes()});
  pools.ExpectEqual(whole);  // zero-filled
  pools.WriteRandom(rng, whole);
  pools.ExpectEqual(whole);
  for (int round = 0; round < 40; ++round) {
    SCOPED_TRACE(round);
    pools.WriteRandom(rng, RandomSpans(rng, AllBlocks()));
    pools.ExpectEqual(RandomSpans(rng, AllBlocks()));
  }
  pools.ExpectEqual(whole);
}

TEST(DeviceBlockCopierTest, NullSlabIsInvalidArgument) {
  EXPECT_THAT(DeviceBlockCopier::Create(0, nullptr, kLayout, kNumBlocks),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(DeviceBlockCopierTest, RandomRoundTripsAreBitExact) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  RunRandomRoundTrips(DeviceCopierOptions{});
}

// Many chunks per call, so both bounce buffers take turns, and odd sizes.
TEST(DeviceBlockCopierTest, RandomRoundTripsThroughTinyBounceBuffersAreBitExact) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  RunRandomRoundTrips(DeviceCopierOptions{
      .limits = {.chunk_bytes = 40000 + 3, .max_segment_bytes = 5000 + 1, .max_segments = 7}});
}

TEST(DeviceBlockCopierTest, ConcurrentCallsOnDisjointBlocksAreBitExact) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  CopierRoundTrip pools(DeviceCopierOptions{.limits = {.chunk_bytes = 256 << 10}});
  LOCKSTEP_ASSERT_OK(pools.Init());
  constexpr int kThreads = 4;
  std::vector<std::vector<std::byte>> written(kThreads);
  std::vector<std::vector<kv::BlockSpan>> spans(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    std::mt19937_64 rng(seed + t);
    for (int32_t b = t; b < kNumBlocks; b += kThreads) {
      spans[t].push_back({BlockId(b), 0, kLayout.BlockBytes()});
    }
    written[t] = RandomBytes(rng, TotalBytes(spans[t]));
  }
  std::vector<absl::Status> results(2 * kThreads);
  std::vector<std::vector<std::byte>> read(kThreads);
  {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        results[2 * t] = pools.device().CopyIn(written[t], spans[t]);
        read[t].resize(written[t].size());
        results[2 * t + 1] = pools.device().CopyOut(spans[t], absl::MakeSpan(read[t]));
      });
    }
    for (std::thread& thread : threads) thread.join();
  }
  for (const absl::Status& s : results) LOCKSTEP_EXPECT_OK(s);
  for (int t = 0; t < kThreads; ++t) EXPECT_TRUE(read[t] == written[t]) << "thread " << t;
}

}  // namespace
}  // namespace lockstep::cuda
