// Random configurations (ranks 2–8, max_batch_size 1–16, K 0–4, no/paired/unpaired
// draft pool, both dummy policies, aggregated, generation-only or context-only, faults
// on or off): no invariant violation, no hang, correct tokens for every completed
// request, every request answered once, every failure or cancellation explained by a
// fault the run injected into that request, pools back to baseline. CI runs
// LOCKSTEP_SIM_SEEDS seeds (default 150); the documented long run is
// `lockstep sim --seeds 1000 --random-config`.
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "gtest/gtest.h"
#include "runtime/sim/scenarios.h"

namespace lockstep::sim {
namespace {

TEST(RandomConfigTest, ManySeeds) {
  int seeds = 150;
  if (const char* env = std::getenv("LOCKSTEP_SIM_SEEDS")) {
    if (!absl::SimpleAtoi(env, &seeds)) seeds = 150;
  }
  int failed = 0;
  int64_t send_refusals = 0, failed_requests = 0, cancelled = 0;
  for (int seed = 1; seed <= seeds; ++seed) {
    const SimConfig config = RandomConfig(seed);
    const SimSummary summary = RunSimulation(config);
    send_refusals += summary.send_refusals;
    failed_requests += summary.failed;
    cancelled += summary.cancelled;
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
}

}  // namespace
}  // namespace lockstep::sim
