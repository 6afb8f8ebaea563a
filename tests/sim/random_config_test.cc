// Random configurations (ranks 2–8, max_batch_size 1–16, K 0–4, no/paired/unpaired
// draft pool or the n-gram drafter, MTP over a paired draft pool (the audit compares
// the MTP pool with its target every step), fixed or dynamic K, both dummy policies, aggregated,
// generation-only or context-only, faults on or off, prefix reuse mostly on, independent
// requests or multi-turn conversations, a host KV tier below a tiny device pool): no
// invariant violation (the KV audit covers the tiers), no hang, correct tokens
// for every completed request, every request answered once, every failure or
// cancellation explained by a fault the run injected into that request, pools back to
// baseline. CI runs LOCKSTEP_SIM_SEEDS seeds (default 150); the documented long run is
// `lockstep sim --seeds 1000 --random-config`.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kvcache/kv_types.h"
#include "runtime/sim/scenarios.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::sim {
namespace {

TEST(RandomConfigTest, ManySeeds) {
  int seeds = 150;
  if (const char* env = std::getenv("LOCKSTEP_SIM_SEEDS")) {
    if (!absl::SimpleAtoi(env, &seeds)) seeds = 150;
  }
  int failed = 0;
  int64_t send_refusals = 0, failed_requests = 0, cancelled = 0;
  // Prefix tokens reused in multi-turn runs with reuse on, by drafter and draft pool.
  std::map<std::string, int64_t> reused;
  int64_t mirror_reused = 0, unpaired_reused = 0;  // unpaired: mirrors' and targets'
  int64_t tier_configs = 0, tier_onboarded = 0;    // host tier on: configurations, tokens back
  // Dynamic K by drafter: configurations drawn, and generation steps below the drawn K
  // (dynamic K moved) and at it.
  std::map<std::string, int64_t> dynamic_configs, dynamic_below_k, dynamic_at_k;
  // MTP configurations (paired draft pool), the pad dummies they forwarded and the
  // drafts their verifications accepted.
  int64_t mtp_configs = 0, mtp_padded_steps = 0, mtp_accepted = 0;
  for (int seed = 1; seed <= seeds; ++seed) {
    const SimConfig config = RandomConfig(seed);
    const SimSummary summary = RunSimulation(config);
    send_refusals += summary.send_refusals;
    if (config.host_tier_blocks > 0) {
      ++tier_configs;
      tier_onboarded += summary.tier_onboarded_tokens;
    }
    failed_requests += summary.failed;
    cancelled += summary.cancelled;
    if (config.scheduler.prefix_reuse && config.workload.conversations > 0 &&
        config.role != sched::InstanceRole::kGeneration) {
      const spec::SpeculativeConfig& s = config.scheduler.speculative;
      const std::string mode = !s.enabled() ? "no speculation"
                                            : absl::StrCat(spec::MethodName(s.method), "/",
                                                           kv::DraftModeName(config.draft_mode));
      reused[mode] += summary.reused_tokens;
      if (config.draft_mode == kv::DraftMode::kUnpaired) {
        mirror_reused += summary.mirror_reused_tokens;
        unpaired_reused += summary.kv_reused_tokens;
      }
    }
    if (config.scheduler.speculative.method == spec::Method::kMtp) {
      EXPECT_EQ(config.draft_mode, kv::DraftMode::kPaired) << "seed " << seed;
      ++mtp_configs;
      mtp_padded_steps += summary.padded_steps;
      mtp_accepted += summary.drafts_accepted;
    }
    if (const spec::SpeculativeConfig& s = config.scheduler.speculative; s.dynamic) {
      const std::string method = spec::MethodName(s.method);
      ++dynamic_configs[method];
      for (int k = 0; k < s.num_draft_tokens; ++k) {
        dynamic_below_k[method] += summary.draft_k_steps[k];
      }
      dynamic_at_k[method] += summary.draft_k_steps[s.num_draft_tokens];
    }
    if (!summary.ok()) {
      ++failed;
      ADD_FAILURE() << config.ToString() << "\n"
                    << summary.ToString() << "\nreplay: lockstep sim --random-config --seed "
                    << seed;
    }
  }
  EXPECT_EQ(failed, 0);
  // The fault mix is exercised (every failure above was checked against its cause).
  if (seeds >= 50) {
    EXPECT_GT(send_refusals, 0);
    EXPECT_GT(failed_requests, send_refusals);  // transfer failures too
    EXPECT_GT(cancelled, 0);
  }
  // Reuse ran, and reused, with every drafter and draft pool.
  if (seeds >= 100) {
    for (const char* mode :
         {"no speculation", "draft_model/paired", "draft_model/unpaired", "ngram/none"}) {
      EXPECT_GT(reused[mode], 0) << mode;
    }
    // Mirrors reused too, and sometimes less than their targets (a draft prefix ran).
    EXPECT_GT(mirror_reused, 0);
    EXPECT_LT(mirror_reused, unpaired_reused);
    // Host tiers were drawn and brought evicted prefixes back.
    EXPECT_GT(tier_configs, 0);
    EXPECT_GT(tier_onboarded, 0);
    // MTP was drawn, padded and accepted drafts; reuse ran with it too.
    EXPECT_GT(mtp_configs, 0);
    EXPECT_GT(mtp_padded_steps, 0);
    EXPECT_GT(mtp_accepted, 0);
    EXPECT_GT(reused["mtp/paired"], 0);
    // Dynamic K ran with both drafters, and moved: steps at the drawn K and below it.
    for (const char* method : {"draft_model", "ngram"}) {
      EXPECT_GT(dynamic_configs[method], 0) << method;
      EXPECT_GT(dynamic_at_k[method], 0) << method;
      EXPECT_GT(dynamic_below_k[method], 0) << method;
    }
  }
  for (const auto& [method, configs] : dynamic_configs) {
    std::printf(
        "dynamic K, %s: %lld configurations, %lld generation steps below the drawn K, "
        "%lld at it\n",
        method.c_str(), static_cast<long long>(configs),
        static_cast<long long>(dynamic_below_k[method]),
        static_cast<long long>(dynamic_at_k[method]));
  }
  std::printf("mtp: %lld configurations, %lld padded steps, %lld drafts accepted\n",
              static_cast<long long>(mtp_configs), static_cast<long long>(mtp_padded_steps),
              static_cast<long long>(mtp_accepted));
  std::printf("host tier: %lld configurations, %lld prefix tokens brought back\n",
              static_cast<long long>(tier_configs), static_cast<long long>(tier_onboarded));
  std::printf("unpaired: mirrors reused %lld of their targets' %lld\n",
              static_cast<long long>(mirror_reused), static_cast<long long>(unpaired_reused));
  for (const auto& [mode, tokens] : reused) {
    std::printf("multi-turn, reuse on, %s: %lld prefix tokens reused\n", mode.c_str(),
                static_cast<long long>(tokens));
  }
}

}  // namespace
}  // namespace lockstep::sim
