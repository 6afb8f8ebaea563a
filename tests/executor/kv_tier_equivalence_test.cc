// KV tiers change nothing a client can see: through the real executor, KV manager and
// CPU engine (the tiny transformer), multi-turn conversations on a small device pool,
// with long unrelated prompts between turns that evict the conversations' prefixes,
// give the same greedy tokens with a host tier, and with a host + disk tier, as with
// no tier, token for token; the tiers bring evicted prefixes back (more tokens reused)
// and the audit (tiers included) holds after every step.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "runtime/engine/cpu/cpu_engine.h"
#include "runtime/engine/cpu/testing/test_models.h"
#include "runtime/engine/model/make_model.h"
#include "runtime/executor/executor.h"
#include "tests/executor/outcome_sink.h"
#include "tests/executor/solo_executor.h"

namespace lockstep::exec {
namespace {

using ::lockstep::engine::testing::PresetModelDir;
using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;

constexpr int kTpb = 8;
constexpr int kConversations = 4;
constexpr int kTurns = 3;
constexpr int kMaxTokens = 8;
constexpr int32_t kDeviceBlocks = 128;

enum class Tiers { kNone, kHost, kHostDisk };

const char* TiersName(Tiers tiers) {
  return tiers == Tiers::kNone ? "none" : tiers == Tiers::kHost ? "host" : "host+disk";
}

RunOutcomes RunConversations(Tiers tiers, uint64_t seed) {
  const std::string dir = PresetModelDir("tiny");
  ExecutorConfig config;
  config.instance = "tiers";
  config.audit_every_step = true;
  config.scheduler.max_batch_size = 8;
  config.scheduler.max_num_active_requests = 6;
  config.scheduler.max_num_tokens = 512;
  config.scheduler.chunk_size = 48;
  config.kv.target.layout = *engine::ModelBlockLayout(dir, kTpb);
  config.kv.target.num_blocks = kDeviceBlocks;
  config.kv.dummy_reserved_tokens = 1;
  const int64_t block_bytes = static_cast<int64_t>(config.kv.target.layout.BlockBytes());
  if (tiers != Tiers::kNone) {
    // Host: room for every conversation; with a disk tier, only a few blocks, so most
    // evicted blocks go on to disk and come back from there.
    config.kv.tiers.host_bytes = (tiers == Tiers::kHost ? 1024 : 8) * block_bytes;
  }
  if (tiers == Tiers::kHostDisk) {
    config.kv.tiers.disk_path = std::string(std::getenv("TEST_TMPDIR")) + "/kv_disk";
    config.kv.tiers.disk_bytes = 4096 * block_bytes;
  }
  OutcomeSink sink;
  SoloExecutor rank = MakeSoloExecutor(config, dir, &sink);

  std::mt19937_64 rng(seed);
  std::vector<int32_t> system = {engine::kByteBosToken};
  for (int32_t t : RandomBytes(rng, 40)) system.push_back(t);
  std::vector<std::vector<int32_t>> history(kConversations, system);
  std::vector<RequestId> order;
  auto run_wave = [&](std::vector<NewRequestSpec> specs) {
    for (NewRequestSpec& s : specs) s.sampling = {.max_tokens = kMaxTokens, .ignore_eos = true};
    return RunWave(*rank.executor, sink, std::move(specs), 5000, TiersName(tiers), order);
  };
  for (int turn = 0; turn < kTurns; ++turn) {
    std::vector<NewRequestSpec> specs(kConversations);
    for (int c = 0; c < kConversations; ++c) {
      for (int32_t t : RandomBytes(rng, 5 + static_cast<int>(rng() % 12))) {
        history[c].push_back(t);
      }
      specs[c].prompt = history[c];
    }
    const std::vector<RequestId> wave = run_wave(std::move(specs));
    for (int c = 0; c < kConversations; ++c) {
      const std::vector<int32_t>& out = sink.outcomes[wave[c]].tokens;
      history[c].insert(history[c].end(), out.begin(), out.end());
    }
    // Long unrelated prompts, one after the other: each needs most of the device pool,
    // so the conversations' blocks are evicted (and, with tiers, copied down).
    for (int n = 0; n < 2; ++n) {
      std::vector<NewRequestSpec> noise(1);
      noise[0].prompt = RandomBytes(rng, kDeviceBlocks * kTpb - 3 * kTpb);
      run_wave(std::move(noise));
    }
  }
  return CollectOutcomes(*rank.executor, sink, order);
}

TEST(KvTierEquivalenceTest, TiersOnEqualTiersOffTokenForToken) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  const RunOutcomes off = RunConversations(Tiers::kNone, seed);
  ASSERT_EQ(off.outcomes.size(), static_cast<size_t>(kTurns * (kConversations + 2)));
  for (const Tiers tiers : {Tiers::kHost, Tiers::kHostDisk}) {
    const char* name = TiersName(tiers);
    SCOPED_TRACE(name);
    const RunOutcomes on = RunConversations(tiers, seed);
    ASSERT_EQ(on.outcomes.size(), off.outcomes.size());
    for (size_t i = 0; i < on.outcomes.size(); ++i) {
      EXPECT_THAT(on.outcomes[i].status, IsOk()) << "request " << i;
      ASSERT_EQ(on.outcomes[i].tokens.size(), static_cast<size_t>(kMaxTokens)) << "request " << i;
      EXPECT_EQ(on.outcomes[i].tokens, off.outcomes[i].tokens) << "request " << i;
    }
    EXPECT_EQ(on.counters.engine_failures, 0);
    EXPECT_EQ(on.counters.audit_violations, 0);
    EXPECT_GT(on.kv.onboarded_tokens, 0);
    EXPECT_GT(on.counters.reused_tokens, off.counters.reused_tokens)
        << "evicted prefixes come back from the tier instead of being recomputed";
    EXPECT_EQ(on.kv.tiers.disk_corrupt, 0);
    if (tiers == Tiers::kHostDisk) {
      EXPECT_GT(on.kv.tiers.onboarded_blocks[static_cast<int>(kv::Tier::kDisk)], 0);
    }
    std::printf("%s: reused %lld of %lld prefill tokens (no tier: %lld), onboarded %lld\n", name,
                static_cast<long long>(on.counters.reused_tokens),
                static_cast<long long>(on.counters.context_tokens),
                static_cast<long long>(off.counters.reused_tokens),
                static_cast<long long>(on.kv.onboarded_tokens));
  }
}

}  // namespace
}  // namespace lockstep::exec
