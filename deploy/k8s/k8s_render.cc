#include "deploy/k8s/k8s_render.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "deploy/k8s/k8s_secrets.h"
#include "deploy/k8s/yaml_writer.h"
#include "deploy/ucx/ucx_placement.h"
#include "nlohmann/json.hpp"

namespace lockstep::deploy {
namespace {

using Json = nlohmann::ordered_json;

constexpr char kConfigDir[] = "/etc/lockstep";
constexpr char kConfigFile[] = "/etc/lockstep/deployment.yaml";
constexpr char kClaimName[] = "compute-domain-channel";
constexpr char kLwsGroupLabel[] = "leaderworkerset.sigs.k8s.io/group-index";

// The port of "host:port", 0 when there is none.
int PortOf(const std::string& address) {
  int port = 0;
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) return 0;
  return port;
}

std::string PoolName(config::InstanceRole role) {
  switch (role) {
    case config::InstanceRole::kContext:
      return "ctx";
    case config::InstanceRole::kGeneration:
      return "gen";
    case config::InstanceRole::kAggregated:
      return "agg";
  }
  return "pool";
}

// The instances of one role, in file order, with their indices in the file.
struct Pool {
  config::InstanceRole role;
  std::vector<size_t> instances;
};

std::vector<Pool> PoolsOf(const config::DeploymentConfig& config) {
  std::vector<Pool> pools;
  for (size_t i = 0; i < config.instances.size(); ++i) {
    const config::InstanceRole role = config.instances[i].role;
    auto it = std::find_if(pools.begin(), pools.end(), [&](const Pool& p) { return p.role == role; });
    if (it == pools.end()) it = pools.insert(pools.end(), Pool{role, {}});
    it->instances.push_back(i);
  }
  return pools;
}

bool IsDnsLabel(const std::string& name) {
  if (name.empty() || name.size() > 40 || !std::isalpha(static_cast<unsigned char>(name[0]))) {
    return false;
  }
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return name.back() != '-';
}

class Renderer {
 public:
  Renderer(const config::DeploymentConfig& config, const K8sRenderOptions& options)
      : config_(config),
        options_(options),
        secrets_(config.security, config.router, options.name) {}

  std::vector<std::string> Check() const {
    std::vector<std::string> errors = secrets_.Check(kConfigDir);
    // Every pod may land on another node, and gets devices only from the pod spec.
    for (std::string& error : CheckUcxPlacement(
             config_, {.multi_node = true, .devices_from_rdma_resources = true})) {
      errors.push_back(std::move(error));
    }
    if (options_.image.empty()) errors.push_back("--image: is required");
    if (options_.cluster_token.empty()) errors.push_back("cluster token: is required");
    if (!IsDnsLabel(options_.name)) {
      errors.push_back(absl::StrCat(
          "--name: must be a DNS label of at most 40 characters (a-z, 0-9, '-'), got '",
          options_.name, "'"));
    }
    for (const auto& [field, address] :
         {std::pair{"router.http_listen", config_.router.http_listen},
          std::pair{"router.grpc_listen", config_.router.grpc_listen}}) {
      if (PortOf(address) == 0) {
        errors.push_back(absl::StrCat(field, ": needs a fixed port on Kubernetes (the router "
                                      "Service exposes it), got '", address, "'"));
      }
    }
    for (const auto& [field, path] : {std::pair{"model.path", config_.model.path},
                                      std::pair{"model.draft_path", config_.model.draft_path}}) {
      if (!path.empty() && path[0] != '/') {
        errors.push_back(absl::StrCat(field, ": must be an absolute path (as the containers see "
                                      "it), got '", path, "'"));
      }
    }
    for (const Pool& pool : PoolsOf(config_)) {
      const config::InstanceConfig& first = config_.instances[pool.instances[0]];
      for (size_t i : pool.instances) {
        const config::InstanceConfig& instance = config_.instances[i];
        if (instance.world_size != first.world_size) {
          errors.push_back(absl::StrCat(
              "instances[", i, "].world_size: the ", std::string(config::InstanceRoleName(pool.role)),
              " instances share one pod template, so they need one world size (",
              first.world_size, " in ", first.name, "), got ", instance.world_size));
        }
        if (!instance.leader_address.empty()) {
          errors.push_back(absl::StrCat("instances[", i,
                                        "].leader_address: pods get their addresses from "
                                        "Kubernetes; leave it out"));
        }
      }
    }
    return errors;
  }

  std::vector<RenderedFile> Render() const {
    std::vector<RenderedFile> files;
    files.push_back({"configmap.yaml", File({ConfigMap()})});
    files.push_back({"secret.yaml", File({secrets_.TokenSecret(options_.cluster_token,
                                                               Metadata(secrets_.token_secret_name(), "security"))})});
    files.push_back({"router.yaml", File({RouterDeployment(), RouterService()})});
    for (const Pool& pool : PoolsOf(config_)) {
      const std::string file = absl::StrCat(PoolName(pool.role), ".yaml");
      if (config_.placement.nodes_per_instance > 1) {
        files.push_back({file, File({LeaderWorkerSet(pool)})});
      } else {
        files.push_back({file, File({PoolService(pool), StatefulSet(pool)})});
      }
    }
    if (config_.placement.compute_domain) {
      files.push_back({"compute-domain.yaml", File({ComputeDomain()})});
    }
    return files;
  }

 private:
  std::string File(const std::vector<Json>& documents) const {
    std::string text = absl::StrCat("# Generated by `lockstep render k8s ", options_.source,
                                    " --image ", options_.image, "`; do not edit.\n");
    for (size_t i = 0; i < documents.size(); ++i) {
      if (i > 0) text += "---\n";
      text += ToYaml(documents[i]);
    }
    return text;
  }

  std::string Name(const std::string& suffix) const {
    return absl::StrCat(options_.name, "-", suffix);
  }

  Json Labels(const std::string& component) const {
    return {{"app.kubernetes.io/name", "lockstep"},
            {"app.kubernetes.io/instance", options_.name},
            {"app.kubernetes.io/component", component}};
  }

  Json Metadata(const std::string& name, const std::string& component) const {
    return {{"name", name}, {"labels", Labels(component)}};
  }

  Json ConfigMap() const {
    return {{"apiVersion", "v1"},
            {"kind", "ConfigMap"},
            {"metadata", Metadata(Name("config"), "config")},
            {"data", {{"deployment.yaml", options_.config_text}}}};
  }

  // `own` and then the secrets' mounts / volumes (`router`: the router pod's).
  Json Mounts(std::vector<Json> own, bool router = false) const {
    for (Json& mount : secrets_.VolumeMounts(router)) own.push_back(std::move(mount));
    return own;
  }
  Json Volumes(std::vector<Json> own, bool router = false) const {
    for (Json& volume : secrets_.Volumes(router)) own.push_back(std::move(volume));
    return own;
  }

  // The pod runs as the image's user; fsGroup gives its group the Secrets' files.
  static Json PodSecurityContext() {
    return {{"runAsNonRoot", true},
            {"runAsUser", kImageUid},
            {"runAsGroup", kImageGid},
            {"fsGroup", kImageGid}};
  }

  Json ConfigVolume() const {
    return {{"name", "config"}, {"configMap", {{"name", Name("config")}}}};
  }

  Json RouterDeployment() const {
    const int http = PortOf(config_.router.http_listen);
    const int grpc = PortOf(config_.router.grpc_listen);
    Json container = {
        {"name", "router"},
        {"image", options_.image},
        {"command",
         {"lockstep", "router", "--config", kConfigFile, "--http-listen",
          absl::StrCat("0.0.0.0:", http), "--grpc-listen", absl::StrCat("0.0.0.0:", grpc)}},
        {"ports", Json::array({{{"name", "http"}, {"containerPort", http}},
                               {{"name", "grpc"}, {"containerPort", grpc}}})},
        {"env", secrets_.Env()},
        {"readinessProbe",
         {{"tcpSocket", {{"port", "http"}}}, {"periodSeconds", 5}, {"failureThreshold", 3}}},
        {"volumeMounts",
         Mounts({{{"name", "config"}, {"mountPath", kConfigDir}, {"readOnly", true}}},
                /*router=*/true)}};
    return {{"apiVersion", "apps/v1"},
            {"kind", "Deployment"},
            {"metadata", Metadata(Name("router"), "router")},
            {"spec",
             {{"replicas", 1},
              {"selector", {{"matchLabels", Labels("router")}}},
              {"template",
               {{"metadata", {{"labels", Labels("router")}}},
                {"spec",
                 {{"securityContext", PodSecurityContext()},
                  {"containers", Json::array({container})},
                  {"volumes", Volumes({ConfigVolume()}, /*router=*/true)}}}}}}}};
  }

  Json RouterService() const {
    const int http = PortOf(config_.router.http_listen);
    const int grpc = PortOf(config_.router.grpc_listen);
    return {{"apiVersion", "v1"},
            {"kind", "Service"},
            {"metadata", Metadata(Name("router"), "router")},
            {"spec",
             {{"selector", Labels("router")},
              {"ports", Json::array({{{"name", "http"}, {"port", http}, {"targetPort", "http"}},
                                     {{"name", "grpc"}, {"port", grpc}, {"targetPort", "grpc"}}})}}}};
  }

  // The pod spec of a pool: `leader` adds the WorkerService port and the readiness
  // probe (the pod that runs rank 0).
  Json PodSpec(const Pool& pool, bool leader, bool lws) const {
    const config::PlacementConfig& placement = config_.placement;
    Json env = Json::array();
    env.push_back({{"name", "POD_NAME"},
                   {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}});
    env.push_back({{"name", "LOCKSTEP_ADVERTISE_ADDRESS"},
                   {"valueFrom", {{"fieldRef", {{"fieldPath", "status.podIP"}}}}}});
    env.push_back({{"name", "LOCKSTEP_ROLE"},
                   {"value", std::string(config::InstanceRoleName(pool.role))}});
    env.push_back({{"name", "LOCKSTEP_RENDEZVOUS"},
                   {"value", absl::StrCat(Name("router"), ":", PortOf(config_.router.grpc_listen))}});
    if (lws) {
      env.push_back(
          {{"name", "LOCKSTEP_INSTANCE_INDEX"},
           {"valueFrom",
            {{"fieldRef", {{"fieldPath", absl::StrCat("metadata.labels['", kLwsGroupLabel, "']")}}}}}});
    }
    for (Json& var : secrets_.Env()) env.push_back(std::move(var));
    for (const auto& [name, value] : placement.env) env.push_back({{"name", name}, {"value", value}});

    Json command = {"lockstep", "instance", "--config", kConfigFile};
    if (leader) {
      command.push_back("--leader-listen");
      command.push_back(absl::StrCat("0.0.0.0:", kLeaderPort));
    }
    Json container = {{"name", "instance"}, {"image", options_.image}, {"command", command},
                      {"env", env}};
    if (leader) {
      container["ports"] = Json::array({{{"name", "worker"}, {"containerPort", kLeaderPort}}});
      container["readinessProbe"] = {
          {"exec",
           {{"command",
             {"sh", "-c",
              absl::StrCat("lockstep probe \"$LOCKSTEP_ADVERTISE_ADDRESS:", kLeaderPort, "\"")}}}},
          {"periodSeconds", 10},
          {"timeoutSeconds", 5},
          {"failureThreshold", 3}};
    }
    Json resources = Json::object();
    if (placement.gpus_per_node > 0) {
      resources["limits"] = {{"nvidia.com/gpu", placement.gpus_per_node}};
    }
    for (const auto& [name, count] : placement.rdma_resources) {
      resources["limits"][name] = count;  // RDMA devices for the KV transfer over UCX
    }
    if (placement.compute_domain) resources["claims"] = Json::array({{{"name", kClaimName}}});
    if (!resources.empty()) container["resources"] = resources;
    if (config::UsesUcx(config_)) {
      // UCX registers (pins) the KV staging memory: docs/transfer-ucx.md.
      container["securityContext"] = {{"capabilities", {{"add", Json::array({"IPC_LOCK"})}}}};
    }
    container["volumeMounts"] =
        Mounts({{{"name", "config"}, {"mountPath", kConfigDir}, {"readOnly", true}},
                {{"name", "shm"}, {"mountPath", "/dev/shm"}}});

    Json spec = Json::object();
    if (!placement.topology_key.empty() && !lws) {
      // Every pod of the deployment in one topology domain (one NVLink domain).
      spec["affinity"] = {
          {"podAffinity",
           {{"requiredDuringSchedulingIgnoredDuringExecution",
             Json::array({{{"labelSelector",
                {{"matchLabels",
                  {{"app.kubernetes.io/name", "lockstep"},
                   {"app.kubernetes.io/instance", options_.name}}}}},
               {"topologyKey", placement.topology_key}}})}}}};
    }
    spec["securityContext"] = PodSecurityContext();
    spec["terminationGracePeriodSeconds"] = 30;
    spec["containers"] = Json::array({container});
    if (placement.compute_domain) {
      spec["resourceClaims"] = Json::array(
          {{{"name", kClaimName}, {"resourceClaimTemplateName", Name(kClaimName)}}});
    }
    spec["volumes"] =
        Volumes({ConfigVolume(), {{"name", "shm"}, {"emptyDir", {{"medium", "Memory"}}}}});
    return spec;
  }

  Json PoolService(const Pool& pool) const {
    const std::string component = PoolName(pool.role);
    return {{"apiVersion", "v1"},
            {"kind", "Service"},
            {"metadata", Metadata(Name(component), component)},
            {"spec",
             {{"clusterIP", "None"},
              {"selector", Labels(component)},
              {"ports", Json::array({{{"name", "worker"}, {"port", kLeaderPort}}})}}}};
  }

  Json StatefulSet(const Pool& pool) const {
    const std::string component = PoolName(pool.role);
    return {{"apiVersion", "apps/v1"},
            {"kind", "StatefulSet"},
            {"metadata", Metadata(Name(component), component)},
            {"spec",
             {{"serviceName", Name(component)},
              {"replicas", pool.instances.size()},
              {"podManagementPolicy", "Parallel"},
              {"selector", {{"matchLabels", Labels(component)}}},
              {"template",
               {{"metadata", {{"labels", Labels(component)}}},
                {"spec", PodSpec(pool, /*leader=*/true, /*lws=*/false)}}}}}};
  }

  Json LeaderWorkerSet(const Pool& pool) const {
    const std::string component = PoolName(pool.role);
    Json metadata = Metadata(Name(component), component);
    if (!config_.placement.topology_key.empty()) {
      // Each group (one instance) inside one topology domain.
      metadata["annotations"] = {
          {"leaderworkerset.sigs.k8s.io/exclusive-topology", config_.placement.topology_key}};
    }
    return {{"apiVersion", "leaderworkerset.x-k8s.io/v1"},
            {"kind", "LeaderWorkerSet"},
            {"metadata", metadata},
            {"spec",
             {{"replicas", pool.instances.size()},
              {"startupPolicy", "LeaderCreated"},
              {"leaderWorkerTemplate",
               {{"size", config_.placement.nodes_per_instance},
                {"restartPolicy", "RecreateGroupOnPodRestart"},
                {"leaderTemplate",
                 {{"metadata", {{"labels", Labels(component)}}},
                  {"spec", PodSpec(pool, /*leader=*/true, /*lws=*/true)}}},
                {"workerTemplate",
                 {{"metadata", {{"labels", Labels(component)}}},
                  {"spec", PodSpec(pool, /*leader=*/false, /*lws=*/true)}}}}}}}};
  }

  Json ComputeDomain() const {
    return {{"apiVersion", "resource.nvidia.com/v1beta1"},
            {"kind", "ComputeDomain"},
            {"metadata", Metadata(Name("compute-domain"), "compute-domain")},
            {"spec",
             {{"numNodes", config_.placement.nodes_per_instance *
                               static_cast<int64_t>(config_.instances.size())},
              {"channel", {{"resourceClaimTemplate", {{"name", Name(kClaimName)}}}}}}}};
  }

  const config::DeploymentConfig& config_;
  const K8sRenderOptions& options_;
  const K8sSecrets secrets_;
};

}  // namespace

absl::StatusOr<std::vector<RenderedFile>> RenderK8s(const config::DeploymentConfig& config,
                                                    const K8sRenderOptions& options) {
  Renderer renderer(config, options);
  if (std::vector<std::string> errors = renderer.Check(); !errors.empty()) {
    return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
  }
  return renderer.Render();
}

}  // namespace lockstep::deploy
