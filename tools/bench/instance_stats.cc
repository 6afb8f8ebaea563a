#include "tools/bench/instance_stats.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "proto/router.grpc.pb.h"
#include "proto/worker.grpc.pb.h"
#include "runtime/config/role_wire.h"
#include "runtime/security/grpc_credentials.h"

namespace lockstep::bench {
namespace {

std::string RoleName(v1::InstanceRole role) {
  absl::StatusOr<config::InstanceRole> r = config::RoleFromWire(role);
  return r.ok() ? std::string(config::InstanceRoleName(*r)) : "unknown";
}

}  // namespace

absl::StatusOr<std::map<std::string, InstanceDelta>> ReadInstanceCounters(
    const std::string& router_grpc_address) {
  auto router = v1::RouterService::NewStub(
      security::CreateChannel(router_grpc_address));
  grpc::ClientContext list_context;
  list_context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  v1::ListInstancesResponse list;
  const grpc::Status listed =
      router->ListInstances(&list_context, v1::ListInstancesRequest(), &list);
  if (!listed.ok()) {
    return absl::UnavailableError(
        absl::StrCat("ListInstances on ", router_grpc_address, ": ", listed.error_message()));
  }
  std::map<std::string, InstanceDelta> out;
  for (const v1::InstanceInfo& info : list.instances()) {
    // An instance without a leader, or whose leader does not answer (killed), has no
    // counters to report.
    if (info.leader_address().empty()) continue;
    auto worker = v1::WorkerService::NewStub(security::CreateChannel(info.leader_address()));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    v1::StatsResponse stats;
    if (!worker->Stats(&context, v1::StatsRequest(), &stats).ok()) continue;
    InstanceDelta d;
    d.name = info.name();
    d.role = RoleName(info.role());
    d.steps = stats.steps();
    d.vetoed_steps = stats.vetoed_steps();
    d.padded_steps = stats.padded_steps();
    d.drafts_proposed = stats.draft_tokens_proposed();
    d.drafts_accepted = stats.draft_tokens_accepted();
    for (const v1::DraftTokens& drafts : stats.drafts_by_method()) {
      d.drafts_by_method[drafts.method()] = {drafts.proposed(), drafts.accepted()};
    }
    d.draft_k_steps.assign(stats.draft_k_steps().begin(), stats.draft_k_steps().end());
    d.draft_k_requests.assign(stats.draft_k_requests().begin(), stats.draft_k_requests().end());
    d.draft_position_proposed.assign(stats.draft_position_proposed().begin(),
                                     stats.draft_position_proposed().end());
    d.draft_position_accepted.assign(stats.draft_position_accepted().begin(),
                                     stats.draft_position_accepted().end());
    d.generated_tokens = stats.generated_tokens();
    d.kv_bytes_received = stats.kv_bytes_received();
    d.kv_receive_seconds = static_cast<double>(stats.kv_receive_micros()) / 1e6;
    out[d.name] = d;
  }
  return out;
}

std::vector<InstanceDelta> Subtract(const std::map<std::string, InstanceDelta>& after,
                                    const std::map<std::string, InstanceDelta>& before) {
  std::vector<InstanceDelta> out;
  for (const auto& [name, a] : after) {
    InstanceDelta d = a;
    if (auto it = before.find(name); it != before.end()) {
      const InstanceDelta& b = it->second;
      d.steps -= b.steps;
      d.vetoed_steps -= b.vetoed_steps;
      d.padded_steps -= b.padded_steps;
      d.drafts_proposed -= b.drafts_proposed;
      d.drafts_accepted -= b.drafts_accepted;
      for (auto& [method, counts] : d.drafts_by_method) {
        if (auto m = b.drafts_by_method.find(method); m != b.drafts_by_method.end()) {
          counts.proposed -= m->second.proposed;
          counts.accepted -= m->second.accepted;
        }
      }
      for (size_t k = 0; k < d.draft_k_steps.size() && k < b.draft_k_steps.size(); ++k) {
        d.draft_k_steps[k] -= b.draft_k_steps[k];
      }
      for (size_t j = 0; j < d.draft_position_proposed.size() &&
                         j < b.draft_position_proposed.size() &&
                         j < d.draft_position_accepted.size() &&
                         j < b.draft_position_accepted.size();
           ++j) {
        d.draft_position_proposed[j] -= b.draft_position_proposed[j];
        d.draft_position_accepted[j] -= b.draft_position_accepted[j];
      }
      d.generated_tokens -= b.generated_tokens;
      d.kv_bytes_received -= b.kv_bytes_received;
      d.kv_receive_seconds -= b.kv_receive_seconds;
    }
    out.push_back(d);
  }
  return out;
}

}  // namespace lockstep::bench
