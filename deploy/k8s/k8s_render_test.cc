// `lockstep render k8s`: structural checks on the rendered manifests, errors that
// name the field, and the golden check of deploy/k8s/examples/.
#include "deploy/k8s/k8s_render.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "deploy/k8s/k8s_secrets.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/config/config_yaml.h"
#include "yaml-cpp/yaml.h"

namespace lockstep::deploy {
namespace {

using ::testing::HasSubstr;

constexpr char kImage[] = "lockstep:dev";
// The token of the checked-in examples (deploy/k8s/examples/example_cluster_token).
constexpr char kTokenFile[] = "deploy/k8s/examples/example_cluster_token";

// The checked-in examples: the config each is rendered from, and its directory.
struct Example {
  std::string config;
  std::string dir;
};
const std::vector<Example>& Examples() {
  static const auto* examples = new std::vector<Example>{
      {"deploy/slurm/examples/gb300_disagg_ctx_dep4x1_gen_dep4x2.yaml",
       "deploy/k8s/examples/gb300_disagg"},
      {"deploy/k8s/examples/gb300_disagg_dep8x2_lws.yaml", "deploy/k8s/examples/gb300_disagg_lws"},
  };
  return *examples;
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::string ExampleToken() {
  std::string token = ReadFile(kTokenFile);
  while (!token.empty() && token.back() == '\n') token.pop_back();
  return token;
}

absl::StatusOr<std::vector<RenderedFile>> RenderText(const std::string& text,
                                                    const std::string& source,
                                                    const std::string& image = kImage) {
  absl::StatusOr<config::DeploymentConfig> config =
      config::ParseDeploymentConfig(text, "", source);
  if (!config.ok()) return config.status();
  return RenderK8s(*config, {.image = image,
                             .config_text = text,
                             .source = source,
                             .cluster_token = ExampleToken()});
}

// Every document of every file, by "Kind/name".
std::map<std::string, YAML::Node> Objects(const std::vector<RenderedFile>& files) {
  std::map<std::string, YAML::Node> objects;
  for (const RenderedFile& file : files) {
    for (const YAML::Node& doc : YAML::LoadAll(file.text)) {
      objects[absl::StrCat(doc["kind"].Scalar(), "/", doc["metadata"]["name"].Scalar())] = doc;
    }
  }
  return objects;
}

// The env of a container as name -> node.
std::map<std::string, YAML::Node> Env(const YAML::Node& container) {
  std::map<std::string, YAML::Node> env;
  for (const YAML::Node& var : container["env"]) env[var["name"].Scalar()] = var;
  return env;
}

std::string ExampleText(size_t i) { return ReadFile(Examples()[i].config); }

TEST(K8sRenderTest, StatefulSetPerPoolWithGpusRankEnvAndShm) {
  absl::StatusOr<std::vector<RenderedFile>> files = RenderText(ExampleText(0), "example.yaml");
  ASSERT_TRUE(files.ok()) << files.status();
  std::map<std::string, YAML::Node> objects = Objects(*files);
  ASSERT_TRUE(objects.count("StatefulSet/lockstep-ctx"));
  ASSERT_TRUE(objects.count("StatefulSet/lockstep-gen"));
  EXPECT_FALSE(objects.count("ComputeDomain/lockstep-compute-domain"));
  EXPECT_EQ(objects["StatefulSet/lockstep-ctx"]["spec"]["replicas"].as<int>(), 1);
  EXPECT_EQ(objects["StatefulSet/lockstep-gen"]["spec"]["replicas"].as<int>(), 2);
  for (const char* pool : {"ctx", "gen"}) {
    const YAML::Node set = objects[absl::StrCat("StatefulSet/lockstep-", pool)];
    EXPECT_EQ(set["spec"]["serviceName"].Scalar(), absl::StrCat("lockstep-", pool));
    const YAML::Node pod = set["spec"]["template"]["spec"];
    const YAML::Node container = pod["containers"][0];
    EXPECT_EQ(container["image"].Scalar(), kImage);
    EXPECT_EQ(container["command"][1].Scalar(), "instance");
    EXPECT_EQ(container["resources"]["limits"]["nvidia.com/gpu"].as<int>(), 4);
    EXPECT_FALSE(container["resources"]["claims"]) << "no ComputeDomain was asked for";
    EXPECT_FALSE(pod["resourceClaims"]);
    std::map<std::string, YAML::Node> env = Env(container);
    EXPECT_EQ(env["LOCKSTEP_ROLE"]["value"].Scalar(),
              std::string(pool) == "ctx" ? "context" : "generation");
    EXPECT_EQ(env["LOCKSTEP_RENDEZVOUS"]["value"].Scalar(), "lockstep-router:50051");
    EXPECT_EQ(env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"].Scalar(), "metadata.name");
    EXPECT_EQ(env["LOCKSTEP_ADVERTISE_ADDRESS"]["valueFrom"]["fieldRef"]["fieldPath"].Scalar(),
              "status.podIP");
    EXPECT_EQ(env["NCCL_CUMEM_ENABLE"]["value"].Scalar(), "1");
    EXPECT_EQ(env["NCCL_CUMEM_ENABLE"]["value"].Tag(), "!") << "env values must be strings";
    EXPECT_THAT(container["readinessProbe"]["exec"]["command"][2].Scalar(),
                HasSubstr("lockstep probe \"$LOCKSTEP_ADVERTISE_ADDRESS:8700\""));
    bool shm = false;
    for (const YAML::Node& volume : pod["volumes"]) {
      shm |= volume["name"].Scalar() == "shm" && volume["emptyDir"]["medium"].Scalar() == "Memory";
    }
    EXPECT_TRUE(shm);
    EXPECT_EQ(pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
                 ["topologyKey"]
                     .Scalar(),
              "nvidia.com/gpu.clique");
  }
  // The router: Deployment + Service on the configured ports; the config in a ConfigMap.
  const YAML::Node service = objects["Service/lockstep-router"];
  EXPECT_EQ(service["spec"]["ports"][0]["port"].as<int>(), 8000);
  EXPECT_EQ(service["spec"]["ports"][1]["port"].as<int>(), 50051);
  EXPECT_TRUE(objects.count("Deployment/lockstep-router"));
  EXPECT_EQ(objects["ConfigMap/lockstep-config"]["data"]["deployment.yaml"].Scalar(),
            ExampleText(0));
}

TEST(K8sRenderTest, LeaderWorkerSetsAndAComputeDomainForMultiNodeInstances) {
  absl::StatusOr<std::vector<RenderedFile>> files = RenderText(ExampleText(1), "example.yaml");
  ASSERT_TRUE(files.ok()) << files.status();
  std::map<std::string, YAML::Node> objects = Objects(*files);
  EXPECT_FALSE(objects.count("StatefulSet/lockstep-gen"));
  ASSERT_TRUE(objects.count("LeaderWorkerSet/lockstep-gen"));
  ASSERT_TRUE(objects.count("ComputeDomain/lockstep-compute-domain"));
  EXPECT_EQ(objects["ComputeDomain/lockstep-compute-domain"]["spec"]["numNodes"].as<int>(), 4);
  const YAML::Node lws = objects["LeaderWorkerSet/lockstep-gen"];
  EXPECT_EQ(lws["spec"]["replicas"].as<int>(), 1);
  EXPECT_EQ(lws["spec"]["leaderWorkerTemplate"]["size"].as<int>(), 2);
  EXPECT_EQ(lws["spec"]["leaderWorkerTemplate"]["restartPolicy"].Scalar(),
            "RecreateGroupOnPodRestart");
  EXPECT_EQ(lws["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/exclusive-topology"]
                .Scalar(),
            "nvidia.com/gpu.clique");
  for (const char* role : {"leaderTemplate", "workerTemplate"}) {
    const YAML::Node pod = lws["spec"]["leaderWorkerTemplate"][role]["spec"];
    const YAML::Node container = pod["containers"][0];
    EXPECT_EQ(container["resources"]["limits"]["nvidia.com/gpu"].as<int>(), 4) << role;
    EXPECT_EQ(container["resources"]["claims"][0]["name"].Scalar(), "compute-domain-channel");
    EXPECT_EQ(pod["resourceClaims"][0]["resourceClaimTemplateName"].Scalar(),
              "lockstep-compute-domain-channel");
    EXPECT_EQ(Env(container)["LOCKSTEP_INSTANCE_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"]
                  .Scalar(),
              "metadata.labels['leaderworkerset.sigs.k8s.io/group-index']");
    // Only the leader runs rank 0: only it has the WorkerService and the probe.
    EXPECT_EQ(static_cast<bool>(container["readinessProbe"]), std::string(role) == "leaderTemplate");
  }
}

// The pod specs of every workload (router, StatefulSets, LWS templates) by a label.
std::map<std::string, YAML::Node> PodSpecs(std::map<std::string, YAML::Node>& objects) {
  std::map<std::string, YAML::Node> pods;
  for (auto& [id, object] : objects) {
    const std::string kind = object["kind"].Scalar();
    if (kind == "Deployment" || kind == "StatefulSet") {
      pods[id] = object["spec"]["template"]["spec"];
    } else if (kind == "LeaderWorkerSet") {
      pods[id + "/leader"] = object["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"];
      pods[id + "/worker"] = object["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"];
    }
  }
  return pods;
}

// Where `container` mounts volume `volume`'s key `key`; "" when it does not.
std::string MountOf(const YAML::Node& container, const std::string& volume,
                    const std::string& key) {
  for (const YAML::Node& mount : container["volumeMounts"]) {
    if (mount["name"].Scalar() == volume && mount["subPath"].Scalar() == key) {
      EXPECT_TRUE(mount["readOnly"].as<bool>());
      return mount["mountPath"].Scalar();
    }
  }
  return "";
}

// The secret volume `volume` of `pod`: its Secret's name ("" when absent).
std::string SecretVolume(const YAML::Node& pod, const std::string& volume) {
  for (const YAML::Node& v : pod["volumes"]) {
    if (v["name"].Scalar() == volume) {
      // Group-readable: the pod's fsGroup (the image's group) owns the files
      // (pod_file_access_test checks the image's user reads them).
      EXPECT_EQ(v["secret"]["defaultMode"].as<int>(), 0440);
      return v["secret"]["secretName"].Scalar();
    }
  }
  return "";
}

TEST(K8sRenderTest, UcxTransfersGetRdmaResourcesAndIpcLock) {
  // The example with UCX between its instances and an RDMA device per pod.
  absl::StatusOr<std::vector<RenderedFile>> files = RenderText(ExampleText(0), "example.yaml");
  ASSERT_TRUE(files.ok()) << files.status();
  std::map<std::string, YAML::Node> objects = Objects(*files);
  EXPECT_FALSE(objects["StatefulSet/lockstep-ctx"]["spec"]["template"]["spec"]["containers"][0]
                      ["securityContext"])
      << "no capability without UCX";
  YAML::Node doc = YAML::Load(ExampleText(0));
  for (YAML::Node instance : doc["instances"]) instance["transfer"]["transport"] = "ucx";
  doc["placement"]["rdma_resources"]["rdma/ib"] = 1;
  doc["placement"]["env"]["UCX_TLS"] = "rc,sm,self";
  YAML::Emitter out;
  out << doc;
  files = RenderText(out.c_str(), "example.yaml");
  ASSERT_TRUE(files.ok()) << files.status();
  objects = Objects(*files);
  for (const char* pool : {"ctx", "gen"}) {
    const YAML::Node container = objects[absl::StrCat("StatefulSet/lockstep-", pool)]["spec"]
                                        ["template"]["spec"]["containers"][0];
    EXPECT_EQ(container["resources"]["limits"]["rdma/ib"].as<int>(), 1) << pool;
    EXPECT_EQ(container["resources"]["limits"]["nvidia.com/gpu"].as<int>(), 4) << pool;
    EXPECT_EQ(container["securityContext"]["capabilities"]["add"][0].Scalar(), "IPC_LOCK") << pool;
    EXPECT_EQ(Env(container)["UCX_TLS"]["value"].Scalar(), "rc,sm,self") << pool;
  }
  // RDMA transports without an RDMA device in the pod spec, or transports that stay
  // within a node, are refused naming UCX_TLS.
  for (const char* tls : {"rc,sm,self", "shm,self"}) {
    YAML::Node without = YAML::Clone(doc);
    without["placement"].remove("rdma_resources");
    without["placement"]["env"]["UCX_TLS"] = tls;
    YAML::Emitter text;
    text << without;
    files = RenderText(text.c_str(), "example.yaml");
    ASSERT_FALSE(files.ok()) << tls;
    EXPECT_THAT(files.status().message(), HasSubstr("placement.env.UCX_TLS")) << tls;
  }
  // A bad resource name or count names the field.
  doc["placement"]["rdma_resources"]["rdma/ib"] = 0;
  YAML::Emitter bad;
  bad << doc;
  files = RenderText(bad.c_str(), "example.yaml");
  ASSERT_FALSE(files.ok());
  EXPECT_THAT(files.status().message(), HasSubstr("placement.rdma_resources.rdma/ib"));
}

TEST(K8sRenderTest, EveryPodMountsTheClusterTokenSecretAndNamesIt) {
  absl::StatusOr<std::vector<RenderedFile>> files = RenderText(ExampleText(0), "example.yaml");
  ASSERT_TRUE(files.ok()) << files.status();
  std::map<std::string, YAML::Node> objects = Objects(*files);
  const YAML::Node secret = objects["Secret/lockstep-cluster-token"];
  ASSERT_TRUE(secret) << "secret.yaml holds the token";
  EXPECT_EQ(secret["stringData"]["token"].Scalar(), ExampleToken());
  std::map<std::string, YAML::Node> pods = PodSpecs(objects);
  EXPECT_EQ(pods.size(), 3u);  // the router and two StatefulSets
  for (auto& [id, pod] : pods) {
    SCOPED_TRACE(id);
    const YAML::Node container = pod["containers"][0];
    EXPECT_EQ(SecretVolume(pod, "cluster-token"), "lockstep-cluster-token");
    EXPECT_EQ(MountOf(container, "cluster-token", "token"), kDefaultTokenPath);
    EXPECT_EQ(Env(container)["LOCKSTEP_CLUSTER_TOKEN_FILE"]["value"].Scalar(), kDefaultTokenPath);
    EXPECT_FALSE(Env(container).count("LOCKSTEP_TLS_CERT_FILE"));
    EXPECT_EQ(SecretVolume(pod, "tls"), "");
  }
}

TEST(K8sRenderTest, TlsFilesOfTheConfigAreMountedFromTheTlsSecretInEveryPod) {
  absl::StatusOr<std::vector<RenderedFile>> files = RenderText(ExampleText(1), "example.yaml");
  ASSERT_TRUE(files.ok()) << files.status();
  std::map<std::string, YAML::Node> objects = Objects(*files);
  EXPECT_FALSE(objects.count("Secret/lockstep-tls")) << "the operator creates it";
  std::map<std::string, YAML::Node> pods = PodSpecs(objects);
  EXPECT_EQ(pods.size(), 5u);  // the router and the leader and worker templates of two LWS
  for (auto& [id, pod] : pods) {
    SCOPED_TRACE(id);
    const YAML::Node container = pod["containers"][0];
    std::map<std::string, YAML::Node> env = Env(container);
    EXPECT_EQ(SecretVolume(pod, "tls"), "lockstep-tls");
    for (const auto& [key, variable] : {std::pair{"tls.crt", "LOCKSTEP_TLS_CERT_FILE"},
                                        std::pair{"tls.key", "LOCKSTEP_TLS_KEY_FILE"},
                                        std::pair{"ca.crt", "LOCKSTEP_TLS_CA_FILE"}}) {
      const std::string path = std::string("/var/run/secrets/lockstep/tls/") + key;
      EXPECT_EQ(MountOf(container, "tls", key), path);
      EXPECT_EQ(env[variable]["value"].Scalar(), path);
    }
    EXPECT_EQ(env["LOCKSTEP_TLS_SERVER_NAME"]["value"].Scalar(), "lockstep.cluster.internal");
    EXPECT_EQ(MountOf(container, "cluster-token", "token"), kDefaultTokenPath);
  }
}

// The router's HTTPS certificate and key and its API keys file come from Secrets the
// operator creates, mounted at the config's paths in the router pod and in no other.
TEST(K8sRenderTest, TheRoutersFilesAreMountedFromTheirSecretsInTheRouterPodOnly) {
  absl::StatusOr<std::vector<RenderedFile>> files = RenderText(ExampleText(1), "example.yaml");
  ASSERT_TRUE(files.ok()) << files.status();
  std::map<std::string, YAML::Node> objects = Objects(*files);
  EXPECT_FALSE(objects.count("Secret/lockstep-router-https")) << "the operator creates it";
  EXPECT_FALSE(objects.count("Secret/lockstep-api-keys")) << "the operator creates it";
  for (auto& [id, pod] : PodSpecs(objects)) {
    SCOPED_TRACE(id);
    const YAML::Node container = pod["containers"][0];
    const bool router = id == "Deployment/lockstep-router";
    EXPECT_EQ(SecretVolume(pod, "router-https"), router ? "lockstep-router-https" : "");
    EXPECT_EQ(SecretVolume(pod, "api-keys"), router ? "lockstep-api-keys" : "");
    EXPECT_EQ(MountOf(container, "router-https", "tls.crt"),
              router ? "/var/run/secrets/lockstep/router-https/tls.crt" : "");
    EXPECT_EQ(MountOf(container, "router-https", "tls.key"),
              router ? "/var/run/secrets/lockstep/router-https/tls.key" : "");
    EXPECT_EQ(MountOf(container, "api-keys", "api_keys"),
              router ? "/var/run/secrets/lockstep/api-keys/api_keys" : "");
    // The cluster's secrets stay in every pod.
    EXPECT_EQ(SecretVolume(pod, "tls"), "lockstep-tls");
    EXPECT_EQ(SecretVolume(pod, "cluster-token"), "lockstep-cluster-token");
  }
  // Without them in the config, nothing of them is rendered.
  absl::StatusOr<std::vector<RenderedFile>> plain = RenderText(ExampleText(0), "example.yaml");
  ASSERT_TRUE(plain.ok()) << plain.status();
  for (const RenderedFile& file : *plain) {
    EXPECT_EQ(file.text.find("router-https"), std::string::npos) << file.name;
    EXPECT_EQ(file.text.find("api-keys"), std::string::npos) << file.name;
  }
}

TEST(K8sRenderTest, ATokenFileNamedInTheConfigIsWhereTheSecretIsMounted) {
  absl::StatusOr<std::vector<RenderedFile>> files = RenderText(
      ExampleText(0) + "security: {cluster_token_file: /etc/lockstep-token/token}\n",
      "example.yaml");
  ASSERT_TRUE(files.ok()) << files.status();
  std::map<std::string, YAML::Node> objects = Objects(*files);
  for (auto& [id, pod] : PodSpecs(objects)) {
    SCOPED_TRACE(id);
    const YAML::Node container = pod["containers"][0];
    EXPECT_EQ(MountOf(container, "cluster-token", "token"), "/etc/lockstep-token/token");
    EXPECT_EQ(Env(container)["LOCKSTEP_CLUSTER_TOKEN_FILE"]["value"].Scalar(),
              "/etc/lockstep-token/token");
  }
}

TEST(K8sRenderTest, BadConfigsNameTheFieldOrFlag) {
  const std::string text = ExampleText(0);
  auto error_of = [](const absl::StatusOr<std::vector<RenderedFile>>& files) {
    EXPECT_FALSE(files.ok());
    return files.ok() ? std::string() : std::string(files.status().message());
  };
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string changed = text;
    const size_t at = changed.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return changed.replace(at, from.size(), to);
  };
  EXPECT_THAT(error_of(RenderText(text, "x.yaml", "")), HasSubstr("--image: is required"));
  EXPECT_THAT(error_of(RenderText(replaced("\"0.0.0.0:50051\"", "\"0.0.0.0:0\""), "x.yaml")),
              HasSubstr("router.grpc_listen: needs a fixed port"));
  EXPECT_THAT(error_of(RenderText(replaced("/models/tiny-moe\n", "models/tiny-moe\n"), "x.yaml")),
              HasSubstr("model.path: must be an absolute path"));
  // gen1 with another world size than gen0.
  const std::string gen1 = "  - name: gen1\n    role: generation\n    world_size: 4";
  EXPECT_THAT(error_of(RenderText(replaced(gen1, "  - name: gen1\n    role: generation\n"
                                                 "    world_size: 2"),
                                  "x.yaml")),
              HasSubstr("instances[2].world_size: the generation instances share one pod "
                        "template"));
  // Security files: absolute, outside the config's mount; TLS needs a server name.
  EXPECT_THAT(error_of(RenderText(text + "security: {cluster_token_file: token}\n", "x.yaml")),
              HasSubstr("security.cluster_token_file: must be an absolute path"));
  EXPECT_THAT(error_of(RenderText(text + "security: {cluster_token_file: /etc/lockstep/token}\n",
                                  "x.yaml")),
              HasSubstr("security.cluster_token_file: must be outside /etc/lockstep"));
  EXPECT_THAT(error_of(RenderText(text + "security: {tls_cert_file: /t/c, tls_key_file: /t/k, "
                                         "tls_ca_file: /t/ca}\n",
                                  "x.yaml")),
              HasSubstr("security.tls_server_name: is required with TLS on Kubernetes"));
  // The router's files too.
  EXPECT_THAT(error_of(RenderText(replaced("  policy: least_load\n",
                                           "  policy: least_load\n  api_keys_file: keys\n"),
                                  "x.yaml")),
              HasSubstr("router.api_keys_file: must be an absolute path"));
  EXPECT_THAT(error_of(RenderText(replaced("  policy: least_load\n",
                                           "  policy: least_load\n  https_cert_file: "
                                           "/etc/lockstep/r.pem\n  https_key_file: /k/r.key\n"),
                                  "x.yaml")),
              HasSubstr("router.https_cert_file: must be outside /etc/lockstep"));
  absl::StatusOr<config::DeploymentConfig> config = config::ParseDeploymentConfig(text, "", "x");
  ASSERT_TRUE(config.ok());
  EXPECT_THAT(error_of(RenderK8s(*config, {.image = kImage, .config_text = text})),
              HasSubstr("cluster token: is required"));
  // The config's own validation names placement fields too.
  EXPECT_THAT(error_of(RenderText(replaced("gpus_per_node: 4", "gpus_per_node: 2"), "x.yaml")),
              HasSubstr("placement.gpus_per_node: must be >="));
}

// The examples are exactly what the renderer writes today. To regenerate one:
//   tools/lockstep render k8s CONFIG --image lockstep:dev \
//     --cluster-token-file deploy/k8s/examples/example_cluster_token --out DIR
TEST(K8sRenderTest, CheckedInExamplesMatchTheRenderer) {
  for (const Example& example : Examples()) {
    absl::StatusOr<std::vector<RenderedFile>> files =
        RenderText(ReadFile(example.config), example.config);
    ASSERT_TRUE(files.ok()) << files.status();
    std::set<std::string> expected;
    for (const RenderedFile& file : *files) {
      expected.insert(file.name);
      const std::string path = absl::StrCat(example.dir, "/", file.name);
      EXPECT_EQ(ReadFile(path), file.text)
          << path << " is stale; regenerate it with\n  tools/lockstep render k8s "
          << example.config << " --image " << kImage << " --cluster-token-file " << kTokenFile
          << " --out " << example.dir;
    }
    for (const auto& entry : std::filesystem::directory_iterator(example.dir)) {
      EXPECT_TRUE(expected.count(entry.path().filename().string()))
          << entry.path() << " is not rendered any more; remove it";
    }
  }
}

}  // namespace
}  // namespace lockstep::deploy
