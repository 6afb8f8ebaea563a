// A launched deployment shares one cluster token (docs/security.md): the launcher
// writes it to the run directory (owner-only) and every process uses it, so the
// deployment serves; a caller without it, or with a wrong one, gets UNAUTHENTICATED
// from the router's membership methods and from every WorkerService method of a leader
// (a refused Drain would otherwise stop the instance: it still serves afterwards).
#include <sys/stat.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/router.grpc.pb.h"
#include "proto/worker.grpc.pb.h"
#include "runtime/launcher/local_deployment.h"
#include "runtime/security/cluster_security.h"
#include "runtime/security/grpc_credentials.h"
#include "tests/e2e/e2e_util.h"

namespace lockstep::e2e {
namespace {

std::string Yaml(const std::string& model_dir) {
  return absl::StrCat(R"(model:
  name: tiny-moe
  path: )",
                      model_dir, R"(
instances:
  - name: agg0
    role: aggregated
    world_size: 1
    engine: cpu
    kv: {tokens_per_block: 16, num_blocks: 128}
)");
}

void Deadline(grpc::ClientContext& call) {
  call.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
}

// A channel that presents `token` (empty: a plain channel that presents nothing).
std::shared_ptr<grpc::Channel> ChannelWith(const std::string& address, const std::string& token) {
  if (token.empty()) return grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  security::ClusterSecurity security;
  security.cluster_token = token;
  return security::CreateChannel(address, security);
}

// The code of every WorkerService method called through `channel`.
std::vector<grpc::StatusCode> WorkerCodes(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = v1::WorkerService::NewStub(channel);
  std::vector<grpc::StatusCode> codes;
  {
    grpc::ClientContext call;
    Deadline(call);
    v1::HealthResponse response;
    codes.push_back(stub->Health(&call, v1::HealthRequest(), &response).error_code());
  }
  {
    grpc::ClientContext call;
    Deadline(call);
    v1::StatsResponse response;
    codes.push_back(stub->Stats(&call, v1::StatsRequest(), &response).error_code());
  }
  {
    grpc::ClientContext call;
    Deadline(call);
    v1::CancelRequest request;
    request.set_request_id(987654321);
    v1::CancelResponse response;
    codes.push_back(stub->Cancel(&call, request, &response).error_code());
  }
  {
    grpc::ClientContext call;
    Deadline(call);
    v1::GenerateRequest request;
    request.set_request_id(987654322);
    auto reader = stub->Generate(&call, request);
    v1::GenerateResponse response;
    while (reader->Read(&response)) {
    }
    codes.push_back(reader->Finish().error_code());
  }
  return codes;
}

TEST(ClusterTokenTest, LaunchedDeploymentNeedsItsToken) {
  const std::string tmp = TestTmpDir();
  const std::string model = tmp + "/models/tiny-moe";
  ASSERT_TRUE(EnsureTinyMoe(model).ok());
  const std::string run_dir = tmp + "/cluster_token_run";
  absl::StatusOr<std::unique_ptr<launcher::LocalDeployment>> started =
      launcher::LocalDeployment::Start(Yaml(model), run_dir, LockstepBinary(), absl::Seconds(120));
  ASSERT_TRUE(started.ok()) << started.status();
  launcher::LocalDeployment& d = **started;

  const std::string token = security::ProcessClusterSecurity().cluster_token;
  ASSERT_EQ(token.size(), 64u);
  struct stat st;
  ASSERT_EQ(stat(getenv("LOCKSTEP_CLUSTER_TOKEN_FILE"), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // Every process has it: the leader registered and the deployment serves.
  ASSERT_EQ(d.Generate({1, 2, 3}, 4, 1).error_code, 0) << LogTails(d);

  std::string leader;
  {
    auto router = v1::RouterService::NewStub(ChannelWith(d.grpc_address(), token));
    grpc::ClientContext call;
    Deadline(call);
    v1::ListInstancesResponse list;
    ASSERT_TRUE(router->ListInstances(&call, v1::ListInstancesRequest(), &list).ok());
    ASSERT_EQ(list.instances_size(), 1);
    leader = list.instances(0).leader_address();
  }
  for (const std::string& bad : {std::string(), std::string(64, 'a')}) {
    SCOPED_TRACE(bad.empty() ? "no token" : "wrong token");
    auto router = v1::RouterService::NewStub(ChannelWith(d.grpc_address(), bad));
    grpc::ClientContext call;
    Deadline(call);
    v1::ListInstancesResponse list;
    EXPECT_EQ(router->ListInstances(&call, v1::ListInstancesRequest(), &list).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    for (grpc::StatusCode code : WorkerCodes(ChannelWith(leader, bad))) {
      EXPECT_EQ(code, grpc::StatusCode::UNAUTHENTICATED);
    }
    auto worker = v1::WorkerService::NewStub(ChannelWith(leader, bad));
    grpc::ClientContext drain_call;
    Deadline(drain_call);
    v1::DrainResponse drained;
    EXPECT_EQ(worker->Drain(&drain_call, v1::DrainRequest(), &drained).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  // With the token each method is served (Cancel of an unknown id and an empty
  // Generate are answered by the service itself, not refused at the door).
  for (grpc::StatusCode code : WorkerCodes(ChannelWith(leader, token))) {
    EXPECT_NE(code, grpc::StatusCode::UNAUTHENTICATED);
  }
  // Nothing the refused calls sent changed the deployment: it still serves.
  EXPECT_EQ(d.Generate({4, 5, 6}, 4, 2).error_code, 0) << LogTails(d);
}

}  // namespace
}  // namespace lockstep::e2e
