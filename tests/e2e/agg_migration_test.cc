// Request migration, aggregated serving: two aggregated DEP2 instances serve 64
// streaming requests — gRPC greedy, gRPC seeded sampling, HTTP SSE with a stop string,
// HTTP SSE with n = 2 — and one rank of agg0 is killed (SIGKILL) while they stream.
// No client sees an error, and every output equals, token for token (the text for
// HTTP), what the in-process engine produces for the same request without any
// failure; usage counts the prompt once and every generated token once. The router
// counts the migrations and the migrated requests that completed. agg_migration_shm_test
// runs the same over shm: the killed rank's peer finds it gone through the segment.

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/seed.h"
#include "gtest/gtest.h"
#include "runtime/launcher/local_deployment.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/migration_load.h"

namespace lockstep::e2e {
namespace {

std::string Yaml(const std::string& model_dir) {
  std::string instances;
  for (const char* name : {"agg0", "agg1"}) {
    absl::StrAppend(&instances, "  - name: ", name, R"(
    role: aggregated
    world_size: 2
    engine: cpu
    executor: {max_batch_size: 32, max_num_tokens: 1024, max_num_active_requests: 64,
               chunk_size: 64, step_timeout_ms: 3000}
    kv: {tokens_per_block: 16, num_blocks: 512}
)",
                    CommSettings(kE2eComm));
  }
  return absl::StrCat(R"(model:
  name: tiny-moe
  path: )",
                      model_dir, R"(
router:
  policy: round_robin
  heartbeat_interval_ms: 200
  heartbeat_timeout_ms: 1500
  health_check_interval_ms: 200
instances:
)",
                      instances);
}

TEST(AggMigrationTest, KilledRankLosesNoRequestAndEveryOutputIsTheReference) {
  const uint64_t seed = lockstep::testing::TestSeed();
  SCOPED_TRACE(lockstep::testing::SeedTrace(seed));
  const std::string tmp = TestTmpDir();
  const std::string model = tmp + "/models/tiny-moe";
  ASSERT_TRUE(EnsureTinyMoe(model).ok());
  absl::StatusOr<std::unique_ptr<MigrationLoad>> load = MigrationLoad::Plan(model, 64, seed);
  ASSERT_TRUE(load.ok()) << load.status();
  absl::StatusOr<std::unique_ptr<launcher::LocalDeployment>> started =
      launcher::LocalDeployment::Start(Yaml(model), tmp + "/run", LockstepBinary(),
                                       absl::Seconds(120));
  ASSERT_TRUE(started.ok()) << started.status();
  launcher::LocalDeployment& d = **started;
  EXPECT_EQ(CheckTransport(d, kE2eComm), "");

  // Once both instances stream, kill rank 1 of agg0: its leader fails the requests it
  // holds, the router resumes them on agg1.
  KillUnderLoad(d, **load, "agg0", 8, "agg0/rank1");
  // The router took agg0 out (its record of it, not agg0's state at one moment).
  ExpectRouterTookOut(d, "agg0");
  // agg1 lost nothing: it is healthy (waited for: on a loaded machine a late heartbeat
  // may take it out for a moment) and both its ranks still run.
  EXPECT_TRUE(d.WaitFor([&] { return d.InstanceState("agg1") == "healthy"; }, absl::Seconds(30)))
      << LogTails(d);
  EXPECT_GT(d.PidOf("agg1/rank0"), 0);
  EXPECT_GT(d.PidOf("agg1/rank1"), 0);
}

}  // namespace
}  // namespace lockstep::e2e
