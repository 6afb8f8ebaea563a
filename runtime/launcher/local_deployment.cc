#include "runtime/launcher/local_deployment.h"

#include <grpcpp/grpcpp.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "httplib.h"
#include "proto/router.grpc.pb.h"
#include "runtime/config/config_yaml.h"
#include "runtime/router/http/router_http_client.h"
#include "runtime/security/configured_security.h"
#include "runtime/security/grpc_credentials.h"

namespace lockstep::launcher {
absl::StatusOr<std::unique_ptr<LocalDeployment>> LocalDeployment::Start(
    const std::string& yaml, const std::string& run_dir, const std::string& lockstep_binary,
    absl::Duration ready_timeout) {
  std::filesystem::create_directories(run_dir);
  const std::string config_path = (std::filesystem::path(run_dir) / "deployment.yaml").string();
  {
    std::ofstream out(config_path);
    out << yaml;
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", config_path));
  }
  auto d = absl::WrapUnique(new LocalDeployment());
  ASSIGN_OR_RETURN(d->config_, config::LoadDeploymentConfig(config_path));
  RETURN_IF_ERROR(d->Launch(config_path, run_dir, lockstep_binary, ready_timeout));
  return d;
}

absl::StatusOr<std::unique_ptr<LocalDeployment>> LocalDeployment::StartFile(
    const std::string& config_path, const std::string& run_dir, const std::string& lockstep_binary,
    absl::Duration ready_timeout) {
  std::filesystem::create_directories(run_dir);
  auto d = absl::WrapUnique(new LocalDeployment());
  ASSIGN_OR_RETURN(d->config_, config::LoadDeploymentConfig(config_path));
  RETURN_IF_ERROR(d->Launch(config_path, run_dir, lockstep_binary, ready_timeout));
  return d;
}

absl::Status LocalDeployment::Launch(const std::string& config_path, const std::string& run_dir,
                                     const std::string& lockstep_binary,
                                     absl::Duration ready_timeout) {
  const PlanOptions options = {
      .lockstep_binary = lockstep_binary, .config_path = config_path, .run_dir = run_dir};
  RETURN_IF_ERROR(security::EnsureConfiguredClusterToken(run_dir, config_.security).status());
  ASSIGN_OR_RETURN(plan_, StartRouter(config_, options, supervisor_, ready_timeout));
  for (const ProcessSpec& w : plan_.workers) RETURN_IF_ERROR(supervisor_.Start(w));
  return WaitHealthy(ready_timeout);
}

LocalDeployment::~LocalDeployment() { supervisor_.StopAll(absl::Seconds(10)); }

absl::Status LocalDeployment::WaitHealthy(absl::Duration timeout) {
  return supervisor_.WaitReady(
      [&] {
        for (const config::InstanceConfig& i : config_.instances) {
          if (InstanceState(i.name) != "healthy") return false;
        }
        return true;
      },
      timeout);
}

std::string LocalDeployment::http_url() const {
  return router::RouterHttpUrl(config_.router, plan_.router_http);
}

absl::StatusOr<std::unique_ptr<httplib::Client>> LocalDeployment::HttpClient() const {
  return router::NewRouterHttpClient(http_url(), config_.router.https_ca_file);
}

std::pair<int, std::string> LocalDeployment::Post(const std::string& path, const std::string& body,
                                                  absl::Duration timeout) const {
  absl::StatusOr<std::unique_ptr<httplib::Client>> client = HttpClient();
  if (!client.ok()) return {0, client.status().ToString()};
  const int64_t seconds = absl::ToInt64Seconds(timeout);
  (*client)->set_read_timeout(seconds, 0);
  (*client)->set_write_timeout(seconds, 0);
  (*client)->set_connection_timeout(5, 0);
  httplib::Result r = (*client)->Post(path, body, "application/json");
  if (!r) return {0, absl::StrCat("transport error ", static_cast<int>(r.error()))};
  return {r->status, r->body};
}

std::pair<int, std::string> LocalDeployment::Get(const std::string& path) const {
  absl::StatusOr<std::unique_ptr<httplib::Client>> client = HttpClient();
  if (!client.ok()) return {0, client.status().ToString()};
  (*client)->set_read_timeout(10, 0);
  (*client)->set_connection_timeout(5, 0);
  httplib::Result r = (*client)->Get(path);
  if (!r) return {0, absl::StrCat("transport error ", static_cast<int>(r.error()))};
  return {r->status, r->body};
}

GrpcResult LocalDeployment::Generate(const std::vector<int32_t>& prompt, int max_tokens,
                                     uint64_t seed, absl::Duration timeout) const {
  v1::RouterGenerateRequest request;
  for (int32_t t : prompt) request.mutable_tokens()->add_ids(t);
  request.mutable_sampling()->set_max_tokens(max_tokens);
  request.mutable_sampling()->set_seed(seed);
  request.mutable_sampling()->set_ignore_eos(true);
  return Generate(std::move(request), timeout);
}

GrpcResult LocalDeployment::Generate(
    v1::RouterGenerateRequest request, absl::Duration timeout,
    const std::function<void(const v1::RouterGenerateResponse&)>& on_response) const {
  auto channel = security::CreateChannel(plan_.router_grpc);
  auto stub = v1::RouterService::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  if (!config_.router.api_key.empty()) {
    context.AddMetadata("authorization", "Bearer " + config_.router.api_key);
  }
  if (request.model().empty()) request.set_model(config_.model.name);
  GrpcResult result;
  auto reader = stub->Generate(&context, request);
  v1::RouterGenerateResponse response;
  while (reader->Read(&response)) {
    ++result.responses;
    if (on_response) on_response(response);
    result.tokens.insert(result.tokens.end(), response.token_ids().begin(),
                         response.token_ids().end());
    result.text += response.text();
    if (response.finished()) {
      result.finish_reason = response.finish_reason();
      result.error_code = response.error_code();
      result.error_message = response.error_message();
      result.prompt_tokens = response.prompt_tokens();
      result.completion_tokens = response.completion_tokens();
      result.drafts_proposed = response.drafts().proposed();
      result.drafts_accepted = response.drafts().accepted();
    }
  }
  const grpc::Status status = reader->Finish();
  if (!status.ok()) {
    result.error_code = status.error_code();
    result.error_message = status.error_message();
  }
  return result;
}

std::string LocalDeployment::InstanceState(const std::string& instance) const {
  auto channel = security::CreateChannel(plan_.router_grpc);
  auto stub = v1::RouterService::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  v1::ListInstancesResponse response;
  if (!stub->ListInstances(&context, v1::ListInstancesRequest(), &response).ok()) return "";
  for (const v1::InstanceInfo& info : response.instances()) {
    if (info.name() == instance) return info.state();
  }
  return "";
}

absl::Status LocalDeployment::RestartInstance(const std::string& instance) {
  for (const ProcessSpec& w : plan_.workers) {
    if (absl::StartsWith(w.name, instance + "/") && supervisor_.PidOf(w.name) < 0) {
      RETURN_IF_ERROR(supervisor_.Start(w));
    }
  }
  return absl::OkStatus();
}

std::vector<ChildExit> LocalDeployment::Reap() {
  return supervisor_.Wait(absl::ZeroDuration()).exited;
}

bool LocalDeployment::WaitFor(const std::function<bool()>& done, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() >= deadline) return false;
    supervisor_.Wait(absl::Milliseconds(20));
  }
  return true;
}

int64_t LocalDeployment::LoadOf(const std::string& instance) const {
  auto channel = security::CreateChannel(plan_.router_grpc);
  auto stub = v1::RouterService::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  v1::ListInstancesResponse response;
  if (!stub->ListInstances(&context, v1::ListInstancesRequest(), &response).ok()) return -1;
  for (const v1::InstanceInfo& info : response.instances()) {
    if (info.name() == instance) {
      return info.load().active_requests() + info.load().queued_requests();
    }
  }
  return -1;
}

std::string LocalDeployment::LogOf(const std::string& name) const {
  std::vector<ProcessSpec> all = plan_.workers;
  all.push_back(plan_.router);
  for (const ProcessSpec& p : all) {
    if (p.name == name) {
      std::ifstream in(p.log_path);
      std::stringstream ss;
      ss << in.rdbuf();
      return ss.str();
    }
  }
  return "";
}

}  // namespace lockstep::launcher
