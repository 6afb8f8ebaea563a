// Rendered Kubernetes pods read their own Secrets, checked without a container: the
// test renders a deployment with `lockstep render k8s` (the cluster token, TLS, the
// router's HTTPS certificate and its API keys), lays out every file the router pod and
// the aggregated instance's pod mount with the owner, group and mode kubelet gives them
// (deploy/k8s/pod_file_access.h) in a directory of its own, and runs each pod's command
// as the user and groups the pod runs as (setpriv, starting from the image's USER in
// deploy/docker/Dockerfile). The router must start, which reads its token, TLS files,
// HTTPS certificate and key and API keys, and the instance must register with it over
// TLS with the token. Needs root (it chowns files to the pods' user and switches to it);
// outside the sandbox for the same reason.
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "deploy/k8s/pod_file_access.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/launcher/process_supervisor.h"
#include "runtime/security/testing/test_certs.h"
#include "tests/e2e/e2e_util.h"
#include "yaml-cpp/yaml.h"

namespace lockstep::e2e {
namespace {

using deploy::ContainerFiles;
using deploy::MountedFile;
namespace fs = std::filesystem;

constexpr absl::Duration kDeadline = absl::Seconds(60);
constexpr char kToken[] = "6b38732d7365637265742d66696c65732d746573742d746f6b656e2d30303031";

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::trunc) << text;
}

// A directory of the test's own under /tmp, which the pods' user can enter (the test's
// TEST_TMPDIR lies under root's home); removed at the end.
class ScratchRoot {
 public:
  ScratchRoot() {
    std::string pattern = "/tmp/lockstep-k8s-files-XXXXXX";
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
    if (!path_.empty()) chmod(path_.c_str(), 0755);
  }
  ~ScratchRoot() {
    std::error_code ignored;
    if (!path_.empty()) fs::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The config the test renders: every secret the renderer mounts, at paths under `root`
// (absolute, as in a container); the instance runs the fake engine.
std::string ConfigYaml(const std::string& root) {
  const std::string s = root + "/secrets";
  return absl::StrCat(R"(model: {name: tiny, path: )", root, R"(/model}
router:
  http_listen: "0.0.0.0:8000"
  grpc_listen: "0.0.0.0:50051"
  heartbeat_interval_ms: 100
  health_check_interval_ms: 100
  https_cert_file: )", s, R"(/router-https/tls.crt
  https_key_file: )", s, R"(/router-https/tls.key
  api_keys_file: )", s, R"(/api-keys/api_keys
security:
  cluster_token_file: )", s, R"(/cluster_token
  tls_cert_file: )", s, R"(/tls/tls.crt
  tls_key_file: )", s, R"(/tls/tls.key
  tls_ca_file: )", s, R"(/tls/ca.crt
  tls_server_name: localhost
instances:
  - name: agg0
    role: aggregated
    world_size: 1
    engine: fake
    kv: {tokens_per_block: 16, num_blocks: 64}
)");
}

class K8sSecretFilesTest : public ::testing::Test {
 protected:
  // Where a container path lies on this machine: the config's paths are under the
  // scratch root already; others (/etc/lockstep) go under ROOT/pod.
  std::string HostPath(const std::string& container_path) const {
    if (absl::StartsWith(container_path, root_.path() + "/")) return container_path;
    return root_.path() + "/pod" + container_path;
  }

  // Writes each file of `container` with its owner, group and mode; a path laid out
  // already must have been laid out the same.
  void LayOut(const ContainerFiles& container,
              const std::map<std::pair<std::string, std::string>, std::string>& contents) {
    for (const MountedFile& file : container.files) {
      SCOPED_TRACE(container.where + ": " + file.Describe());
      auto content = contents.find({file.object, file.key});
      ASSERT_NE(content, contents.end()) << "the test has no content for it";
      const auto layout = std::make_tuple(file.uid, file.gid, file.mode);
      auto [it, fresh] = laid_out_.emplace(file.path, layout);
      if (!fresh) {
        ASSERT_EQ(it->second, layout) << "pods lay out this file differently";
        continue;
      }
      const std::string path = HostPath(file.path);
      for (fs::path dir = fs::path(path).parent_path(); dir.string().size() > root_.path().size();
           dir = dir.parent_path()) {
        fs::create_directories(dir);
        chmod(dir.c_str(), 0755);  // root's, as the container runtime makes mount points
      }
      WriteFile(path, content->second);
      ASSERT_EQ(chown(path.c_str(), static_cast<uid_t>(file.uid), static_cast<gid_t>(file.gid)),
                0);
      ASSERT_EQ(chmod(path.c_str(), static_cast<mode_t>(file.mode)), 0);
    }
  }

  // `container`'s command and environment, run as its user and groups: the image's
  // `lockstep` is the test's binary, mounted paths are mapped, fixed ports become port
  // 0 on loopback, `extra` is appended; `env` overrides variables the pod would fill.
  launcher::ProcessSpec AsPod(const std::string& name, const ContainerFiles& container,
                              const std::vector<std::string>& extra,
                              const std::map<std::string, std::string>& env) {
    std::vector<std::string> argv = {"/usr/bin/setpriv",
                                     absl::StrCat("--reuid=", container.identity.uid),
                                     absl::StrCat("--regid=", container.identity.gid)};
    if (container.identity.groups.empty()) {
      argv.push_back("--clear-groups");
    } else {
      argv.push_back(absl::StrCat("--groups=", absl::StrJoin(container.identity.groups, ",")));
    }
    argv.insert(argv.end(), {"--pdeathsig=KILL", "/usr/bin/env", "-i", "PATH=/usr/bin:/bin"});
    for (const auto& [var, value] : container.env) {
      auto given = env.find(var);
      const std::string v = given != env.end()      ? given->second
                            : absl::StartsWith(value, "/") ? HostPath(value)
                                                           : value;
      argv.push_back(absl::StrCat(var, "=", v));
    }
    for (size_t i = 0; i < container.command.size(); ++i) {
      const std::string& arg = container.command[i];
      const std::string previous = i > 0 ? container.command[i - 1] : "";
      if (i == 0) {
        argv.push_back(binary_);
      } else if (previous == "--http-listen" || previous == "--grpc-listen" ||
                 previous == "--leader-listen") {
        argv.push_back("127.0.0.1:0");
      } else if (absl::StartsWith(arg, "/")) {
        argv.push_back(HostPath(arg));
      } else {
        argv.push_back(arg);
      }
    }
    argv.insert(argv.end(), extra.begin(), extra.end());
    return {name, argv, root_.path() + "/" + name + ".log"};
  }

  ScratchRoot root_;
  std::string binary_;
  std::map<std::string, std::tuple<int64_t, int64_t, int>> laid_out_;  // by container path
};

TEST_F(K8sSecretFilesTest, TheRouterAndAnInstanceReadTheirSecretsAsThePodsUser) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: it chowns files to the pods' user";
  ASSERT_FALSE(root_.path().empty());
  const std::string root = root_.path();
  absl::StatusOr<deploy::ImageUser> image =
      deploy::ParseDockerfileUser(Slurp("deploy/docker/Dockerfile"));
  ASSERT_TRUE(image.ok()) << image.status();
  ASSERT_NE(image->uid, 0);

  // The binary where the pods' user can run it: a hard link (or a copy) under the root.
  fs::create_directories(root + "/bin");
  chmod((root + "/bin").c_str(), 0755);
  binary_ = root + "/bin/lockstep";
  const std::string built = fs::canonical(LockstepBinary()).string();
  std::error_code ec;
  fs::create_hard_link(built, binary_, ec);
  if (ec || (fs::status(binary_).permissions() & fs::perms::others_exec) == fs::perms::none) {
    fs::remove(binary_, ec);
    ASSERT_TRUE(fs::copy_file(built, binary_));
    chmod(binary_.c_str(), 0755);
  }
  // The model (baked into the image on a real cluster): a byte-level tokenizer.
  WriteFile(root + "/model/lockstep_tokenizer.json",
            R"({"type": "byte_level", "vocab_size": 300, "bos_token_id": 256, "eos_token_id": 257})");
  chmod((root + "/model").c_str(), 0755);
  chmod((root + "/model/lockstep_tokenizer.json").c_str(), 0644);

  // Render with the CLI, as an operator would.
  fs::create_directories(root + "/render");
  WriteFile(root + "/render/deployment.yaml", ConfigYaml(root));
  WriteFile(root + "/render/token", kToken);
  launcher::ProcessSupervisor supervisor;
  ASSERT_TRUE(supervisor
                  .Start({"render",
                          {binary_, "render", "k8s", root + "/render/deployment.yaml", "--image",
                           "lockstep:dev", "--cluster-token-file", root + "/render/token", "--out",
                           root + "/render/out"},
                          root + "/render.log"})
                  .ok());
  launcher::ProcessSupervisor::WaitResult rendered = supervisor.Wait(kDeadline);
  ASSERT_EQ(rendered.exited.size(), 1u);
  ASSERT_TRUE(rendered.exited[0].clean()) << Slurp(root + "/render.log");
  std::vector<YAML::Node> objects;
  for (const auto& entry : fs::directory_iterator(root + "/render/out")) {
    for (const YAML::Node& doc : YAML::LoadAll(Slurp(entry.path().string()))) {
      objects.push_back(doc);
    }
  }
  absl::StatusOr<std::vector<ContainerFiles>> containers =
      deploy::ContainerFilesOf(objects, *image);
  ASSERT_TRUE(containers.ok()) << containers.status();
  const ContainerFiles* router = nullptr;
  const ContainerFiles* instance = nullptr;
  std::map<std::pair<std::string, std::string>, std::string> contents;
  for (const ContainerFiles& container : *containers) {
    if (absl::StartsWith(container.where, "Deployment/lockstep-router ")) router = &container;
    if (absl::StartsWith(container.where, "StatefulSet/lockstep-agg ")) instance = &container;
  }
  ASSERT_NE(router, nullptr);
  ASSERT_NE(instance, nullptr);

  // What the files hold: the rendered ConfigMap and token Secret, and the Secrets the
  // operator creates (the test's certificates, valid for localhost).
  for (const YAML::Node& object : objects) {
    const std::string kind = object["kind"].Scalar();
    const std::string name = object["metadata"]["name"].Scalar();
    for (const char* field : {"data", "stringData"}) {
      if ((kind != "ConfigMap" && kind != "Secret") || !object[field]) continue;
      for (const auto& entry : object[field]) {
        contents[{name, entry.first.Scalar()}] = entry.second.Scalar();
      }
    }
  }
  absl::StatusOr<security::TestCerts> certs = security::MakeTestCerts(root);
  ASSERT_TRUE(certs.ok()) << certs.status();
  contents[{"lockstep-tls", "tls.crt"}] = Slurp(certs->cert_file);
  contents[{"lockstep-tls", "tls.key"}] = Slurp(certs->key_file);
  contents[{"lockstep-tls", "ca.crt"}] = Slurp(certs->ca_file);
  contents[{"lockstep-router-https", "tls.crt"}] = Slurp(certs->cert_file);
  contents[{"lockstep-router-https", "tls.key"}] = Slurp(certs->key_file);
  contents[{"lockstep-api-keys", "api_keys"}] = "k8s-files-test-client-key\n";
  ASSERT_NO_FATAL_FAILURE(LayOut(*router, contents));
  ASSERT_NO_FATAL_FAILURE(LayOut(*instance, contents));
  EXPECT_GE(laid_out_.size(), 8u);  // config, token, 3 TLS, 2 HTTPS, API keys
  // The router writes its bound addresses here, as its user.
  const std::string run = root + "/run";
  fs::create_directories(run);
  ASSERT_EQ(chown(run.c_str(), static_cast<uid_t>(router->identity.uid),
                  static_cast<gid_t>(router->identity.gid)),
            0);

  // The router: it reads every secret at start, or exits naming the one it could not.
  const std::string address_file = run + "/router.address.json";
  ASSERT_TRUE(supervisor.Start(AsPod("router", *router, {"--address-file", address_file}, {}))
                  .ok());
  ASSERT_TRUE(supervisor.WaitReady([&] { return fs::exists(address_file); }, kDeadline).ok())
      << Slurp(root + "/router.log");
  const nlohmann::json address = nlohmann::json::parse(Slurp(address_file), nullptr, false);
  const std::string grpc = address.is_object() ? address.value("grpc", "") : "";
  ASSERT_FALSE(grpc.empty()) << Slurp(address_file);

  // The instance's pod: `lockstep instance` starts its rank, which registers with the
  // router over TLS with the token.
  ASSERT_TRUE(supervisor
                  .Start(AsPod("instance", *instance, {},
                               {{"POD_NAME", "lockstep-agg-0"},
                                {"LOCKSTEP_ADVERTISE_ADDRESS", "127.0.0.1"},
                                {"LOCKSTEP_RENDEZVOUS", grpc}}))
                  .ok());
  const absl::Status registered = supervisor.WaitReady(
      [&] {
        return absl::StrContains(Slurp(root + "/router.log"),
                                 "instance agg0 (aggregated, DEP1) registered at");
      },
      kDeadline);
  EXPECT_TRUE(registered.ok()) << registered << "\nrouter:\n"
                               << Slurp(root + "/router.log") << "\ninstance:\n"
                               << Slurp(root + "/instance.log");
  for (const char* log : {"/router.log", "/instance.log"}) {
    EXPECT_FALSE(absl::StrContains(Slurp(root + log), "Permission denied")) << Slurp(root + log);
  }
  for (const launcher::ChildExit& exit : supervisor.StopAll(absl::Seconds(10))) {
    EXPECT_TRUE(exit.clean() || exit.signal == SIGTERM) << exit.Describe();
  }
}

}  // namespace
}  // namespace lockstep::e2e
