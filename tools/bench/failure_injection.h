// Failure injection for `lockstep bench --kill PROCESS`: once the load streams, SIGKILL
// one process of the deployment the bench started, and measure from the client's side
// how long each request the router migrated (runtime/router/core/migration.h) waited from
// the kill to its next token — the first token of its continuation, the token after
// the ones the router had delivered when it noticed the failure (tokens already on
// their way to the client do not count) — and, as the baseline of the same run, how
// long the requests streaming elsewhere at the kill waited for their next token.
//
// Thread safety: FailureInjector's methods from the thread that made it; its own
// thread only reads the counter and sends the signal.
#ifndef LOCKSTEP_TOOLS_BENCH_FAILURE_INJECTION_H_
#define LOCKSTEP_TOOLS_BENCH_FAILURE_INJECTION_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "runtime/launcher/local_deployment.h"
#include "runtime/router/core/migration.h"
#include "tools/bench/load_generator.h"

namespace lockstep::bench {

struct KillPlan {
  std::string process;             // "agg0/rank1": a process of the started deployment
  int64_t after_tokens = 0;        // kill once the clients received this many tokens
};

class FailureInjector {
 public:
  // Waits on a thread of its own, at most `timeout`, until `tokens` reaches the plan's
  // count, then kills the process. `d` and `tokens` must outlive this.
  FailureInjector(const launcher::LocalDeployment& d, KillPlan plan,
                  const std::atomic<int64_t>& tokens, absl::Duration timeout);
  ~FailureInjector();

  const KillPlan& plan() const { return plan_; }
  // Joins the thread; then when the process was killed, or why it was not.
  absl::StatusOr<absl::Time> Finish();

 private:
  const KillPlan plan_;
  std::thread thread_;
  absl::StatusOr<absl::Time> killed_at_ = absl::UnknownError("not finished");
};

// The figures of one kill: the migrated requests found in the router's log, joined by
// response id ("cmpl-N") with the outcomes (which must have token times), and the
// router's migration counters from its /metrics text.
nlohmann::json FailureReport(const KillPlan& plan, absl::Time killed_at,
                             const LoadResult& result,
                             const std::vector<router::MigrationRecord>& migrations,
                             absl::string_view router_metrics);
std::string FormatFailureReport(const nlohmann::json& failure);

// The migration records of the router's log text.
std::vector<router::MigrationRecord> MigrationsInLog(absl::string_view router_log);

}  // namespace lockstep::bench

#endif  // LOCKSTEP_TOOLS_BENCH_FAILURE_INJECTION_H_
