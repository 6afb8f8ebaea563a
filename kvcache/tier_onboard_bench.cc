// Onboarding from the host KV tier against memcpy (issue goal: onboard >= 0.8x memcpy):
//   bazel run --config=opt //kvcache:tier_onboard_bench
// Blocks of 16 KiB (the tiny model's f32 blocks at 8 tokens), N a prefix:
//   BM_Memcpy/N        N separate host buffers into N slab blocks, one memcpy each (the
//                      baseline: what kv_tier_bench prints as memcpy)
//   BM_StreamCopy/N    the same with StreamCopy and one fence (the copier's CopyIn)
//   BM_OnboardPrefix/N KvManager::CreateCache of a prompt whose N-block prefix only the
//                      host tier holds: probe, fetch, allocation, the copies, publishing
//                      (the copy-only rate, as TierStats counts it, is the counter
//                      copy_bytes_per_second)
// Destinations are the same blocks every iteration (cached when they fit, as the pool's
// blocks are between the engine's reads). Every rate is over wall time (run with
// --benchmark_repetitions on a loaded machine and compare medians).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "benchmark/benchmark.h"
#include "common/check.h"
#include "kvcache/kv_manager.h"
#include "kvcache/stream_copy.h"

namespace lockstep::kv {
namespace {

constexpr int kTpb = 8;

BlockLayout Layout() {
  return BlockLayout{.num_layers = 2, .num_kv_heads = 2, .head_dim = 64, .tokens_per_block = kTpb};
}

struct Buffers {
  explicit Buffers(int blocks) : bytes(Layout().BlockBytes()) {
    for (int b = 0; b < blocks; ++b) sources.emplace_back(bytes, std::byte{1});
    slab.resize(bytes * static_cast<size_t>(blocks));
  }
  size_t bytes;
  std::vector<std::vector<std::byte>> sources;
  std::vector<std::byte> slab;
};

void BM_Memcpy(benchmark::State& state) {
  Buffers buf(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    for (size_t b = 0; b < buf.sources.size(); ++b) {
      std::memcpy(buf.slab.data() + b * buf.bytes, buf.sources[b].data(), buf.bytes);
    }
    benchmark::DoNotOptimize(buf.slab.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(buf.slab.size()));
}
BENCHMARK(BM_Memcpy)->Arg(8)->Arg(64)->UseRealTime();

void BM_StreamCopy(benchmark::State& state) {
  Buffers buf(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    for (size_t b = 0; b < buf.sources.size(); ++b) {
      StreamCopy(buf.slab.data() + b * buf.bytes, buf.sources[b].data(), buf.bytes);
    }
    StreamCopyFence();
    benchmark::DoNotOptimize(buf.slab.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(buf.slab.size()));
}
BENCHMARK(BM_StreamCopy)->Arg(8)->Arg(64)->UseRealTime();

void BM_OnboardPrefix(benchmark::State& state) {
  const int blocks = static_cast<int>(state.range(0));
  KvManagerConfig config;
  config.target.layout = Layout();
  config.target.num_blocks = blocks + 2;
  config.tiers.host_bytes = 4 * blocks * static_cast<int64_t>(Layout().BlockBytes());
  std::unique_ptr<KvManager> m = *KvManager::Create(config);
  std::vector<int32_t> prompt(static_cast<size_t>(blocks * kTpb + 1));
  std::iota(prompt.begin(), prompt.end(), 1000);
  const int64_t pool_tokens = static_cast<int64_t>(config.target.num_blocks) * kTpb;
  const int64_t prefix = static_cast<int64_t>(blocks) * kTpb;
  // Another cache takes the whole pool: the prompt's blocks leave the device (to the
  // host tier the first time; later they are already there).
  auto evict = [&] {
    LOCKSTEP_CHECK_OK(m->CreateCache(RequestId(2)).status());
    LOCKSTEP_CHECK_OK(m->Resize(RequestId(2), PoolKind::kTarget, pool_tokens, 0));
    m->Release(RequestId(2));
  };
  LOCKSTEP_CHECK_OK(m->CreateCache(RequestId(1)).status());
  LOCKSTEP_CHECK_OK(m->Resize(RequestId(1), PoolKind::kTarget, prefix, prefix));
  LOCKSTEP_CHECK_OK(m->Commit(RequestId(1), absl::MakeConstSpan(prompt).first(prefix)));
  m->Release(RequestId(1));
  evict();
  m->FlushTiers();
  const int64_t copy_ns_before = m->Stats().tiers.onboard_ns;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    const absl::StatusOr<int64_t> reused = m->CreateCache(RequestId(1), prompt);
    const auto end = std::chrono::steady_clock::now();
    LOCKSTEP_CHECK(reused.ok() && *reused == prefix) << reused.status();
    state.SetIterationTime(std::chrono::duration<double>(end - start).count());
    m->Release(RequestId(1));
    evict();
  }
  const int64_t bytes =
      state.iterations() * prefix / kTpb * static_cast<int64_t>(Layout().BlockBytes());
  state.SetBytesProcessed(bytes);
  const int64_t copy_ns = m->Stats().tiers.onboard_ns - copy_ns_before;
  state.counters["copy_bytes_per_second"] =
      copy_ns > 0 ? static_cast<double>(bytes) * 1e9 / static_cast<double>(copy_ns) : 0;
}
BENCHMARK(BM_OnboardPrefix)->Arg(8)->Arg(64)->UseManualTime();

}  // namespace
}  // namespace lockstep::kv
