// The load of the request-migration tests: streaming requests of four kinds — gRPC
// greedy, gRPC seeded sampling, HTTP SSE sampled with a stop string, HTTP SSE sampled
// with n = 2 — each checked against what the in-process reference engine produces for
// it without any failure: the same tokens (gRPC) or text (HTTP), no error, and usage
// that counts the prompt once and every generated token once. The test kills a rank
// while the load runs; the load knows nothing of the deployment's shape.
//
// Thread safety: Start, Finish and the accessors from the test thread; the client
// threads only bump the token counter and record failures.
#ifndef LOCKSTEP_TESTS_E2E_MIGRATION_LOAD_H_
#define LOCKSTEP_TESTS_E2E_MIGRATION_LOAD_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "runtime/launcher/local_deployment.h"
#include "tokenizer/byte_tokenizer.h"

namespace lockstep::e2e {

class MigrationLoad {
 public:
  // Plans `requests` requests from `seed` for the tiny-moe model in `model_dir` and
  // computes their reference outputs.
  static absl::StatusOr<std::unique_ptr<MigrationLoad>> Plan(const std::string& model_dir,
                                                             int requests, uint64_t seed);
  ~MigrationLoad();

  // Sends every request to `d` at once, each from a thread of its own.
  void Start(const launcher::LocalDeployment& d);
  // Tokens streamed to the gRPC clients so far (a sign of requests in mid-stream).
  int64_t grpc_tokens() const { return grpc_tokens_.load(); }
  int requests() const;
  // Waits for every request; returns what went wrong, one line per request.
  std::vector<std::string> Finish() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  enum class Kind { kGrpcGreedy, kGrpcSampled, kSseStop, kSseTwoChoices };
  struct Case;

  explicit MigrationLoad(tok::ByteTokenizer tokenizer);
  void Run(const launcher::LocalDeployment& d, int i);
  void RunGrpc(const launcher::LocalDeployment& d, int i);
  void RunSse(const launcher::LocalDeployment& d, int i);
  void Fail(int i, const std::string& what) ABSL_LOCKS_EXCLUDED(mu_);

  const tok::ByteTokenizer tokenizer_;
  std::vector<Case> cases_;
  std::vector<std::thread> clients_;
  std::atomic<int64_t> grpc_tokens_{0};
  absl::Mutex mu_;
  std::vector<std::string> failures_ ABSL_GUARDED_BY(mu_);
};

// The migrations the router's log shows (router::ParseMigrationLogLine, one line each).
struct LoggedMigrations {
  int migrations = 0;
  int mid_stream = 0;  // after tokens were already delivered: across a seam in mid-stream
  int requests = 0;    // distinct requests (one may migrate more than once)
};
LoggedMigrations ParseMigrations(const std::string& router_log);

// The kill of both migration tests: starts `load` on `d`, waits (at most 60 s) until the
// gRPC clients have 4 tokens per two requests and `busy_instance` holds at least
// `min_load` requests, SIGKILLs `process` (e.g. "agg0/rank1"), waits for every request
// and expects none failed, then ExpectMigrationsCompleted. Adds gtest failures
// (fatal when the kill could not happen); the caller checks the instances' states.
void KillUnderLoad(launcher::LocalDeployment& d, MigrationLoad& load,
                   const std::string& busy_instance, int64_t min_load, const std::string& process);

// The router's migration counters after a kill on `d`: every migrated request (its log
// names them) completed, at least one migration resumed a stream in mid-stream. Adds a
// gtest failure otherwise; prints the counts.
void ExpectMigrationsCompleted(const launcher::LocalDeployment& d);

// How many times the router's log records `instance` going from serving to unhealthy
// (router::HealthMonitor writes one line each time). Unlike the instance's state, the
// record stays once written: a state read once after a kill may still say healthy (the
// router notices within a heartbeat timeout, and the load may end before that) or say
// healthy again (a restart).
int RouterUnhealthyRecords(const launcher::LocalDeployment& d, const std::string& instance);

// After a kill on `d`: the router records `instance` unhealthy within 30 s. Adds a gtest
// failure (with the logs' tails) otherwise.
void ExpectRouterTookOut(launcher::LocalDeployment& d, const std::string& instance);

}  // namespace lockstep::e2e

#endif  // LOCKSTEP_TESTS_E2E_MIGRATION_LOAD_H_
