// The instances' generation requests by their current K (WorkerService.Stats
// draft_k_requests, a gauge) averaged over the bench run: a gauge read once after the
// run would show only the requests left, so the bench samples it while the load runs.
//
//   DraftKSampler sampler(router_grpc, absl::Milliseconds(250));
//   RunLoad(...);
//   sampler.Stop().Fill(&deltas);
//
// DraftKAverages: thread-compatible. DraftKSampler: Stop is called by the thread that
// made it; its own thread reads and adds samples.
#ifndef LOCKSTEP_TOOLS_BENCH_DRAFT_K_SAMPLER_H_
#define LOCKSTEP_TOOLS_BENCH_DRAFT_K_SAMPLER_H_

#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "tools/bench/bench_report.h"

namespace lockstep::bench {

// Sums of samples of the gauge, per instance.
class DraftKAverages {
 public:
  // One sample: every instance's draft_k_requests as read.
  void Add(const std::map<std::string, InstanceDelta>& read);
  // Sets draft_k_request_samples and mean_draft_k_requests (entry k: the requests at
  // K = k, averaged over the instance's samples) of every sampled instance in `deltas`.
  void Fill(std::vector<InstanceDelta>* deltas) const;

 private:
  struct Sum {
    int64_t samples = 0;
    std::vector<int64_t> totals;  // by K
  };
  std::map<std::string, Sum> sums_;
};

// Reads every instance's Stats (ReadInstanceCounters) every `interval` on its own
// thread, from construction until Stop. Reads that fail are skipped.
class DraftKSampler {
 public:
  DraftKSampler(std::string router_grpc_address, absl::Duration interval);
  ~DraftKSampler();
  DraftKSampler(const DraftKSampler&) = delete;
  DraftKSampler& operator=(const DraftKSampler&) = delete;

  // Ends the sampling (after a read in progress, which its RPC deadlines bound) and
  // returns what was sampled. Once.
  DraftKAverages Stop();

 private:
  void Run();

  const std::string address_;
  const absl::Duration interval_;
  absl::Notification stop_;
  absl::Mutex mu_;
  DraftKAverages averages_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace lockstep::bench

#endif  // LOCKSTEP_TOOLS_BENCH_DRAFT_K_SAMPLER_H_
