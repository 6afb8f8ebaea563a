#include "kvcache/kv_tiers.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstddef>
#include <fstream>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/check.h"
#include "common/ids.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "kvcache/block_copier.h"
#include "kvcache/tier_file.h"

namespace lockstep::kv {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;

constexpr int kBlocks = 8;

// 1 layer x 1 head x 2 tokens x 2 dims of f32: 32 bytes a block.
BlockLayout Layout() {
  return BlockLayout{.num_layers = 1, .num_kv_heads = 1, .head_dim = 2, .tokens_per_block = 2};
}

class KvTiersTest : public ::testing::Test {
 protected:
  KvTiersTest() : slab_(kBlocks * Layout().BlockBytes()), copier_(slab_.data(), Layout(), kBlocks) {
    for (int b = 0; b < kBlocks; ++b) Fill(b, static_cast<uint8_t>(b + 1));
  }

  size_t block_bytes() const { return Layout().BlockBytes(); }
  void Fill(int block, uint8_t value) {
    for (size_t i = 0; i < block_bytes(); ++i) {
      slab_[block * block_bytes() + i] = static_cast<std::byte>(value + i);
    }
  }
  // The block's bytes at `data`.
  std::vector<std::byte> Bytes(const std::byte* data) const { return {data, data + block_bytes()}; }
  std::vector<std::byte> BlockBytes(int block) const {
    return {slab_.begin() + block * block_bytes(), slab_.begin() + (block + 1) * block_bytes()};
  }
  // Block `block` holds tokens {key, key} under key `key`, parent `key - 1`.
  static TierBlockMeta Meta(uint64_t key) {
    return TierBlockMeta{.key = key,
                         .parent_key = key - 1,
                         .tokens = {static_cast<int32_t>(key), static_cast<int32_t>(key)}};
  }
  // `disk_blocks` slots of disk, and `extra_disk_bytes` (less than a slot) more.
  std::unique_ptr<KvTiers> Make(int64_t host_blocks, int64_t disk_blocks,
                                int64_t extra_disk_bytes = 0) {
    TierConfig config{.host_bytes = host_blocks * static_cast<int64_t>(block_bytes())};
    if (disk_blocks > 0) {
      config.disk_path = std::string(std::getenv("TEST_TMPDIR")) + "/tiers";
      config.disk_bytes =
          disk_blocks * static_cast<int64_t>(TierFileBytes(2, block_bytes())) + extra_disk_bytes;
    }
    absl::StatusOr<std::unique_ptr<KvTiers>> tiers = KvTiers::Create(config, &copier_);
    LOCKSTEP_CHECK_OK(tiers.status());
    return *std::move(tiers);
  }
  // The bytes of a disk slot's record (header, tokens, payload) at `at`.
  size_t RecordBytes() const { return 48 + 2 * sizeof(int32_t) + block_bytes(); }
  static std::vector<char> ReadAt(const KvTiers::DiskLocation& at, size_t n) {
    std::vector<char> out(n);
    std::ifstream in(at.path, std::ios::binary);
    in.seekg(at.offset);
    in.read(out.data(), static_cast<std::streamsize>(n));
    EXPECT_TRUE(in.good()) << at.path << " at " << at.offset;
    return out;
  }
  static void WriteAt(const KvTiers::DiskLocation& at, const std::vector<char>& bytes) {
    std::fstream f(at.path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(at.offset);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    EXPECT_TRUE(f.good()) << at.path << " at " << at.offset;
  }
  // Flips byte `at` of the record at `where`.
  static void Flip(const KvTiers::DiskLocation& where, size_t at) {
    std::vector<char> record = ReadAt(where, at + 1);
    record[at] ^= 1;
    WriteAt(where, record);
  }
  void ExpectClean(const KvTiers& tiers) {
    std::vector<std::string> v;
    tiers.AuditInto("", &v);
    EXPECT_TRUE(v.empty()) << v.front();
  }

  std::vector<std::byte> slab_;
  HostBlockCopier copier_;
};

TEST_F(KvTiersTest, CreateRejectsBadSizes) {
  EXPECT_THAT(KvTiers::Create(TierConfig{.host_bytes = 8}, &copier_).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(
      KvTiers::Create(
          TierConfig{.host_bytes = 1024, .disk_path = "/nonexistent-x", .disk_bytes = 4}, &copier_)
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(
      KvTiers::Create(TierConfig{.host_bytes = 1024, .disk_bytes = 4096}, &copier_).status(),
      StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(KvTiersTest, ReuseOfAnEvictedBlockNeverLosesItsCopy) {
  std::unique_ptr<KvTiers> tiers = Make(4, 0);
  const std::vector<std::byte> original = BlockBytes(3);
  tiers->OnEvictable(BlockId(3), Meta(10));
  EXPECT_EQ(tiers->Where(10), Tier::kHost);
  tiers->BeforeReuse(BlockId(3));  // the copy-down has run, here or on the worker
  Fill(3, 200);                    // the block now holds other KV
  Tier from = Tier::kDevice;
  absl::StatusOr<std::shared_ptr<const std::vector<std::byte>>> bytes = tiers->Fetch(10, &from);
  ASSERT_THAT(bytes.status(), IsOk());
  EXPECT_EQ(from, Tier::kHost);
  EXPECT_EQ(**bytes, original);
  ASSERT_THAT(tiers->CopyToDevice(**bytes, BlockId(5), from), IsOk());
  EXPECT_EQ(BlockBytes(5), original);
  EXPECT_THAT(tiers->Flush(), IsOk());
  const TierStats s = tiers->Stats();
  EXPECT_EQ(s.offloaded_blocks + 0, 1);
  EXPECT_EQ(s.onboarded_blocks[static_cast<int>(Tier::kHost)], 1);
  ExpectClean(*tiers);
}

TEST_F(KvTiersTest, CopyToDeviceWritesEachSourceToItsOwnBlockInAnyAddressOrder) {
  // CopyToDevice copies in the sources' address order, and each block must still get
  // its own source.
  std::unique_ptr<KvTiers> tiers = Make(4, 0);
  // One buffer: block b's bytes at ascending addresses; each order below takes another
  // path (already rising, falling, mixed).
  std::vector<std::byte> sources;
  for (int b = 0; b < 4; ++b) {
    const std::vector<std::byte> one = BlockBytes(b);
    sources.insert(sources.end(), one.begin(), one.end());
  }
  for (const std::vector<int>& order :
       {std::vector<int>{0, 1, 2, 3}, std::vector<int>{3, 2, 1, 0}, std::vector<int>{2, 0, 3, 1}}) {
    std::vector<const std::byte*> data;
    for (const int b : order) data.push_back(sources.data() + b * block_bytes());
    const std::vector<BlockId> dst = {BlockId(4), BlockId(7), BlockId(5), BlockId(6)};
    const std::vector<Tier> from(4, Tier::kHost);
    ASSERT_THAT(tiers->CopyToDevice(data, dst, from), IsOk());
    for (size_t i = 0; i < dst.size(); ++i) {
      EXPECT_EQ(BlockBytes(static_cast<int>(dst[i].value())), Bytes(data[i]))
          << "block " << dst[i] << " of order " << order[0] << order[1] << order[2] << order[3];
    }
  }
  EXPECT_EQ(tiers->Stats().onboarded_blocks[static_cast<int>(Tier::kHost)], 12);
  const std::byte* one = sources.data();
  EXPECT_THAT(tiers->CopyToDevice(absl::MakeConstSpan(&one, 1), absl::Span<const BlockId>(),
                                  absl::Span<const Tier>()),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(KvTiersTest, AKeyAlreadyBelowIsNotCopiedAgain) {
  std::unique_ptr<KvTiers> tiers = Make(4, 0);
  tiers->OnEvictable(BlockId(1), Meta(10));
  tiers->BeforeReuse(BlockId(1));
  tiers->OnEvictable(BlockId(2), Meta(10));  // republished elsewhere, evictable again
  EXPECT_THAT(tiers->Flush(), IsOk());
  EXPECT_EQ(tiers->Stats().offloaded_blocks, 1);
  EXPECT_EQ(tiers->Stats().host_blocks, 1);
  ExpectClean(*tiers);
}

TEST_F(KvTiersTest, FullHostTierDropsItsLeastRecentlyUsedBlockWithoutDisk) {
  std::unique_ptr<KvTiers> tiers = Make(2, 0);
  tiers->OnEvictable(BlockId(1), Meta(10));
  tiers->OnEvictable(BlockId(2), Meta(20));
  Tier from;
  ASSERT_THAT(tiers->Fetch(10, &from).status(), IsOk());  // 10 is now the most recent
  tiers->OnEvictable(BlockId(3), Meta(30));
  EXPECT_EQ(tiers->Where(10), Tier::kHost);
  EXPECT_EQ(tiers->Where(20), Tier::kDevice);
  EXPECT_EQ(tiers->Where(30), Tier::kHost);
  EXPECT_THAT(tiers->Fetch(20, &from).status(), StatusIs(absl::StatusCode::kNotFound));
  ExpectClean(*tiers);
}

// Touches leave stale LRU records behind (and are compacted away past a bound); the
// eviction order must stay the least recently used unpinned entry first.
TEST_F(KvTiersTest, HostEvictionOrderSurvivesManyTouchesAndPins) {
  constexpr int kHost = 5;
  constexpr uint32_t kSeed = 39;
  SCOPED_TRACE(::testing::Message() << "seed " << kSeed);
  std::mt19937 rng(kSeed);
  std::unique_ptr<KvTiers> tiers = Make(kHost, 0);
  std::vector<uint64_t> order;  // least recently used first
  uint64_t next_key = 10;
  auto add = [&] {
    tiers->OnEvictable(BlockId(1), Meta(next_key));
    tiers->BeforeReuse(BlockId(1));
    order.push_back(next_key++);
  };
  for (int i = 0; i < kHost; ++i) add();
  // The oldest entry stays pinned and untouched: evictions must pass over it and over
  // the stale records that follow it.
  const uint64_t pinned = order.front();
  ASSERT_NE(tiers->Pin(pinned, pinned - 1, Meta(pinned).tokens), nullptr);
  order.erase(order.begin());
  for (int round = 0; round < 60; ++round) {
    const int touches = std::uniform_int_distribution<int>(1, 40)(rng);
    for (int t = 0; t < touches; ++t) {
      const size_t i = std::uniform_int_distribution<size_t>(0, order.size() - 1)(rng);
      const uint64_t key = order[i];
      Tier from;
      ASSERT_THAT(tiers->Fetch(key, &from).status(), IsOk()) << "round " << round;
      order.erase(order.begin() + static_cast<std::ptrdiff_t>(i));
      order.push_back(key);
    }
    const uint64_t victim = order.front();
    order.erase(order.begin());
    add();
    EXPECT_EQ(tiers->Where(victim), Tier::kDevice) << "round " << round;
    EXPECT_EQ(tiers->Where(pinned), Tier::kHost) << "round " << round;
    for (const uint64_t key : order) EXPECT_EQ(tiers->Where(key), Tier::kHost) << key;
    ExpectClean(*tiers);
  }
  tiers->Unpin(pinned);
  ExpectClean(*tiers);
}

TEST_F(KvTiersTest, HostEvictionsSpillToDiskAndComeBackVerified) {
  std::unique_ptr<KvTiers> tiers = Make(1, 2);
  const std::vector<std::byte> one = BlockBytes(1);
  tiers->OnEvictable(BlockId(1), Meta(10));
  tiers->BeforeReuse(BlockId(1));
  Fill(1, 99);
  tiers->OnEvictable(BlockId(2), Meta(20));  // 10 goes to disk
  tiers->OnEvictable(BlockId(3), Meta(30));  // 20 goes to disk
  EXPECT_EQ(tiers->Where(10), Tier::kDisk);
  EXPECT_EQ(tiers->Where(20), Tier::kDisk);
  EXPECT_EQ(tiers->Where(30), Tier::kHost);
  EXPECT_THAT(tiers->Flush(), IsOk());
  Tier from = Tier::kDevice;
  absl::StatusOr<std::shared_ptr<const std::vector<std::byte>>> bytes = tiers->Fetch(10, &from);
  ASSERT_THAT(bytes.status(), IsOk());
  EXPECT_EQ(from, Tier::kDisk);
  EXPECT_EQ(**bytes, one);
  EXPECT_EQ(tiers->Stats().disk_writes, 2);
  // Disk full: the least recently used block (20) leaves, and 30 takes its slot.
  const KvTiers::DiskLocation twenty = tiers->DiskLocationOf(20);
  ASSERT_GE(twenty.offset, 0);
  tiers->OnEvictable(BlockId(4), Meta(40));
  EXPECT_THAT(tiers->Flush(), IsOk());
  EXPECT_EQ(tiers->Where(20), Tier::kDevice);
  EXPECT_EQ(tiers->DiskLocationOf(20).offset, -1);
  EXPECT_EQ(tiers->DiskLocationOf(30).offset, twenty.offset);
  bytes = tiers->Fetch(30, &from);
  ASSERT_THAT(bytes.status(), IsOk());
  EXPECT_EQ(**bytes, BlockBytes(3));
  ExpectClean(*tiers);
}

// Each way of damaging block 10's slot (a flipped payload, token or header byte, a
// checksum byte, the file cut inside it) makes it a miss: dropped, counted, never
// served, and its slot free for the next block.
TEST_F(KvTiersTest, ACorruptedDiskBlockIsAMissNeverServed) {
  const struct {
    const char* what;
    std::function<void(const KvTiers::DiskLocation&)> damage;
  } kDamages[] = {
      {"a payload byte", [&](const auto& at) { Flip(at, RecordBytes() - 5); }},
      {"a token byte", [&](const auto& at) { Flip(at, 48 + 4); }},
      {"a header byte (the key)", [&](const auto& at) { Flip(at, 8); }},
      {"a header byte (the parent key)", [&](const auto& at) { Flip(at, 16); }},
      {"a checksum byte", [&](const auto& at) { Flip(at, 40); }},
      {"the file cut in the payload",
       [&](const auto& at) { ASSERT_EQ(truncate(at.path.c_str(), at.offset + 70), 0); }},
      {"the file cut in the header",
       [&](const auto& at) { ASSERT_EQ(truncate(at.path.c_str(), at.offset + 20), 0); }},
  };
  for (const auto& d : kDamages) {
    SCOPED_TRACE(d.what);
    std::unique_ptr<KvTiers> tiers = Make(1, 2);
    tiers->OnEvictable(BlockId(2), Meta(20));
    tiers->OnEvictable(BlockId(1), Meta(10));  // 20 goes to disk (slot 0)
    tiers->OnEvictable(BlockId(3), Meta(30));  // 10 goes to disk (slot 1, the file's last)
    EXPECT_THAT(tiers->Flush(), IsOk());
    const KvTiers::DiskLocation ten = tiers->DiskLocationOf(10);
    ASSERT_GE(ten.offset, 0);
    d.damage(ten);
    EXPECT_EQ(tiers->Where(10), Tier::kDisk);
    Tier from;
    EXPECT_THAT(tiers->Fetch(10, &from).status(), StatusIs(absl::StatusCode::kNotFound));
    EXPECT_EQ(tiers->Stats().disk_corrupt, 1);
    EXPECT_EQ(tiers->Where(10), Tier::kDevice);
    EXPECT_EQ(tiers->DiskLocationOf(10).offset, -1);
    const BlockHasher next = [](uint64_t parent, absl::Span<const int32_t>) { return parent + 1; };
    FetchedBlocks out;
    EXPECT_EQ(tiers->FetchChain(next, 9, std::vector<int32_t>{10, 10}, 1, false, &out), 0);
    EXPECT_TRUE(out.keys.empty());
    // The freed slot holds the next block, written whole again.
    tiers->OnEvictable(BlockId(4), Meta(40));  // 30 goes to disk
    EXPECT_THAT(tiers->Flush(), IsOk());
    EXPECT_EQ(tiers->DiskLocationOf(30).offset, ten.offset);
    absl::StatusOr<std::shared_ptr<const std::vector<std::byte>>> bytes = tiers->Fetch(30, &from);
    ASSERT_THAT(bytes.status(), IsOk());
    EXPECT_EQ(**bytes, BlockBytes(3));
    EXPECT_EQ(tiers->Stats().disk_corrupt, 1);
    ExpectClean(*tiers);
  }
}

// A slot freed by an eviction and written with another block serves only that block:
// the old block is gone from the index, and should the slot still hold the old block's
// record (a write that never landed), the new block is a miss, not the old bytes.
TEST_F(KvTiersTest, ASlotReusedAfterEvictionNeverServesTheOldBlock) {
  std::unique_ptr<KvTiers> tiers = Make(1, 1);
  tiers->OnEvictable(BlockId(1), Meta(10));
  tiers->OnEvictable(BlockId(2), Meta(20));  // 10 goes to disk
  EXPECT_THAT(tiers->Flush(), IsOk());
  const KvTiers::DiskLocation ten = tiers->DiskLocationOf(10);
  ASSERT_GE(ten.offset, 0);
  const std::vector<char> old_record = ReadAt(ten, RecordBytes());
  tiers->OnEvictable(BlockId(3), Meta(30));  // 20 goes to disk, in 10's slot
  EXPECT_THAT(tiers->Flush(), IsOk());
  EXPECT_EQ(tiers->Where(10), Tier::kDevice);
  EXPECT_EQ(tiers->DiskLocationOf(20).offset, ten.offset);
  Tier from;
  EXPECT_THAT(tiers->Fetch(10, &from).status(), StatusIs(absl::StatusCode::kNotFound));
  absl::StatusOr<std::shared_ptr<const std::vector<std::byte>>> bytes = tiers->Fetch(20, &from);
  ASSERT_THAT(bytes.status(), IsOk());
  EXPECT_EQ(**bytes, BlockBytes(2));
  WriteAt(ten, old_record);
  EXPECT_THAT(tiers->Fetch(20, &from).status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(tiers->Stats().disk_corrupt, 1);
  EXPECT_EQ(tiers->Where(20), Tier::kDevice);
  ExpectClean(*tiers);
}

// Spills through two slots faster than the worker may write them: an evicted entry's
// write is cancelled or waited for before its slot takes the next block, so every
// block the disk tier still holds comes back exact.
TEST_F(KvTiersTest, ManySpillsThroughFewSlotsKeepEveryBlockExact) {
  std::unique_ptr<KvTiers> tiers = Make(1, 2);
  std::vector<std::vector<std::byte>> expected;
  constexpr int kRounds = 60;
  for (int round = 0; round < kRounds; ++round) {
    const int block = round % kBlocks;
    Fill(block, static_cast<uint8_t>(round * 5));
    expected.push_back(BlockBytes(block));
    tiers->OnEvictable(BlockId(block), Meta(100 + round));
    tiers->BeforeReuse(BlockId((round + 1) % kBlocks));
  }
  EXPECT_THAT(tiers->Flush(), IsOk());
  for (int round = 0; round < kRounds; ++round) {
    const Tier want = round == kRounds - 1   ? Tier::kHost
                      : round >= kRounds - 3 ? Tier::kDisk
                                             : Tier::kDevice;
    ASSERT_EQ(tiers->Where(100 + round), want) << "round " << round;
  }
  for (int round = kRounds - 3; round < kRounds; ++round) {
    Tier from;
    absl::StatusOr<std::shared_ptr<const std::vector<std::byte>>> bytes =
        tiers->Fetch(100 + round, &from);
    ASSERT_THAT(bytes.status(), IsOk()) << "round " << round;
    EXPECT_EQ(**bytes, expected[round]) << "round " << round;
  }
  const TierStats s = tiers->Stats();
  EXPECT_EQ(s.disk_corrupt, 0);
  EXPECT_EQ(s.disk_write_errors, 0);
  ExpectClean(*tiers);
}

// A write the file system refuses (here: past the process's file size limit) is
// counted, its block is a miss, and its slot takes the next block.
TEST_F(KvTiersTest, AFailedDiskWriteIsCountedAMissAndFreesItsSlot) {
  std::unique_ptr<KvTiers> tiers = Make(1, 2);
  const int64_t slot_bytes = static_cast<int64_t>(TierFileBytes(2, block_bytes()));
  tiers->OnEvictable(BlockId(1), Meta(10));
  // Writes from slot 1 on fail with EFBIG (SIGXFSZ ignored) until the limit is restored.
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit limited = saved;
  limited.rlim_cur = static_cast<rlim_t>(slot_bytes);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limited), 0);
  tiers->OnEvictable(BlockId(2), Meta(20));  // 10 goes to disk, slot 0
  tiers->OnEvictable(BlockId(3), Meta(30));  // 20 goes to disk, slot 1: refused
  EXPECT_THAT(tiers->Flush(), IsOk());
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &saved), 0);
  std::signal(SIGXFSZ, old_handler);
  TierStats s = tiers->Stats();
  EXPECT_EQ(s.disk_writes, 2);
  EXPECT_EQ(s.disk_write_errors, 1);
  EXPECT_EQ(tiers->DiskLocationOf(20).offset, slot_bytes);
  Tier from;
  EXPECT_THAT(tiers->Fetch(20, &from).status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(tiers->Where(20), Tier::kDevice);
  absl::StatusOr<std::shared_ptr<const std::vector<std::byte>>> bytes = tiers->Fetch(10, &from);
  ASSERT_THAT(bytes.status(), IsOk());
  EXPECT_EQ(**bytes, BlockBytes(1));
  tiers->OnEvictable(BlockId(4), Meta(40));  // 30 goes to disk, in 20's slot
  EXPECT_THAT(tiers->Flush(), IsOk());
  EXPECT_EQ(tiers->DiskLocationOf(30).offset, slot_bytes);
  bytes = tiers->Fetch(30, &from);
  ASSERT_THAT(bytes.status(), IsOk());
  EXPECT_EQ(**bytes, BlockBytes(3));
  s = tiers->Stats();
  EXPECT_EQ(s.disk_write_errors, 1);
  EXPECT_EQ(s.disk_corrupt, 0);
  ExpectClean(*tiers);
}

// disk_bytes buys whole slots only; the file is their size and never grows, and the
// tier never holds more blocks than slots.
TEST_F(KvTiersTest, TheDiskTierHoldsAsManyBlocksAsWholeSlots) {
  const int64_t slot_bytes = static_cast<int64_t>(TierFileBytes(2, block_bytes()));
  std::unique_ptr<KvTiers> tiers = Make(1, 3, slot_bytes - 1);
  EXPECT_EQ(tiers->Stats().disk_capacity_blocks, 3);
  for (int round = 0; round < 7; ++round) {
    tiers->OnEvictable(BlockId(round % kBlocks), Meta(100 + round));
    tiers->BeforeReuse(BlockId(round % kBlocks));
    EXPECT_LE(tiers->Stats().disk_blocks, 3) << "round " << round;
  }
  EXPECT_THAT(tiers->Flush(), IsOk());
  EXPECT_EQ(tiers->Stats().disk_blocks, 3);
  std::set<int64_t> offsets;
  for (int round = 3; round < 6; ++round) {
    const KvTiers::DiskLocation at = tiers->DiskLocationOf(100 + round);
    EXPECT_GE(at.offset, 0) << "round " << round;
    EXPECT_LT(at.offset, 3 * slot_bytes) << "round " << round;
    EXPECT_EQ(at.offset % slot_bytes, 0) << "round " << round;
    offsets.insert(at.offset);
    Tier from;
    absl::StatusOr<std::shared_ptr<const std::vector<std::byte>>> bytes =
        tiers->Fetch(100 + round, &from);
    ASSERT_THAT(bytes.status(), IsOk()) << "round " << round;
    EXPECT_EQ(**bytes, BlockBytes(round % kBlocks)) << "round " << round;
  }
  EXPECT_EQ(offsets.size(), 3u);
  struct stat st {};
  ASSERT_EQ(stat(tiers->DiskLocationOf(103).path.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 3 * slot_bytes);
  ExpectClean(*tiers);
}

// A block found by its key is used only when its parent and its tokens match too (the
// hasher here names a block by its first token alone, so a key can be found under
// another parent or with other tokens).
TEST_F(KvTiersTest, FetchChainComparesParentAndTokens) {
  std::unique_ptr<KvTiers> tiers = Make(4, 0);
  tiers->OnEvictable(BlockId(1), Meta(10));
  tiers->OnEvictable(BlockId(2), TierBlockMeta{.key = 11, .parent_key = 10, .tokens = {11, 11}});
  tiers->OnEvictable(BlockId(3), TierBlockMeta{.key = 12, .parent_key = 11, .tokens = {7, 7}});
  const BlockHasher by_first_token = [](uint64_t, absl::Span<const int32_t> tokens) {
    return tokens[0] == 7 ? uint64_t{12} : static_cast<uint64_t>(tokens[0]);
  };
  const auto fetched = [&](uint64_t parent, std::vector<int32_t> tokens) {
    FetchedBlocks out;
    return tiers->FetchChain(by_first_token, parent, tokens, 10, false, &out);
  };
  EXPECT_EQ(fetched(9, {10, 10, 11, 11, 7, 7}), 3);
  EXPECT_EQ(fetched(9, {10, 10, 11, 11, 7, 8}), 2);
  EXPECT_EQ(fetched(9, {10, 10, 11, 11}), 2);
  EXPECT_EQ(fetched(8, {10, 10, 11, 11, 7, 7}), 0);
  ExpectClean(*tiers);
}

// FetchChain names each block by the hasher as it goes (here: the parent's key plus one,
// so the chain of 9 is 10, 11, 12), and fetches until the first miss.
TEST_F(KvTiersTest, FetchChainHashesAsItGoesAndStopsAtTheFirstMiss) {
  std::unique_ptr<KvTiers> tiers = Make(4, 0);
  tiers->OnEvictable(BlockId(1), Meta(10));
  tiers->OnEvictable(BlockId(2), TierBlockMeta{.key = 11, .parent_key = 10, .tokens = {11, 11}});
  tiers->OnEvictable(BlockId(3), TierBlockMeta{.key = 12, .parent_key = 11, .tokens = {7, 7}});
  const BlockHasher next = [](uint64_t parent, absl::Span<const int32_t>) { return parent + 1; };
  FetchedBlocks out;
  EXPECT_EQ(tiers->FetchChain(next, 9, std::vector<int32_t>{10, 10, 11, 11, 7, 8}, 10, false, &out),
            2);
  ASSERT_EQ(out.keys, (std::vector<uint64_t>{10, 11}));
  ASSERT_EQ(out.data.size(), 2u);
  EXPECT_EQ(Bytes(out.data[0]), BlockBytes(1));
  EXPECT_EQ(Bytes(out.data[1]), BlockBytes(2));
  EXPECT_EQ(out.from, (std::vector<Tier>{Tier::kHost, Tier::kHost}));
  EXPECT_TRUE(out.owned.empty());  // the host tier keeps them
  // At most max_blocks, whole blocks only, appended; another parent: another chain;
  // `hold`: with the bytes.
  const std::vector<int32_t> all = {10, 10, 11, 11, 7, 7, 7};
  EXPECT_EQ(tiers->FetchChain(next, 9, all, 1, false, &out), 1);
  EXPECT_EQ(tiers->FetchChain(next, 9, all, 10, true, &out), 3);
  EXPECT_EQ(out.keys, (std::vector<uint64_t>{10, 11, 10, 10, 11, 12}));
  EXPECT_EQ(Bytes(out.data.back()), BlockBytes(3));
  ASSERT_EQ(out.owned.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(out.owned[i]->data(), out.data[3 + i]);
  EXPECT_EQ(tiers->FetchChain(next, 8, all, 10, false, &out), 0);
  EXPECT_EQ(out.keys.size(), 6u);
  EXPECT_FALSE(tiers->empty());
  ExpectClean(*tiers);
}

// Without `hold`, blocks read from disk are still owned by the result: no tier keeps
// their bytes.
TEST_F(KvTiersTest, FetchChainOwnsWhatItReadFromDisk) {
  std::unique_ptr<KvTiers> tiers = Make(1, 4);
  tiers->OnEvictable(BlockId(1), Meta(10));
  tiers->OnEvictable(BlockId(2), TierBlockMeta{.key = 11, .parent_key = 10, .tokens = {11, 11}});
  tiers->OnEvictable(BlockId(3), TierBlockMeta{.key = 12, .parent_key = 11, .tokens = {7, 7}});
  EXPECT_THAT(tiers->Flush(), IsOk());
  ASSERT_EQ(tiers->Where(10), Tier::kDisk);
  ASSERT_EQ(tiers->Where(11), Tier::kDisk);
  ASSERT_EQ(tiers->Where(12), Tier::kHost);
  const BlockHasher next = [](uint64_t parent, absl::Span<const int32_t>) { return parent + 1; };
  FetchedBlocks out;
  ASSERT_EQ(tiers->FetchChain(next, 9, std::vector<int32_t>{10, 10, 11, 11, 7, 7}, 10, false, &out),
            3);
  EXPECT_EQ(out.from, (std::vector<Tier>{Tier::kDisk, Tier::kDisk, Tier::kHost}));
  ASSERT_GE(out.owned.size(), 2u);
  EXPECT_EQ(out.owned[0]->data(), out.data[0]);
  EXPECT_EQ(out.owned[1]->data(), out.data[1]);
  for (int b = 0; b < 3; ++b) EXPECT_EQ(Bytes(out.data[b]), BlockBytes(b + 1)) << "block " << b;
  ExpectClean(*tiers);
}

// A chain's disk blocks are read together on the worker thread (never the owner's);
// the chain ends before the first damaged one, which is dropped, and what the result
// already held stays as it was.
TEST_F(KvTiersTest, FetchChainReadsOnTheWorkerAndEndsBeforeADamagedBlock) {
  std::unique_ptr<KvTiers> tiers = Make(1, 4);
  tiers->OnEvictable(BlockId(1), Meta(10));
  tiers->OnEvictable(BlockId(2), TierBlockMeta{.key = 11, .parent_key = 10, .tokens = {11, 11}});
  tiers->OnEvictable(BlockId(3), TierBlockMeta{.key = 12, .parent_key = 11, .tokens = {7, 7}});
  tiers->OnEvictable(BlockId(4), TierBlockMeta{.key = 13, .parent_key = 12, .tokens = {8, 8}});
  EXPECT_THAT(tiers->Flush(), IsOk());
  ASSERT_EQ(tiers->Where(12), Tier::kDisk);
  ASSERT_EQ(tiers->Where(13), Tier::kHost);
  std::vector<std::thread::id> read_on;  // the worker's reads, seen after its wait
  tiers->disk_file()->set_read_hook_for_test(
      [&read_on](int64_t) { read_on.push_back(std::this_thread::get_id()); });
  const BlockHasher next = [](uint64_t parent, absl::Span<const int32_t>) { return parent + 1; };
  const std::vector<int32_t> tokens = {10, 10, 11, 11, 7, 7, 8, 8};
  FetchedBlocks out;
  ASSERT_EQ(tiers->FetchChain(next, 9, tokens, 10, true, &out), 4);
  EXPECT_EQ(out.from, (std::vector<Tier>{Tier::kDisk, Tier::kDisk, Tier::kDisk, Tier::kHost}));
  for (int b = 0; b < 4; ++b) EXPECT_EQ(Bytes(out.data[b]), BlockBytes(b + 1)) << "block " << b;
  ASSERT_EQ(read_on.size(), 3u);
  for (const std::thread::id id : read_on) EXPECT_NE(id, std::this_thread::get_id());

  Flip(tiers->DiskLocationOf(11), RecordBytes() - 5);
  EXPECT_EQ(tiers->FetchChain(next, 9, tokens, 10, false, &out), 1);
  EXPECT_EQ(out.keys, (std::vector<uint64_t>{10, 11, 12, 13, 10}));
  ASSERT_EQ(out.data.size(), 5u);
  ASSERT_EQ(out.from.size(), 5u);
  EXPECT_EQ(Bytes(out.data[4]), BlockBytes(1));
  for (int b = 0; b < 4; ++b) EXPECT_EQ(Bytes(out.data[b]), BlockBytes(b + 1)) << "block " << b;
  EXPECT_EQ(tiers->Stats().disk_corrupt, 1);
  EXPECT_EQ(tiers->Where(11), Tier::kDevice);
  EXPECT_EQ(tiers->Where(12), Tier::kDisk);
  EXPECT_TRUE(tiers->failed().ok());
  ExpectClean(*tiers);
}

TEST_F(KvTiersTest, ManyCopyDownsWithReusesKeepEveryCopyExact) {
  std::unique_ptr<KvTiers> tiers = Make(64, 0);
  std::vector<std::vector<std::byte>> expected;
  for (int round = 0; round < 40; ++round) {
    const int block = round % kBlocks;
    Fill(block, static_cast<uint8_t>(round * 3));
    expected.push_back(BlockBytes(block));
    tiers->OnEvictable(BlockId(block), Meta(100 + round));
    // The next round reuses the block after this one: it must be copied first.
    tiers->BeforeReuse(BlockId((round + 1) % kBlocks));
  }
  for (int round = 0; round < 40; ++round) {
    const int block = round % kBlocks;
    tiers->BeforeReuse(BlockId(block));
  }
  for (int round = 0; round < 40; ++round) {
    Tier from;
    absl::StatusOr<std::shared_ptr<const std::vector<std::byte>>> bytes =
        tiers->Fetch(100 + round, &from);
    ASSERT_THAT(bytes.status(), IsOk());
    EXPECT_EQ(**bytes, expected[round]) << "round " << round;
  }
  ExpectClean(*tiers);
}

}  // namespace
}  // namespace lockstep::kv
