#include "tools/cli/render_command.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "deploy/k8s/k8s_render.h"
#include "runtime/config/config_yaml.h"
#include "runtime/security/secret.h"
#include "tools/cli/flags.h"

namespace lockstep::cli {
namespace {

constexpr char kUsage[] =
    "usage: lockstep render k8s CONFIG --image IMAGE --out DIR [--name NAME] "
    "[--cluster-token-file FILE]\n";

int Fail(const std::string& message) {
  std::fprintf(stderr, "lockstep render: %s\n", message.c_str());
  return 2;
}

}  // namespace

int RunRenderCommand(const std::vector<std::string>& args) {
  FlagSet flags("render");
  deploy::K8sRenderOptions options;
  std::string out_dir, token_file;
  flags.AddString("image", &options.image, "container image with the lockstep binary");
  flags.AddPath("cluster-token-file", &token_file,
                "the cluster token for secret.yaml (else a new one); give the deployment's "
                "token when rendering again, so that running pods keep theirs");
  flags.AddString("name", &options.name, "prefix of every object's name");
  flags.AddPath("out", &out_dir, "directory to write the manifests into");
  if (std::optional<int> exit_code = flags.ParseCommandLine(args)) return *exit_code;
  const std::vector<std::string>& positional = flags.positional();
  if (positional.size() != 2 || positional[0] != "k8s" || out_dir.empty()) {
    std::fprintf(stderr, "%s", kUsage);
    return 2;
  }
  options.source = positional[1];
  const std::string path = ResolveUserPath(positional[1]);
  std::ifstream file(path);
  if (!file) return Fail("cannot read config file '" + path + "'");
  std::stringstream text;
  text << file.rdbuf();
  options.config_text = text.str();
  // No base directory: model paths stay as written (they are paths in the container).
  absl::StatusOr<config::DeploymentConfig> config =
      config::ParseDeploymentConfig(options.config_text, "", options.source);
  if (!config.ok()) return Fail(std::string(config.status().message()));
  absl::StatusOr<std::string> token =
      token_file.empty() ? security::GenerateToken() : security::ReadSecretFile(token_file);
  if (!token.ok()) return Fail("--cluster-token-file: " + std::string(token.status().message()));
  options.cluster_token = *std::move(token);
  absl::StatusOr<std::vector<deploy::RenderedFile>> files = deploy::RenderK8s(*config, options);
  if (!files.ok()) return Fail(std::string(files.status().message()));
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) return Fail("cannot create " + out_dir + ": " + ec.message());
  for (const deploy::RenderedFile& rendered : *files) {
    const std::filesystem::path target = std::filesystem::path(out_dir) / rendered.name;
    std::ofstream out(target, std::ios::trunc);
    if (rendered.name == "secret.yaml") {
      // The token: readable by its owner only, before anything is written.
      std::filesystem::permissions(
          target, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write, ec);
      if (ec) return Fail("cannot restrict " + target.string() + ": " + ec.message());
    }
    out << rendered.text;
    if (!out) return Fail("cannot write " + target.string());
    std::printf("%s\n", target.c_str());
  }
  return 0;
}

}  // namespace lockstep::cli
