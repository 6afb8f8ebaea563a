// KV cache micro-benchmarks (docs/perf.md, "## kvcache"):
//   bazel run -c opt //kvcache:kvcache_bench
// Targets on the 2-core VM: block alloc+free <= 50 ns, grow by one block <= 100 ns,
// prefix lookup of a 4k-token prompt <= 5 us.
#include <chrono>
#include <cstdint>
#include <memory>
#include <numeric>
#include <vector>

#include "benchmark/benchmark.h"
#include "kvcache/block_pool.h"
#include "kvcache/kv_manager.h"

namespace lockstep::kv {
namespace {

// Metadata cost does not depend on the block size; keep storage small.
BlockLayout Layout(int tokens_per_block) {
  return BlockLayout{
      .num_layers = 1, .num_kv_heads = 1, .head_dim = 1, .tokens_per_block = tokens_per_block};
}

std::unique_ptr<KvManager> MakeManager(int tokens_per_block, int32_t num_blocks,
                                       DraftMode mode = DraftMode::kNone) {
  KvManagerConfig config;
  config.target.layout = Layout(tokens_per_block);
  config.target.num_blocks = num_blocks;
  config.draft_mode = mode;
  config.draft = config.target;
  return std::move(KvManager::Create(config).value());
}

std::vector<int32_t> Prompt(int n) {
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  std::iota(tokens.begin(), tokens.end(), 1000);
  return tokens;
}

// One block off the free list and back.
void BM_BlockAllocFree(benchmark::State& state) {
  HostAllocator allocator;
  std::unique_ptr<BlockPool> pool = BlockPool::Create(Layout(32), 1024, 0, &allocator).value();
  for (auto _ : state) {
    const std::optional<BlockId> block = pool->Allocate(/*for_dummy=*/false);
    benchmark::DoNotOptimize(block);
    pool->Unref(*block);
  }
}
BENCHMARK(BM_BlockAllocFree);

// KvManager::Resize growing a cache by one block (paired: both pools). Every 4096
// blocks the cache is released and re-created outside the timing.
void BM_GrowByOneBlock(benchmark::State& state) {
  const DraftMode mode = static_cast<DraftMode>(state.range(0));
  constexpr int kTpb = 32;
  constexpr int64_t kMaxBlocks = 4096;
  std::unique_ptr<KvManager> m = MakeManager(kTpb, kMaxBlocks, mode);
  const RequestId id(1);
  (void)m->CreateCache(id);
  int64_t capacity = 0;
  for (auto _ : state) {
    if (capacity == kMaxBlocks * kTpb) {
      state.PauseTiming();
      m->Release(id);
      (void)m->CreateCache(id);
      capacity = 0;
      state.ResumeTiming();
    }
    capacity += kTpb;
    const absl::Status status = m->Resize(id, PoolKind::kTarget, capacity, std::nullopt);
    benchmark::DoNotOptimize(status);
  }
  state.SetLabel(DraftModeName(mode));
}
BENCHMARK(BM_GrowByOneBlock)
    ->Arg(static_cast<int>(DraftMode::kNone))
    ->Arg(static_cast<int>(DraftMode::kPaired));

// Release of a 64-block cache: private blocks (back to the free list) or a published
// prefix (blocks go to the LRU list). Manual time around the Release call only.
void BM_Release64Blocks(benchmark::State& state) {
  const bool published = state.range(0) != 0;
  constexpr int kTpb = 32;
  std::unique_ptr<KvManager> m = MakeManager(kTpb, 1024);
  const std::vector<int32_t> prompt = Prompt(64 * kTpb);
  const RequestId id(1);
  for (auto _ : state) {
    (void)m->CreateCache(id);
    (void)m->Resize(id, PoolKind::kTarget, 64 * kTpb, 64 * kTpb);
    if (published) (void)m->Commit(id, prompt);
    const auto start = std::chrono::steady_clock::now();
    const int closed = m->Release(id);
    const auto end = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(closed);
    state.SetIterationTime(std::chrono::duration<double>(end - start).count());
    if (published) {
      state.PauseTiming();
      // Evict the published blocks so the next iteration publishes afresh.
      (void)m->CreateCache(RequestId(2));
      (void)m->Resize(RequestId(2), PoolKind::kTarget, 1024 * kTpb, 0);
      m->Release(RequestId(2));
      state.ResumeTiming();
    }
  }
  state.SetLabel(published ? "published" : "private");
}
BENCHMARK(BM_Release64Blocks)->Arg(0)->Arg(1)->UseManualTime();

// ProbePrefix of a 4096-token prompt whose prefix is fully committed (the worst case:
// every full block is hashed, looked up and token-compared).
void BM_PrefixLookup4k(benchmark::State& state) {
  const int tpb = static_cast<int>(state.range(0));
  std::unique_ptr<KvManager> m = MakeManager(tpb, 4096 / tpb + 8);
  const std::vector<int32_t> prompt = Prompt(4096);
  const RequestId id(1);
  (void)m->CreateCache(id);
  (void)m->Resize(id, PoolKind::kTarget, 4096, 4096);
  (void)m->Commit(id, prompt);
  int64_t reused = 0;
  for (auto _ : state) {
    reused = m->ProbePrefix(prompt);
    benchmark::DoNotOptimize(reused);
  }
  state.counters["reused_tokens"] = static_cast<double>(reused);
}
BENCHMARK(BM_PrefixLookup4k)->Arg(16)->Arg(32)->Unit(benchmark::kMicrosecond);

// CreateCache reusing that 4k prefix (lookup + references), then Release.
void BM_CreateWithReuse4kAndRelease(benchmark::State& state) {
  constexpr int kTpb = 32;
  std::unique_ptr<KvManager> m = MakeManager(kTpb, 4096 / kTpb + 8);
  const std::vector<int32_t> prompt = Prompt(4096);
  (void)m->CreateCache(RequestId(1));
  (void)m->Resize(RequestId(1), PoolKind::kTarget, 4096, 4096);
  (void)m->Commit(RequestId(1), prompt);
  m->Release(RequestId(1));
  for (auto _ : state) {
    const absl::StatusOr<int64_t> reused = m->CreateCache(RequestId(2), prompt);
    benchmark::DoNotOptimize(reused);
    m->Release(RequestId(2));
  }
}
BENCHMARK(BM_CreateWithReuse4kAndRelease)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace lockstep::kv
