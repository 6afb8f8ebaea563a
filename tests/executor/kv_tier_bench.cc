// The multi-turn workload on one rank (real executor, KV manager and CPU engine, the
// tiny model) with a device pool of about a quarter of the working set, with no tier, a
// host tier, and a small host tier over a disk tier: prefix hit rate (reused / prefill
// tokens), the responses' usage.cached_tokens over their prompt tokens, tokens brought
// back per tier, and TTFT p50/p99 (wall clock from submission to the first token; each
// wave queues all conversations at once), then, per run, the rank's
// tier metrics as the worker's Stats (and the router's /metrics) carry them: blocks held
// and capacity per tier, hits per tier, offload / onboard bytes and mean copy latency
// per block. docs/perf.md §KV tiers.
//
//   bazel run //tests/executor:kv_tier_bench -- [runs]   (default 3)
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/check.h"
#include "runtime/engine/cpu/cpu_engine.h"
#include "runtime/engine/cpu/testing/test_models.h"
#include "runtime/engine/model/make_model.h"
#include "runtime/executor/executor.h"
#include "tests/executor/solo_executor.h"

namespace lockstep::exec {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kTpb = 8;
constexpr int kConversations = 16;
constexpr int kTurns = 4;
constexpr int kSystemTokens = 64;
constexpr int kUserTokens = 48;
constexpr int kOutputTokens = 16;
// Final context of a conversation: system + turns x (user + output) tokens.
constexpr int kContextBlocks =
    (kSystemTokens + kTurns * (kUserTokens + kOutputTokens) + kTpb - 1) / kTpb;
constexpr int kWorkingSetBlocks = kConversations * kContextBlocks;
constexpr int kDeviceBlocks = kWorkingSetBlocks / 4;

enum class Tiers { kNone, kHost, kHostDisk };

class TimingSink : public ResponseSink {
 public:
  void OnResponses(std::vector<Response> responses) override {
    for (Response& r : responses) {
      Entry& e = entries[r.id];
      if (!r.tokens.empty() && e.tokens.empty()) {
        e.first = Clock::now();
        e.cached_prompt_tokens = r.cached_prompt_tokens;  // what the router reports
      }
      e.tokens.insert(e.tokens.end(), r.tokens.begin(), r.tokens.end());
      if (r.finished) e.finished = true;
    }
  }
  struct Entry {
    Clock::time_point first;
    int64_t cached_prompt_tokens = 0;
    std::vector<int32_t> tokens;
    bool finished = false;
  };
  absl::flat_hash_map<RequestId, Entry> entries;
};

struct RunResult {
  std::vector<double> ttft_ms;
  int64_t context_tokens = 0;
  int64_t reused_tokens = 0;
  int64_t prompt_tokens = 0;
  int64_t usage_cached_tokens = 0;  // the responses' usage.cached_tokens, summed
  int64_t onboarded_host = 0;       // tokens
  int64_t onboarded_disk = 0;
  double onboard_gbps = 0;
  double offload_gbps = 0;
  int64_t inline_offloads = 0;
  RankView::Tiers tiers;  // from the executor's snapshot, as Stats reports it
};

RunResult Run(const std::string& model_dir, Tiers tiers, uint64_t seed, const std::string& tmp) {
  ExecutorConfig config;
  config.instance = "bench";
  config.scheduler.max_batch_size = 8;
  config.scheduler.max_num_active_requests = 3;
  config.scheduler.max_num_tokens = 512;
  config.scheduler.chunk_size = 128;
  config.kv.target.layout = *engine::ModelBlockLayout(model_dir, kTpb);
  config.kv.target.num_blocks = kDeviceBlocks;
  config.kv.dummy_reserved_tokens = 1;
  const int64_t block_bytes = static_cast<int64_t>(config.kv.target.layout.BlockBytes());
  if (tiers == Tiers::kHost) config.kv.tiers.host_bytes = 2 * kWorkingSetBlocks * block_bytes;
  if (tiers == Tiers::kHostDisk) {
    config.kv.tiers.host_bytes = kDeviceBlocks * block_bytes;
    config.kv.tiers.disk_path = tmp + "/kv_disk";
    config.kv.tiers.disk_bytes = 4 * kWorkingSetBlocks * block_bytes;
  }
  TimingSink sink;
  SoloExecutor rank = MakeSoloExecutor(config, model_dir, &sink);
  Executor& executor = *rank.executor;

  std::mt19937_64 rng(seed);
  std::vector<int32_t> system = {engine::kByteBosToken};
  for (int32_t t : RandomBytes(rng, kSystemTokens - 1)) system.push_back(t);
  std::vector<std::vector<int32_t>> history(kConversations, system);
  RunResult result;
  int64_t next_id = 1;
  for (int turn = 0; turn < kTurns; ++turn) {
    std::vector<RequestId> wave;
    std::vector<Clock::time_point> submitted;
    for (int c = 0; c < kConversations; ++c) {
      for (int32_t t : RandomBytes(rng, kUserTokens)) history[c].push_back(t);
      NewRequestSpec s;
      s.id = RequestId(next_id++);
      s.prompt = history[c];
      s.sampling.max_tokens = kOutputTokens;
      s.sampling.ignore_eos = true;
      wave.push_back(s.id);
      submitted.push_back(Clock::now());
      executor.inbox().Push(std::move(s));
    }
    for (int step = 0; step < 100000; ++step) {
      bool done = true;
      for (RequestId id : wave) done = done && sink.entries[id].finished;
      if (done) break;
      LOCKSTEP_CHECK_OK(executor.Step());
    }
    for (int c = 0; c < kConversations; ++c) {
      const TimingSink::Entry& e = sink.entries[wave[c]];
      LOCKSTEP_CHECK(e.finished);
      result.ttft_ms.push_back(
          std::chrono::duration<double, std::milli>(e.first - submitted[c]).count());
      result.prompt_tokens += static_cast<int64_t>(history[c].size());
      result.usage_cached_tokens += e.cached_prompt_tokens;
      history[c].insert(history[c].end(), e.tokens.begin(), e.tokens.end());
    }
  }
  const ExecutorCounters counters = executor.counters();
  const kv::ManagerStats stats = executor.kv().Stats();
  result.context_tokens = counters.context_tokens;
  result.reused_tokens = counters.reused_tokens;
  result.onboarded_host = stats.tiers.onboarded_blocks[static_cast<int>(kv::Tier::kHost)] * kTpb;
  result.onboarded_disk = stats.tiers.onboarded_blocks[static_cast<int>(kv::Tier::kDisk)] * kTpb;
  if (stats.tiers.onboard_ns > 0) {
    result.onboard_gbps = static_cast<double>(stats.tiers.onboard_bytes()) / stats.tiers.onboard_ns;
  }
  if (stats.tiers.offload_ns > 0) {
    result.offload_gbps =
        static_cast<double>(stats.tiers.offloaded_blocks * block_bytes) / stats.tiers.offload_ns;
  }
  result.inline_offloads = stats.tiers.inline_offloads;
  const ExecutorSnapshot snapshot = executor.Snapshot();
  LOCKSTEP_CHECK(snapshot.ranks.size() == 1);
  result.tiers = snapshot.ranks[0].tiers;
  return result;
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

// memcpy bandwidth on this machine for the same copies as onboarding: one block at a
// time from separate host buffers into a pool-sized slab, GB/s (best of 5 passes). With
// `ring` > `blocks` sources, each pass copies the next `blocks` of them, so a source is
// out of cache as a host tier's block is when it comes back (256 MiB of sources).
double MemcpyGbps(size_t block_bytes, int blocks, int ring) {
  std::vector<std::vector<std::byte>> sources(static_cast<size_t>(ring),
                                              std::vector<std::byte>(block_bytes, std::byte{1}));
  std::vector<std::byte> slab(block_bytes * static_cast<size_t>(blocks));
  double best = 0;
  size_t next = 0;
  for (int pass = 0; pass < 5; ++pass) {
    const Clock::time_point start = Clock::now();
    for (int b = 0; b < blocks; ++b) {
      std::memcpy(slab.data() + static_cast<size_t>(b) * block_bytes, sources[next].data(),
                  block_bytes);
      next = (next + 1) % sources.size();
    }
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count();
    best = std::max(best, static_cast<double>(slab.size()) / ns);
  }
  LOCKSTEP_CHECK(slab[block_bytes / 2] == std::byte{1});
  return best;
}

// The tier metrics of one run: one line per tier below the device.
void PrintTierMetrics(const char* name, int run, const RankView::Tiers& t) {
  const auto us_per_block = [](int64_t ns, int64_t blocks) {
    return blocks > 0 ? static_cast<double>(ns) / 1000.0 / static_cast<double>(blocks) : 0.0;
  };
  const int64_t hits = t.host_hit_blocks + t.disk_hit_blocks;
  std::printf(
      "  %-10s %d host: %lld/%lld blocks, %lld hits; disk: %lld/%lld blocks, %lld hits, "
      "%lld corrupt; offload %.1f MiB %.2f us/block; onboard %.1f MiB %.2f us/block\n",
      name, run, static_cast<long long>(t.host_blocks),
      static_cast<long long>(t.host_capacity_blocks), static_cast<long long>(t.host_hit_blocks),
      static_cast<long long>(t.disk_blocks), static_cast<long long>(t.disk_capacity_blocks),
      static_cast<long long>(t.disk_hit_blocks), static_cast<long long>(t.disk_corrupt),
      static_cast<double>(t.offloaded_blocks * t.block_bytes) / (1 << 20),
      us_per_block(t.offload_ns, t.offloaded_blocks),
      static_cast<double>(hits * t.block_bytes) / (1 << 20), us_per_block(t.onboard_ns, hits));
}

int Main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 3;
  if (std::getenv("TEST_TMPDIR") == nullptr) {
    char pattern[] = "/tmp/kv_tier_bench.XXXXXX";
    LOCKSTEP_CHECK(mkdtemp(pattern) != nullptr);
    setenv("TEST_TMPDIR", pattern, 1);
  }
  const std::string tmp = std::getenv("TEST_TMPDIR");
  const std::string model_dir = engine::testing::PresetModelDir("tiny");
  std::printf(
      "multi-turn: %d conversations x %d turns (system %d, user %d, output %d tokens), "
      "working set %d blocks of %d tokens, device pool %d blocks\n",
      kConversations, kTurns, kSystemTokens, kUserTokens, kOutputTokens, kWorkingSetBlocks, kTpb,
      kDeviceBlocks);
  std::printf("%-10s %4s %9s %9s %10s %10s %9s %9s %10s %10s\n", "tiers", "run", "hit_rate",
              "usage", "host_hits", "disk_hits", "ttft_p50", "ttft_p99", "onb_GB/s", "off_GB/s");
  std::vector<std::pair<std::string, RankView::Tiers>> metrics;
  for (const Tiers tiers : {Tiers::kNone, Tiers::kHost, Tiers::kHostDisk}) {
    const char* name = tiers == Tiers::kNone   ? "none"
                       : tiers == Tiers::kHost ? "host"
                                               : "host+disk";
    for (int run = 0; run < runs; ++run) {
      const RunResult r = Run(model_dir, tiers, /*seed=*/1000 + run, tmp);
      if (tiers != Tiers::kNone) metrics.emplace_back(name, r.tiers);
      std::printf("%-10s %4d %9.3f %9.3f %10lld %10lld %8.1fms %8.1fms %10.2f %10.2f\n", name, run,
                  static_cast<double>(r.reused_tokens) / static_cast<double>(r.context_tokens),
                  static_cast<double>(r.usage_cached_tokens) / static_cast<double>(r.prompt_tokens),
                  static_cast<long long>(r.onboarded_host),
                  static_cast<long long>(r.onboarded_disk), Percentile(r.ttft_ms, 0.5),
                  Percentile(r.ttft_ms, 0.99), r.onboard_gbps, r.offload_gbps);
      std::fflush(stdout);
    }
  }
  const size_t block_bytes = engine::ModelBlockLayout(model_dir, kTpb)->BlockBytes();
  const int cold_ring = static_cast<int>((size_t{256} << 20) / block_bytes);
  std::printf(
      "memcpy, %zu-byte blocks into a %d-block slab: %.2f GB/s (cached sources), %.2f GB/s "
      "(sources out of cache)\n",
      block_bytes, kDeviceBlocks, MemcpyGbps(block_bytes, kDeviceBlocks, kDeviceBlocks),
      MemcpyGbps(block_bytes, kDeviceBlocks, cold_ring));
  std::printf("tier metrics (the worker's Stats / /metrics), per run:\n");
  for (size_t i = 0; i < metrics.size(); ++i) {
    PrintTierMetrics(metrics[i].first.c_str(), static_cast<int>(i % static_cast<size_t>(runs)),
                     metrics[i].second);
  }
  return 0;
}

}  // namespace
}  // namespace lockstep::exec

int main(int argc, char** argv) { return lockstep::exec::Main(argc, argv); }
