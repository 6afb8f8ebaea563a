// Random configurations (ranks 2–8, max_batch_size 1–16, K 0–4, no/paired/unpaired
// draft pool, both dummy policies, aggregated or generation-only, faults on or off):
// no invariant violation, no hang, correct tokens for every completed request, pools
// back to baseline. CI runs LOCKSTEP_SIM_SEEDS seeds (default 150); the documented
// long run is `lockstep sim --seeds 1000 --random-config`.
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "gtest/gtest.h"
#include "tests/sim/scenarios.h"

namespace lockstep::sim {
namespace {

TEST(RandomConfigTest, ManySeeds) {
  int seeds = 150;
  if (const char* env = std::getenv("LOCKSTEP_SIM_SEEDS")) {
    if (!absl::SimpleAtoi(env, &seeds)) seeds = 150;
  }
  int failed = 0;
  for (int seed = 1; seed <= seeds; ++seed) {
    const SimConfig config = RandomConfig(seed);
    const SimSummary summary = RunSimulation(config);
    if (!summary.ok()) {
      ++failed;
      ADD_FAILURE() << config.ToString() << "\n"
                    << summary.ToString() << "\nreplay: lockstep sim --random-config --seed "
                    << seed;
    }
  }
  EXPECT_EQ(failed, 0);
}

}  // namespace
}  // namespace lockstep::sim
