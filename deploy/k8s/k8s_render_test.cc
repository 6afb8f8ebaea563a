// `lockstep render k8s`: structural checks on the rendered manifests, errors that
// name the field, and the golden check of deploy/k8s/examples/.
#include "deploy/k8s/k8s_render.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/config/config_yaml.h"
#include "yaml-cpp/yaml.h"

namespace lockstep::deploy {
namespace {

using ::testing::HasSubstr;

constexpr char kImage[] = "lockstep:dev";

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

absl::StatusOr<std::vector<RenderedFile>> RenderText(const std::string& text,
                                                    const std::string& source,
                                                    const std::string& image = kImage) {
  absl::StatusOr<config::DeploymentConfig> config =
      config::ParseDeploymentConfig(text, "", source);
  if (!config.ok()) return config.status();
  return RenderK8s(*config, {.image = image, .config_text = text, .source = source});
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
  // The config's own validation names placement fields too.
  EXPECT_THAT(error_of(RenderText(replaced("gpus_per_node: 4", "gpus_per_node: 2"), "x.yaml")),
              HasSubstr("placement.gpus_per_node: must be >="));
}

// The examples are exactly what the renderer writes today. To regenerate one:
//   tools/lockstep render k8s CONFIG --image lockstep:dev --out DIR
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
          << example.config << " --image " << kImage << " --out " << example.dir;
    }
    for (const auto& entry : std::filesystem::directory_iterator(example.dir)) {
      EXPECT_TRUE(expected.count(entry.path().filename().string()))
          << entry.path() << " is not rendered any more; remove it";
    }
  }
}

}  // namespace
}  // namespace lockstep::deploy
