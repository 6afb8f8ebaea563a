#include "deploy/slurm/slurm_plan.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/numbers.h"
#include "deploy/ucx/ucx_placement.h"
#include "fmt/format.h"

namespace lockstep::deploy {
namespace {

struct Address {
  std::string host;  // without brackets
  int port = 0;
};

// "host:port" or "[v6]:port" (router.grpc_listen, checked by the config's validation).
Address SplitAddress(const std::string& address) {
  Address split;
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return split;
  split.host = address.substr(0, colon);
  if (split.host.size() >= 2 && split.host.front() == '[') {
    split.host = split.host.substr(1, split.host.size() - 2);
  }
  if (!absl::SimpleAtoi(address.substr(colon + 1), &split.port)) split.port = 0;
  return split;
}

bool IsWildcard(const std::string& host) { return host == "0.0.0.0" || host == "::"; }
bool IsLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

bool IsNodeName(const std::string& name) {
  if (name.empty()) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

std::string Join(const std::vector<std::string>& words) {
  std::vector<std::string> quoted;
  for (const std::string& word : words) quoted.push_back(ShellQuote(word));
  return absl::StrJoin(quoted, " ");
}

constexpr char kPrelude[] = R"(set -u

# The NodeAddr of a Slurm node (node names need not resolve).
lockstep_node_addr() {
  scontrol show node "$1" | tr ' ' '\n' | sed -n 's/^NodeAddr=//p' | head -n 1
}

# lockstep_step NAME COMMAND...: runs COMMAND again each time it fails, after a
# back-off of 1 s that doubles up to MAX_BACKOFFs and starts over after a run of a minute.
# A clean exit (status 0) ends the loop.
lockstep_step() {
  local name="$1" backoff=1 started rc
  shift
  while true; do
    started=$SECONDS
    "$@"
    rc=$?
    if [[ $rc -eq 0 ]]; then
      echo "lockstep: step $name ended" >&2
      return 0
    fi
    if (( SECONDS - started >= 60 )); then backoff=1; fi
    echo "lockstep: step $name exited with status $rc; restarting in ${backoff}s" >&2
    sleep "$backoff"
    backoff=$(( backoff * 2 < MAX_BACKOFF ? backoff * 2 : MAX_BACKOFF ))
  done
}

# Waits (at most 5 minutes) until the router has written the addresses it bound.
lockstep_wait_router() {
  local deadline=$(( SECONDS + 300 ))
  until [[ -s "$1" ]]; do
    if (( SECONDS >= deadline )); then
      echo "lockstep: the router did not write $1 within 5 minutes" >&2
      return 1
    fi
    sleep 0.2
  done
}
)";

}  // namespace

std::string SlurmClusterTokenFile(const config::DeploymentConfig& config,
                                  const SlurmPlanOptions& options) {
  if (!config.security.cluster_token_file.empty()) return "";
  return absl::StrCat(options.run_dir, "/cluster_token");
}

std::string ShellQuote(const std::string& word) {
  if (!word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                               "0123456789_-./:=,%@+") == std::string::npos) {
    return word;
  }
  std::string quoted = "'";
  for (char c : word) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

absl::StatusOr<std::string> PlanSlurm(const config::DeploymentConfig& config,
                                      const SlurmPlanOptions& options) {
  std::vector<std::string> errors;
  if (options.config_path.empty()) errors.push_back("config: a config file is required");
  if (options.run_dir.empty()) errors.push_back("--run-dir: is required");
  if (options.max_backoff_s < 1) {
    errors.push_back(absl::StrCat("--max-backoff-s: must be >= 1, got ", options.max_backoff_s));
  }
  for (const std::string& node : options.nodes) {
    if (!IsNodeName(node)) errors.push_back(absl::StrCat("--nodes: bad node name '", node, "'"));
  }
  const int64_t per_instance = config.placement.nodes_per_instance;
  const int64_t needed = per_instance * static_cast<int64_t>(config.instances.size());
  if (static_cast<int64_t>(options.nodes.size()) < needed) {
    errors.push_back(
        fmt::format("--nodes: the config needs {} node(s) ({} instance(s) x "
                    "placement.nodes_per_instance {}), got {}",
                    needed, config.instances.size(), per_instance, options.nodes.size()));
  }
  const Address grpc_address = SplitAddress(config.router.grpc_listen);
  const Address* grpc = &grpc_address;
  if (grpc->port == 0) {
    errors.push_back(fmt::format(
        "router.grpc_listen: needs a fixed port on a cluster (the workers dial it), got '{}'",
        config.router.grpc_listen));
  } else if (IsLoopback(grpc->host) && options.nodes.size() > 1) {
    errors.push_back(fmt::format(
        "router.grpc_listen: {} is a loopback address, which the other nodes cannot reach "
        "(use 0.0.0.0:{})",
        config.router.grpc_listen, grpc->port));
  }
  for (std::string& error : CheckUcxPlacement(config, {.multi_node = options.nodes.size() > 1})) {
    errors.push_back(std::move(error));
  }
  if (!errors.empty()) return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));

  const std::string& run = options.run_dir;
  const std::string& first = options.nodes.front();
  const std::string rendezvous_host =
      IsWildcard(grpc->host)                     ? absl::StrCat("$(lockstep_node_addr ", first, ")")
      : grpc->host.find(':') != std::string::npos ? absl::StrCat("[", grpc->host, "]")
                                                  : grpc->host;
  const std::string address_file = absl::StrCat(run, "/router.address.json");

  std::string script = "#!/usr/bin/env bash\n";
  absl::StrAppend(&script, "# Generated by `lockstep plan slurm ", options.config_path,
                  " --nodes ", absl::StrJoin(options.nodes, ","), "`: the router and ",
                  config.instances.size(), " instance step(s).\n");
  absl::StrAppend(&script, absl::StrReplaceAll(kPrelude, {{"MAX_BACKOFF", absl::StrCat(options.max_backoff_s)}}));
  absl::StrAppend(&script, "\nmkdir -p ", ShellQuote(run), "\n");
  for (const auto& [name, value] : config.placement.env) {
    absl::StrAppend(&script, "export ", name, "=", ShellQuote(value), "\n");
  }
  if (config::UsesUcx(config)) {
    // UCX registers (pins) the KV staging memory; the steps inherit this limit.
    absl::StrAppend(&script,
                    "ulimit -l unlimited 2>/dev/null || echo \"lockstep: cannot raise the "
                    "locked-memory limit (ulimit -l $(ulimit -l)); UCX registration may fail "
                    "(docs/transfer-ucx.md)\" >&2\n");
  }
  absl::StrAppend(&script, "LOCKSTEP_RENDEZVOUS=\"", rendezvous_host, ":", grpc->port, "\"\n",
                  "export LOCKSTEP_RENDEZVOUS\n");
  if (const std::string token = SlurmClusterTokenFile(config, options); !token.empty()) {
    // Written by `lockstep plan slurm` (0600); every step presents it (docs/security.md).
    absl::StrAppend(&script, "export LOCKSTEP_CLUSTER_TOKEN_FILE=\"${LOCKSTEP_CLUSTER_TOKEN_FILE:-",
                    ShellQuote(token), "}\"\n");
  }

  const std::vector<std::string> srun_common = {"--overlap", "--kill-on-bad-exit=1",
                                                "--open-mode=append"};
  // The router: one task on the first node.
  absl::StrAppend(&script, "\n# The router (HTTP API, worker registry, rendezvous) on ", first,
                  ".\nrm -f ", ShellQuote(address_file), "\n");
  absl::StrAppend(
      &script, "lockstep_step router srun ${LOCKSTEP_SRUN_ARGS:-} ",
      Join({"-N1", "-n1", "-w", first}), " ", Join(srun_common), " ",
      Join({absl::StrCat("--output=", run, "/router.log"), options.lockstep_binary, "router",
            "--config", options.config_path, "--address-file", address_file}),
      " &\n", "lockstep_wait_router ", ShellQuote(address_file), " || exit 1\n");

  // One step per instance; its tasks are the ranks.
  size_t next_node = 0;
  for (const config::InstanceConfig& instance : config.instances) {
    std::vector<std::string> nodes(options.nodes.begin() + next_node,
                                   options.nodes.begin() + next_node + per_instance);
    next_node += per_instance;
    std::vector<std::string> srun = {absl::StrCat("-N", per_instance),
                                     absl::StrCat("-n", instance.world_size)};
    if (per_instance > 1) {
      srun.push_back(absl::StrCat("--ntasks-per-node=", instance.world_size / per_instance));
    }
    srun.insert(srun.end(), {"-w", absl::StrJoin(nodes, ",")});
    std::vector<std::string> command = {
        absl::StrCat("--output=", run, "/", instance.name, ".rank%t.log")};
    if (config.placement.numa_bind) {
      command.insert(command.end(),
                     {"bash", "-c",
                      "exec numactl --membind=\"$(cat /sys/devices/system/node/has_cpu)\" \"$@\"",
                      "numa-bind"});
    }
    command.insert(command.end(), {options.lockstep_binary, "worker", "--config",
                                   options.config_path, "--instance", instance.name});
    absl::StrAppend(&script, "\n# ", instance.name, ": ",
                    std::string(config::InstanceRoleName(instance.role)), ", DEP",
                    instance.world_size,
                    " on ", absl::StrJoin(nodes, ","), ".\n");
    absl::StrAppend(&script, "lockstep_step ", instance.name, " srun ${LOCKSTEP_SRUN_ARGS:-} ",
                    Join(srun), " ", Join(srun_common), " ", Join(command),
                    " --rendezvous \"$LOCKSTEP_RENDEZVOUS\" &\n");
  }
  if (next_node < options.nodes.size()) {
    absl::StrAppend(&script, "\n# Unused node(s): ",
                    absl::StrJoin(options.nodes.begin() + next_node, options.nodes.end(), ","),
                    ".\n");
  }
  absl::StrAppend(&script, "\nwait\n");
  return script;
}

}  // namespace lockstep::deploy
