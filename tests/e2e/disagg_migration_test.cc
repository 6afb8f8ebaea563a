// Request migration, disaggregated serving: a context DEP2 instance and two generation
// DEP2 instances (K = 3 draft tokens, unpaired draft pools, the audit on every step)
// serve 64 streaming requests of four kinds (migration_load.h), and the leader rank of
// gen0 is killed (SIGKILL) while they stream. The router retries each broken
// generation leg on gen1 after a fresh context leg of its continuation: no client sees
// an error, every output equals the reference engine's (no speculation, no failure)
// token for token, and once the load is done neither surviving instance holds a block
// (the failed attempts' transfer claims were released).

#include <memory>
#include <string>
#include <vector>

#include "common/testing/seed.h"
#include "gtest/gtest.h"
#include "runtime/launcher/local_deployment.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/migration_load.h"

namespace lockstep::e2e {
namespace {

TEST(DisaggMigrationTest, KilledGenerationRankLosesNoRequestAndEveryOutputIsTheReference) {
  const uint64_t seed = lockstep::testing::TestSeed();
  SCOPED_TRACE(lockstep::testing::SeedTrace(seed));
  const std::string tmp = TestTmpDir();
  const std::string model = tmp + "/models/tiny-moe";
  ASSERT_TRUE(EnsureTinyMoe(model).ok());
  absl::StatusOr<std::unique_ptr<MigrationLoad>> load = MigrationLoad::Plan(model, 64, seed);
  ASSERT_TRUE(load.ok()) << load.status();
  DisaggOptions options;
  options.generation = {{"gen0", 2}, {"gen1", 2}};
  options.generation_max_batch_size = 8;
  options.generation_max_active_requests = 32;
  absl::StatusOr<std::unique_ptr<launcher::LocalDeployment>> started =
      launcher::LocalDeployment::Start(DisaggYaml(model, options), tmp + "/run", LockstepBinary(),
                                       absl::Seconds(180));
  ASSERT_TRUE(started.ok()) << started.status();
  launcher::LocalDeployment& d = **started;

  // Once both generation instances stream, kill gen0's leader: its streams break.
  KillUnderLoad(d, **load, "gen0", 4, "gen0/rank0");
  // The router took gen0 out (its record of it, not gen0's state at one moment).
  ExpectRouterTookOut(d, "gen0");
  std::string problems;
  EXPECT_TRUE(d.WaitFor(
      [&] {
        problems = CheckAtRest(d, "ctx0") + CheckAtRest(d, "gen1");
        return problems.empty();
      },
      absl::Seconds(20)))
      << problems;
}

}  // namespace
}  // namespace lockstep::e2e
