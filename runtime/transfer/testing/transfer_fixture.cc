#include "runtime/transfer/testing/transfer_fixture.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <numeric>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "common/testing/seed.h"

namespace lockstep::transfer::testing {
namespace {

using kv::PoolKind;

constexpr uint32_t kSentinel = 0x5eed5eedu;

// Spans covering blocks [0, num_blocks) of a pool whole.
std::vector<kv::BlockSpan> AllBlocks(const kv::BlockCopier& copier) {
  std::vector<kv::BlockSpan> spans;
  for (int32_t b = 0; b < copier.num_blocks(); ++b) {
    spans.push_back({BlockId(b), 0, copier.block_bytes()});
  }
  return spans;
}

// Fills a pool with 32-bit words from `seed` (0: the sentinel).
absl::Status Fill(kv::BlockCopier& copier, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> words(static_cast<size_t>(copier.num_blocks()) * copier.block_bytes() /
                              sizeof(uint32_t));
  for (uint32_t& w : words) w = seed == 0 ? kSentinel : static_cast<uint32_t>(rng());
  return copier.CopyIn({reinterpret_cast<const std::byte*>(words.data()),
                        words.size() * sizeof(uint32_t)},
                       AllBlocks(copier));
}

// The bytes of one block, read through the copier.
std::vector<std::byte> ReadBlock(kv::BlockCopier& copier, BlockId block) {
  std::vector<std::byte> out(copier.block_bytes());
  const absl::Status read = copier.CopyOut({{block, 0, out.size()}}, absl::MakeSpan(out));
  EXPECT_TRUE(read.ok()) << read;
  return out;
}

const std::vector<BlockId>& Table(const kv::BlockRefs& blocks, PoolKind kind) {
  return kind == PoolKind::kTarget ? blocks.blocks : blocks.draft_blocks;
}

bool HasPool(const kv::BlockRefs& blocks, PoolKind kind) {
  return kind == PoolKind::kTarget || blocks.draft_generation != 0;
}

}  // namespace

KvDescriptor SmallDescriptor() {
  KvDescriptor d;
  d.model = "tiny-moe-test";
  d.target =
      kv::BlockLayout{.num_layers = 2, .num_kv_heads = 2, .head_dim = 8, .tokens_per_block = 4};
  d.draft =
      kv::BlockLayout{.num_layers = 1, .num_kv_heads = 2, .head_dim = 8, .tokens_per_block = 4};
  return d;
}

absl::StatusOr<std::unique_ptr<TestRank>> MakeRank(const RankConfig& config, Clock* clock,
                                                   uint64_t seed) {
  auto rank = std::make_unique<TestRank>();
  if (config.make_allocator) {
    rank->allocator = config.make_allocator();
    if (rank->allocator == nullptr) return absl::InvalidArgumentError("make_allocator gave none");
  } else if (config.device_memory) {
    auto device = std::make_unique<kv::testing::FakeDeviceAllocator>();
    rank->device = device.get();
    rank->allocator = std::move(device);
  } else {
    rank->allocator = std::make_unique<kv::HostAllocator>();
  }
  kv::KvManagerConfig pools;
  pools.target.layout = *config.descriptor.target;
  pools.target.num_blocks = config.num_blocks;
  if (config.descriptor.draft.has_value()) {
    pools.draft_mode = kv::DraftMode::kUnpaired;
    pools.draft.layout = *config.descriptor.draft;
    pools.draft.num_blocks = config.num_blocks;
  }
  ASSIGN_OR_RETURN(rank->kv, kv::KvManager::Create(pools, rank->allocator.get()));
  RETURN_IF_ERROR(Fill(rank->copier(PoolKind::kTarget), seed));
  if (config.descriptor.draft.has_value()) {
    RETURN_IF_ERROR(Fill(rank->copier(PoolKind::kDraft), seed == 0 ? 0 : seed + 1));
  }
  GrpcTransceiverOptions options;
  options.name = config.name;
  options.descriptor = config.descriptor;
  options.copiers = CopiersOf(*rank->kv);
  options.server.chunk_bytes = config.chunk_bytes;
  options.server.max_concurrent_pulls = config.max_concurrent_pulls;
  options.max_concurrent_receives = config.max_concurrent_receives;
  options.hooks = config.hooks;
  options.server.tcp_data_plane = config.tcp_data_plane;
  options.server.data_plane = config.data_plane;
  options.pull_over_tcp = config.tcp_data_plane;
  options.ucx = config.ucx;
  options.ucx_hooks = config.ucx_hooks;
  options.server.ucx = config.ucx_server;
  ASSIGN_OR_RETURN(rank->transceiver, GrpcTransceiver::Create(std::move(options), clock));
  return rank;
}

std::vector<BlockId> RandomTable(int count, int32_t num_blocks, std::mt19937_64& rng) {
  std::vector<int32_t> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  std::vector<BlockId> table;
  for (int i = 0; i < count; ++i) table.emplace_back(ids[i]);
  return table;
}

TestBlocks RandomBlocks(RequestId id, int64_t num_tokens, const KvDescriptor& descriptor,
                        bool draft, int32_t num_blocks, int extra, std::mt19937_64& rng) {
  TestBlocks b;
  b.id = id;
  b.generation = 1000 + static_cast<uint64_t>(id.value());
  b.num_tokens = num_tokens;
  b.blocks = RandomTable(static_cast<int>(descriptor.target->BlocksFor(num_tokens)) + extra,
                         num_blocks, rng);
  if (draft) {
    b.draft_generation = 2000 + static_cast<uint64_t>(id.value());
    b.draft_blocks = RandomTable(static_cast<int>(descriptor.draft->BlocksFor(num_tokens)) + extra,
                                 num_blocks, rng);
  }
  return b;
}

std::vector<TransferEvent> AwaitEvents(TestRank& rank, size_t count, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<TransferEvent> events;
  for (;;) {
    for (TransferEvent& e : rank->Poll()) events.push_back(std::move(e));
    const absl::Time now = absl::Now();
    if (events.size() >= count || now >= deadline) return events;
    rank->WaitForEvent(std::min(deadline - now, absl::Milliseconds(200)));
  }
}

std::vector<std::string> CompareMovedBlocks(const TestRank& from_rank, const TestBlocks& from,
                                            const TestRank& to_rank, const TestBlocks& to,
                                            const KvDescriptor& descriptor) {
  std::vector<std::string> diffs;
  for (PoolKind kind : {PoolKind::kTarget, PoolKind::kDraft}) {
    if (!HasPool(from, kind)) continue;
    const kv::BlockLayout& layout = *descriptor.pool(kind);
    for (int64_t i = 0; i < layout.BlocksFor(from.num_tokens); ++i) {
      if (ReadBlock(from_rank.copier(kind), Table(from, kind)[i]) !=
          ReadBlock(to_rank.copier(kind), Table(to, kind)[i])) {
        diffs.push_back(absl::StrCat(kv::PoolKindName(kind), " block ", i, " of request ",
                                     from.id.value(), " differs"));
      }
    }
  }
  return diffs;
}

std::vector<std::string> TouchedOutside(const TestRank& rank, const std::vector<TestBlocks>& used,
                                        const KvDescriptor& descriptor) {
  std::vector<std::string> touched;
  for (PoolKind kind : {PoolKind::kTarget, PoolKind::kDraft}) {
    if (!descriptor.pool(kind).has_value()) continue;
    const kv::BlockLayout& layout = *descriptor.pool(kind);
    absl::flat_hash_set<int32_t> in_use;
    for (const TestBlocks& b : used) {
      if (!HasPool(b, kind)) continue;
      for (int64_t i = 0; i < layout.BlocksFor(b.num_tokens); ++i) {
        in_use.insert(Table(b, kind)[i].value());
      }
    }
    kv::BlockCopier& copier = rank.copier(kind);
    for (int32_t block = 0; block < copier.num_blocks(); ++block) {
      if (in_use.contains(block)) continue;
      const std::vector<std::byte> bytes = ReadBlock(copier, BlockId(block));
      for (size_t at = 0; at + sizeof(uint32_t) <= bytes.size(); at += sizeof(uint32_t)) {
        uint32_t bits;
        std::memcpy(&bits, bytes.data() + at, sizeof(bits));
        if (bits != kSentinel) {
          touched.push_back(absl::StrCat(kv::PoolKindName(kind), " block ", block));
          break;
        }
      }
    }
  }
  return touched;
}

void TransportTest::SetUp() {
  seed_ = ::lockstep::testing::TestSeed();
  rng_.seed(seed_);
}

std::unique_ptr<TestRank> TransportTest::Rank(RankConfig config, uint64_t fill_seed) {
  config.tcp_data_plane = GetParam();
  absl::StatusOr<std::unique_ptr<TestRank>> rank = MakeRank(config, &clock_, fill_seed);
  EXPECT_TRUE(rank.ok()) << rank.status();
  return rank.ok() ? std::move(*rank) : nullptr;
}

ReceiveSpec TransportTest::Receive(TestBlocks blocks, const std::string& address,
                                   RequestId remote_id, absl::Duration timeout) {
  ReceiveSpec spec;
  spec.num_tokens = blocks.num_tokens;
  spec.blocks = std::move(blocks);
  spec.source.instance = "ctx0";
  spec.source.address = address;
  spec.source.request_id = remote_id;
  spec.deadline = clock_.Now() + timeout;
  return spec;
}

std::string TransportName(const ::testing::TestParamInfo<bool>& info) {
  return info.param ? "TcpDataPlane" : "Grpc";
}

}  // namespace lockstep::transfer::testing
