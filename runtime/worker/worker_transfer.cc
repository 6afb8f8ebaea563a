// The KV transceiver of a context or generation rank.
#include "absl/strings/str_cat.h"
#include "runtime/worker/worker.h"

namespace lockstep::worker {

absl::StatusOr<std::unique_ptr<transfer::Transceiver>> Worker::CreateTransceiver(
    const kv::KvManager& kv, const exec::ExecutorConfig& config) {
  (void)kv;
  (void)config;
  return absl::UnimplementedError(absl::StrCat(
      "instance ", instance_->name, ": disaggregated roles need the gRPC KV transceiver"));
}

}  // namespace lockstep::worker
