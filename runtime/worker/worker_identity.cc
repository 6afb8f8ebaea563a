#include "runtime/worker/worker_identity.h"

#include <cstdlib>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace lockstep::worker {
namespace {

// A non-negative integer from the first of `names` that is set: {value, name}; nullopt
// when none is set.
absl::StatusOr<std::optional<std::pair<int, std::string>>> IntFromEnv(
    const Environment& env, const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    const std::optional<std::string> text = env(name);
    if (!text.has_value() || text->empty()) continue;
    int value = 0;
    if (!absl::SimpleAtoi(*text, &value) || value < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " must be a non-negative integer, got '", *text, "'"));
    }
    return std::make_optional(std::make_pair(value, name));
  }
  return std::optional<std::pair<int, std::string>>();
}

// The ordinal of this pod: LOCKSTEP_INSTANCE_INDEX, else from the pod name.
absl::StatusOr<int> PodOrdinal(const Environment& env) {
  absl::StatusOr<std::optional<std::pair<int, std::string>>> index =
      IntFromEnv(env, {"LOCKSTEP_INSTANCE_INDEX"});
  if (!index.ok()) return index.status();
  if (index->has_value()) return (*index)->first;
  std::optional<std::string> pod = env("POD_NAME");
  if (!pod.has_value() || pod->empty()) pod = env("HOSTNAME");
  if (!pod.has_value() || pod->empty()) {
    return absl::NotFoundError("neither LOCKSTEP_INSTANCE_INDEX nor POD_NAME nor HOSTNAME is set");
  }
  const std::vector<std::string> parts = absl::StrSplit(*pod, '-');
  // A LeaderWorkerSet's worker pod ends in "-<group>-<worker>"; its leader, in "-<group>".
  const std::optional<std::string> lws_worker = env("LWS_WORKER_INDEX");
  const bool lws_non_leader = lws_worker.has_value() && !lws_worker->empty() && *lws_worker != "0";
  const size_t from_end = lws_non_leader ? 2 : 1;
  int ordinal = 0;
  if (parts.size() <= from_end || !absl::SimpleAtoi(parts[parts.size() - from_end], &ordinal) ||
      ordinal < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the pod name '", *pod, "' does not end in an ordinal",
                     lws_non_leader ? " and a worker index" : ""));
  }
  return ordinal;
}

}  // namespace

Environment ProcessEnvironment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

absl::StatusOr<const config::InstanceConfig*> ResolveInstance(
    const std::string& flag, const config::DeploymentConfig& config, const Environment& env) {
  std::string name = flag;
  std::string source = "--instance";
  if (name.empty()) {
    if (std::optional<std::string> from_env = env("LOCKSTEP_INSTANCE"); from_env.has_value()) {
      name = *from_env;
      source = "LOCKSTEP_INSTANCE";
    }
  }
  if (!name.empty()) {
    const config::InstanceConfig* instance = config.FindInstance(name);
    if (instance == nullptr) {
      return absl::NotFoundError(
          absl::StrCat(source, " names instance '", name, "', which the config does not list"));
    }
    return instance;
  }
  const std::optional<std::string> role_name = env("LOCKSTEP_ROLE");
  if (!role_name.has_value() || role_name->empty()) {
    return absl::InvalidArgumentError(
        "no instance: give --instance, or set LOCKSTEP_INSTANCE, or LOCKSTEP_ROLE in a pod");
  }
  absl::StatusOr<config::InstanceRole> role = config::ParseInstanceRole(*role_name);
  if (!role.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("LOCKSTEP_ROLE ", role.status().message()));
  }
  absl::StatusOr<int> ordinal = PodOrdinal(env);
  if (!ordinal.ok()) return ordinal.status();
  int seen = 0;
  for (const config::InstanceConfig& instance : config.instances) {
    if (instance.role != *role) continue;
    if (seen++ == *ordinal) return &instance;
  }
  return absl::NotFoundError(absl::StrCat("pod ordinal ", *ordinal, " but the config lists ", seen,
                                          " ", *role_name, " instance(s)"));
}

int RanksPerNode(const config::InstanceConfig& instance, const config::PlacementConfig& placement) {
  const int64_t nodes = placement.nodes_per_instance >= 1 ? placement.nodes_per_instance : 1;
  return static_cast<int>(instance.world_size / nodes);
}

absl::StatusOr<WorkerIdentity> ResolveWorkerIdentity(const IdentityFlags& flags,
                                                     const config::DeploymentConfig& config,
                                                     const Environment& env) {
  WorkerIdentity identity;
  absl::StatusOr<const config::InstanceConfig*> instance =
      ResolveInstance(flags.instance, config, env);
  if (!instance.ok()) return instance.status();
  identity.instance = *instance;

  identity.world_size = static_cast<int>(identity.instance->world_size);
  if (flags.world_size.has_value()) {
    identity.world_size = *flags.world_size;
  } else {
    auto world = IntFromEnv(env, {"LOCKSTEP_WORLD_SIZE"});
    if (!world.ok()) return world.status();
    if (world->has_value()) identity.world_size = (*world)->first;
  }
  if (identity.world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("world size must be >= 1, got ", identity.world_size));
  }

  if (flags.rank.has_value()) {
    identity.rank = *flags.rank;
    identity.rank_source = "--rank";
  } else {
    auto rank = IntFromEnv(env, {"LOCKSTEP_RANK", "SLURM_PROCID"});
    if (!rank.ok()) return rank.status();
    if (rank->has_value()) {
      identity.rank = (*rank)->first;
      identity.rank_source = (*rank)->second;
    } else if (identity.world_size == 1) {
      identity.rank_source = "world size 1";
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("no rank for a rank of ", identity.instance->name, " (world size ",
                       identity.world_size, "): give --rank, or set LOCKSTEP_RANK or SLURM_PROCID"));
    }
  }
  if (identity.rank < 0 || identity.rank >= identity.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", identity.rank, " (from ",
                                                   identity.rank_source, ") must be in [0, ",
                                                   identity.world_size, ")"));
  }

  if (flags.device.has_value()) {
    identity.local_device = *flags.device;
  } else {
    auto device = IntFromEnv(env, {"LOCKSTEP_DEVICE", "SLURM_LOCALID"});
    if (!device.ok()) return device.status();
    identity.local_device = device->has_value()
                                ? (*device)->first
                                : identity.rank % RanksPerNode(*identity.instance, config.placement);
  }
  return identity;
}

absl::StatusOr<int> ResolveStartRank(std::optional<int> flag,
                                     const config::InstanceConfig& instance,
                                     const config::PlacementConfig& placement,
                                     const Environment& env) {
  const int per_node = RanksPerNode(instance, placement);
  int start = 0;
  std::string source = "the default";
  if (flag.has_value()) {
    start = *flag;
    source = "--start-rank";
  } else {
    auto explicit_start = IntFromEnv(env, {"LOCKSTEP_START_RANK"});
    if (!explicit_start.ok()) return explicit_start.status();
    auto lws = IntFromEnv(env, {"LWS_WORKER_INDEX"});
    if (!lws.ok()) return lws.status();
    if (explicit_start->has_value()) {
      start = (*explicit_start)->first;
      source = "LOCKSTEP_START_RANK";
    } else if (lws->has_value()) {
      start = (*lws)->first * per_node;
      source = "LWS_WORKER_INDEX";
    }
  }
  if (start < 0 || start % per_node != 0 || start >= instance.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "start rank ", start, " (from ", source, ") must be a multiple of the ", per_node,
        " ranks per node of ", instance.name, " below its world size ", instance.world_size));
  }
  return start;
}

}  // namespace lockstep::worker
