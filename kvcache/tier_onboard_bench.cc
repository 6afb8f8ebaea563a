// Onboarding from the host KV tier against memcpy (issue goal: onboard >= 0.8x memcpy):
//   bazel run --config=opt //kvcache:tier_onboard_bench
// Blocks of 16 KiB (the tiny model's f32 blocks at 8 tokens), N blocks an iteration:
//   BM_Memcpy/N/ring        N separate host buffers into N slab blocks, one memcpy each
//                           (the baseline; kv_tier_bench's memcpy is BM_Memcpy/160/160)
//   BM_MemcpyFalling/N/ring the same with each iteration's N sources in descending
//                           address order
//   BM_StreamCopy/N/ring    the same with StreamCopy and one fence (the copier's CopyIn)
//   BM_OnboardPrefix/N/ring KvManager::CreateCache of a prompt whose N-block prefix only
//                           the host tier holds, given the prompt's prefix keys as the
//                           scheduler's admission gives them (made once per request):
//                           probe, fetch, allocation, the copies, publishing (the
//                           copy-only rate, as TierStats counts it, is the counter
//                           copy_bytes_per_second). Each iteration also times a memcpy
//                           of N blocks from a ring as large and as cold as the host
//                           tier's entries, right before the onboard:
//                           memcpy_bytes_per_second, and vs_memcpy (memcpy time over
//                           onboard time) compares the two under the same load; and it
//                           times hashing the prompt's keys afresh (hash_ns): with it
//                           counted in, vs_memcpy_hashed (memcpy time over onboard plus
//                           hashing time).
//   BM_OnboardDisk/N        BM_OnboardPrefix's onboard (no reference memcpy) from the disk
//                           tier: the N blocks are read from the rank's disk file
//                           (counter disk_blocks: how many of them, per onboard).
//   BM_HashPrefix/N         KvManager::HashPrefix of an (N + 1)-token-block prompt from no
//                           keys: the hashing a request's admission does once (counter
//                           sec_per_block).
// Destinations are the same blocks every iteration (cached when they fit, as the pool's
// blocks are between the engine's reads), in a slab from the pool's own allocator
// (HostAllocator: 64-byte aligned, as the onboard's blocks are); sources are separate
// block-sized vectors, as the host tier's entries are. Every rate is over wall time (run
// with --benchmark_repetitions on a loaded machine and compare medians).
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "common/check.h"
#include "kvcache/block_allocator.h"
#include "kvcache/kv_manager.h"
#include "kvcache/prefix_hash.h"
#include "kvcache/stream_copy.h"
#include "kvcache/tier_file.h"

namespace lockstep::kv {
namespace {

constexpr int kTpb = 8;

BlockLayout Layout() {
  return BlockLayout{.num_layers = 2, .num_kv_heads = 2, .head_dim = 64, .tokens_per_block = kTpb};
}

// Sources: `ring` host blocks; iteration i copies the next N of them. A ring of N: the
// same sources every time (cached); a ring of kColdRing: each source was last touched
// kColdRing / N iterations ago, 256 MiB of copies before (out of cache), as a host tier's
// blocks usually are when a prefix comes back.
constexpr int kColdRing = 16384;

struct Buffers {
  Buffers(int blocks, int ring)
      : n(blocks),
        bytes(Layout().BlockBytes()),
        slab_bytes(bytes * static_cast<size_t>(blocks)),
        slab(allocator.Allocate(slab_bytes).value()) {
    for (int b = 0; b < ring; ++b) sources.emplace_back(bytes, std::byte{1});
  }
  ~Buffers() { allocator.Free(slab, slab_bytes); }
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;
  // The next N sources into the slab's N blocks; `falling`: the N sources in descending
  // address order (as a prefix released deepest first lies in the host tier).
  template <typename Copy>
  void Step(Copy copy, bool falling = false) {
    for (size_t b = 0; b < static_cast<size_t>(n); ++b) {
      const size_t s = falling ? (next + static_cast<size_t>(n) - 1 - b) % sources.size()
                               : (next + b) % sources.size();
      copy(slab + b * bytes, sources[s].data(), bytes);
    }
    next = (next + static_cast<size_t>(n)) % sources.size();
  }
  HostAllocator allocator;
  int n;
  size_t bytes;
  size_t slab_bytes;
  std::byte* slab;  // from `allocator`, like a pool's blocks
  size_t next = 0;
  std::vector<std::vector<std::byte>> sources;
};

void BM_Memcpy(benchmark::State& state) {
  Buffers buf(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  for (auto _ : state) {
    buf.Step([](void* d, const void* s, size_t n) { std::memcpy(d, s, n); });
    benchmark::DoNotOptimize(buf.slab);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(buf.slab_bytes));
}

// BM_Memcpy with each iteration's N sources copied in descending address order.
void BM_MemcpyFalling(benchmark::State& state) {
  Buffers buf(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  for (auto _ : state) {
    buf.Step([](void* d, const void* s, size_t n) { std::memcpy(d, s, n); }, /*falling=*/true);
    benchmark::DoNotOptimize(buf.slab);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(buf.slab_bytes));
}

void BM_StreamCopy(benchmark::State& state) {
  Buffers buf(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  for (auto _ : state) {
    buf.Step(StreamCopy);
    StreamCopyFence();
    benchmark::DoNotOptimize(buf.slab);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(buf.slab_bytes));
}

// `prompts` prompts of `blocks` full blocks and one more token each, committed in a
// KvManager made from `config` (its device pool sized here to `blocks` + 2) and then
// evicted from the device pool into the tiers `config` names; each prompt's keys made
// once, as a request's are (outside any timed region).
struct EvictedPrompts {
  EvictedPrompts(KvManagerConfig config, int blocks, int prompts) {
    config.target.layout = Layout();
    config.target.num_blocks = blocks + 2;
    m = *KvManager::Create(config);
    pool_tokens = static_cast<int64_t>(config.target.num_blocks) * kTpb;
    prefix = static_cast<int64_t>(blocks) * kTpb;
    prompt.resize(static_cast<size_t>(prompts));
    for (int p = 0; p < prompts; ++p) {
      prompt[p].resize(static_cast<size_t>(prefix + 1));
      std::iota(prompt[p].begin(), prompt[p].end(), 1000 + p * (prefix + 1));
    }
    for (const std::vector<int32_t>& p : prompt) {
      LOCKSTEP_CHECK_OK(m->CreateCache(RequestId(1)).status());
      LOCKSTEP_CHECK_OK(m->Resize(RequestId(1), PoolKind::kTarget, prefix, prefix));
      LOCKSTEP_CHECK_OK(m->Commit(RequestId(1), absl::MakeConstSpan(p).first(prefix)));
      m->Release(RequestId(1));
      Evict();
    }
    LOCKSTEP_CHECK_OK(m->FlushTiers());
    keys.resize(prompt.size());
    for (size_t p = 0; p < prompt.size(); ++p) m->HashPrefix(prompt[p], &keys[p]);
  }

  // Another cache takes the whole pool: the prompts' blocks leave the device (to the
  // tiers the first time; later they are already there).
  void Evict() {
    LOCKSTEP_CHECK_OK(m->CreateCache(RequestId(2)).status());
    LOCKSTEP_CHECK_OK(m->Resize(RequestId(2), PoolKind::kTarget, pool_tokens, 0));
    m->Release(RequestId(2));
  }

  std::unique_ptr<KvManager> m;
  int64_t pool_tokens = 0;
  int64_t prefix = 0;  // tokens in a prompt's full blocks
  std::vector<std::vector<int32_t>> prompt;
  std::vector<PrefixKeys> keys;
};

void BM_OnboardPrefix(benchmark::State& state) {
  const int blocks = static_cast<int>(state.range(0));
  const int prompts = std::max<int>(1, static_cast<int>(state.range(1)) / blocks);
  const size_t block_bytes = Layout().BlockBytes();
  KvManagerConfig config;
  config.tiers.host_bytes = (prompts + 2) * blocks * static_cast<int64_t>(block_bytes);
  EvictedPrompts evicted(config, blocks, prompts);
  KvManager* m = evicted.m.get();
  const int64_t prefix = evicted.prefix;
  const std::vector<std::vector<int32_t>>& prompt = evicted.prompt;
  const std::vector<PrefixKeys>& keys = evicted.keys;
  const int64_t copy_ns_before = m->Stats().tiers.onboard_ns;
  // The same hashing as `keys` into `scratch` is timed on its own each iteration.
  PrefixKeys scratch;
  size_t next = 0;
  Buffers reference(blocks, prompts * blocks);
  double memcpy_s = 0;
  double onboard_s = 0;
  double hash_s = 0;
  for (auto _ : state) {
    const auto copy_start = std::chrono::steady_clock::now();
    reference.Step([](void* d, const void* s, size_t n) { std::memcpy(d, s, n); });
    benchmark::DoNotOptimize(reference.slab);
    benchmark::ClobberMemory();
    memcpy_s +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - copy_start).count();
    const auto hash_start = std::chrono::steady_clock::now();
    scratch.Clear();
    m->HashPrefix(prompt[next], &scratch);
    benchmark::DoNotOptimize(scratch.keys().data());
    hash_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - hash_start).count();
    const auto start = std::chrono::steady_clock::now();
    const absl::StatusOr<int64_t> reused = m->CreateCache(RequestId(1), prompt[next], keys[next]);
    const auto end = std::chrono::steady_clock::now();
    LOCKSTEP_CHECK(reused.ok() && *reused == prefix) << reused.status();
    state.SetIterationTime(std::chrono::duration<double>(end - start).count());
    onboard_s += std::chrono::duration<double>(end - start).count();
    m->Release(RequestId(1));
    evicted.Evict();
    next = (next + 1) % prompt.size();
  }
  const int64_t bytes = state.iterations() * blocks * static_cast<int64_t>(block_bytes);
  state.SetBytesProcessed(bytes);
  const int64_t copy_ns = m->Stats().tiers.onboard_ns - copy_ns_before;
  state.counters["copy_bytes_per_second"] =
      copy_ns > 0 ? static_cast<double>(bytes) * 1e9 / static_cast<double>(copy_ns) : 0;
  state.counters["memcpy_bytes_per_second"] =
      memcpy_s > 0 ? static_cast<double>(bytes) / memcpy_s : 0;
  state.counters["vs_memcpy"] = onboard_s > 0 ? memcpy_s / onboard_s : 0;
  state.counters["vs_memcpy_hashed"] = onboard_s > 0 ? memcpy_s / (onboard_s + hash_s) : 0;
  state.counters["hash_ns"] =
      state.iterations() > 0 ? hash_s * 1e9 / static_cast<double>(state.iterations()) : 0;
}

// Hashing an (N + 1)-token-block prompt's N full blocks from no keys (PrefixKeys keeps
// its memory, as a request's does once made).
void BM_HashPrefix(benchmark::State& state) {
  const int blocks = static_cast<int>(state.range(0));
  KvManagerConfig config;
  config.target.layout = Layout();
  config.target.num_blocks = blocks + 2;
  std::unique_ptr<KvManager> m = *KvManager::Create(config);
  std::vector<int32_t> prompt(static_cast<size_t>(blocks) * kTpb + 1);
  std::iota(prompt.begin(), prompt.end(), 1000);
  PrefixKeys keys;
  for (auto _ : state) {
    keys.Clear();
    m->HashPrefix(prompt, &keys);
    benchmark::DoNotOptimize(keys.keys().data());
    benchmark::ClobberMemory();
  }
  LOCKSTEP_CHECK(static_cast<int>(keys.keys().size()) == blocks);
  state.SetItemsProcessed(state.iterations() * blocks);
  state.counters["sec_per_block"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * blocks,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// BM_OnboardPrefix with the prefix on the disk tier: a one-block host tier spills every
// evicted block to the disk file, so each onboard reads its N blocks back (pread from
// the page cache, then verified). Four prompts in turn; the counter disk_blocks is the
// blocks an onboard read from disk (at most one of the N comes from the host tier).
void BM_OnboardDisk(benchmark::State& state) {
  const int blocks = static_cast<int>(state.range(0));
  constexpr int kPrompts = 4;
  const size_t block_bytes = Layout().BlockBytes();
  KvManagerConfig config;
  config.tiers.host_bytes = static_cast<int64_t>(block_bytes);
  const char* tmp = std::getenv("TMPDIR");
  config.tiers.disk_path = std::string(tmp != nullptr ? tmp : "/tmp") + "/tier_onboard_bench";
  config.tiers.disk_bytes =
      (kPrompts + 1) * blocks * static_cast<int64_t>(TierFileBytes(kTpb, block_bytes));
  EvictedPrompts evicted(config, blocks, kPrompts);
  KvManager* m = evicted.m.get();
  const int64_t prefix = evicted.prefix;
  const std::vector<std::vector<int32_t>>& prompt = evicted.prompt;
  const std::vector<PrefixKeys>& keys = evicted.keys;
  const int64_t disk_before = m->Stats().tiers.onboarded_blocks[static_cast<int>(Tier::kDisk)];
  size_t next = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    const absl::StatusOr<int64_t> reused = m->CreateCache(RequestId(1), prompt[next], keys[next]);
    const auto end = std::chrono::steady_clock::now();
    LOCKSTEP_CHECK(reused.ok() && *reused == prefix) << reused.status();
    state.SetIterationTime(std::chrono::duration<double>(end - start).count());
    m->Release(RequestId(1));
    evicted.Evict();
    next = (next + 1) % prompt.size();
  }
  LOCKSTEP_CHECK_OK(m->FlushTiers());
  const int64_t disk = m->Stats().tiers.onboarded_blocks[static_cast<int>(Tier::kDisk)];
  state.SetBytesProcessed(state.iterations() * blocks * static_cast<int64_t>(block_bytes));
  state.counters["disk_blocks"] =
      state.iterations() > 0
          ? static_cast<double>(disk - disk_before) / static_cast<double>(state.iterations())
          : 0;
}

// {N, ring}: hot and cold sources, 8 and 64 blocks.
void Shapes(benchmark::internal::Benchmark* b) {
  for (const int n : {8, 64}) {
    for (const int ring : {n, kColdRing}) b->Args({n, ring});
  }
}
BENCHMARK(BM_Memcpy)->Apply(Shapes)->UseRealTime();
BENCHMARK(BM_MemcpyFalling)->Apply(Shapes)->UseRealTime();
BENCHMARK(BM_StreamCopy)->Apply(Shapes)->UseRealTime();
BENCHMARK(BM_OnboardPrefix)->Apply(Shapes)->UseManualTime();
BENCHMARK(BM_HashPrefix)->Arg(8)->Arg(64);
BENCHMARK(BM_OnboardDisk)->Arg(8)->Arg(64)->UseManualTime();

}  // namespace
}  // namespace lockstep::kv
