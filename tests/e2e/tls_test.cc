// TLS end to end with certificates made at test time (docs/security.md §2), as real
// processes: a router with HTTPS (router.https_cert_file) and a context and a
// generation instance, every process with the cluster's TLS files
// (LOCKSTEP_TLS_CERT_FILE, _KEY_FILE, _CA_FILE). The launcher's /health polling, the
// OpenAI API, RouterService, worker registration and heartbeats (gRPC) and the KV
// transfer over the TCP data plane all run over TLS, and `lockstep bench` measures the
// deployment over HTTPS. In clear, each port refuses: plain HTTP gets a 400, a plaintext
// gRPC channel (even with the cluster token) cannot connect, and the data plane closes
// a plaintext puller that presents the right token.
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "proto/router.grpc.pb.h"
#include "proto/worker.grpc.pb.h"
#include "runtime/launcher/local_deployment.h"
#include "runtime/security/cluster_security.h"
#include "runtime/security/grpc_credentials.h"
#include "runtime/security/testing/test_certs.h"
#include "runtime/transfer/tcp_auth.h"
#include "runtime/transfer/tcp_wire.h"
#include "tests/e2e/e2e_util.h"

namespace lockstep::e2e {
namespace {

std::string Yaml(const std::string& model_dir, const security::TestCerts& certs) {
  return absl::StrCat(R"(model:
  name: tiny-moe
  path: )",
                      model_dir, R"(
router:
  heartbeat_interval_ms: 200
  health_check_interval_ms: 200
  https_cert_file: )",
                      certs.cert_file, R"(
  https_key_file: )",
                      certs.key_file, R"(
  https_ca_file: )",
                      certs.ca_file, R"(
instances:
  - name: ctx0
    role: context
    world_size: 1
    engine: cpu
    kv: {tokens_per_block: 16, num_blocks: 128}
  - name: gen0
    role: generation
    world_size: 1
    engine: cpu
    kv: {tokens_per_block: 16, num_blocks: 128}
)");
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The address in the context rank's "data plane at HOST:PORT (TLS)" log line.
std::string DataPlaneAddress(const launcher::LocalDeployment& d) {
  const std::string log = d.LogOf("ctx0/rank0");
  const std::string marker = "data plane at ";
  const size_t at = log.find(marker);
  if (at == std::string::npos) return "";
  const size_t begin = at + marker.size();
  const size_t end = log.find_first_of(" \n", begin);
  if (log.compare(end, 6, " (TLS)") != 0) return "";
  return log.substr(begin, end - begin);
}

grpc::StatusCode ListInstancesCode(const std::shared_ptr<grpc::Channel>& channel) {
  auto router = v1::RouterService::NewStub(channel);
  grpc::ClientContext call;
  call.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  v1::ListInstancesResponse list;
  return router->ListInstances(&call, v1::ListInstancesRequest(), &list).error_code();
}

grpc::StatusCode HealthCode(const std::shared_ptr<grpc::Channel>& channel) {
  auto worker = v1::WorkerService::NewStub(channel);
  grpc::ClientContext call;
  call.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  v1::HealthResponse health;
  return worker->Health(&call, v1::HealthRequest(), &health).error_code();
}

TEST(TlsTest, EveryPortSpeaksTlsAndRefusesPlaintext) {
  const std::string tmp = TestTmpDir();
  const std::string model = tmp + "/models/tiny-moe";
  ASSERT_TRUE(EnsureTinyMoe(model).ok());
  absl::StatusOr<security::TestCerts> certs = security::MakeTestCerts(tmp);
  ASSERT_TRUE(certs.ok()) << certs.status();
  // Every process of the deployment (and this one) inherits the cluster's TLS files.
  ASSERT_EQ(setenv("LOCKSTEP_TLS_CERT_FILE", certs->cert_file.c_str(), 1), 0);
  ASSERT_EQ(setenv("LOCKSTEP_TLS_KEY_FILE", certs->key_file.c_str(), 1), 0);
  ASSERT_EQ(setenv("LOCKSTEP_TLS_CA_FILE", certs->ca_file.c_str(), 1), 0);
  absl::StatusOr<std::unique_ptr<launcher::LocalDeployment>> started =
      launcher::LocalDeployment::Start(Yaml(model, *certs), tmp + "/tls_run", LockstepBinary(),
                                       absl::Seconds(120));
  ASSERT_TRUE(started.ok()) << started.status();
  launcher::LocalDeployment& d = **started;
  ASSERT_TRUE(security::ProcessClusterSecurity().tls());
  EXPECT_EQ(d.http_url(), "https://" + d.http_address());

  // The OpenAI API over HTTPS; the request's KV moves ctx0 -> gen0 over the TLS data plane.
  const auto [status, body] = d.Post(
      "/v1/completions", R"({"model": "tiny-moe", "prompt": "over tls", "max_tokens": 6})");
  ASSERT_EQ(status, 200) << body << LogTails(d);
  EXPECT_NE(body.find("\"completion_tokens\":6"), std::string::npos) << body;
  // RouterService.Generate over TLS.
  const launcher::GrpcResult generated = d.Generate({1, 2, 3, 4}, 5, 7);
  EXPECT_EQ(generated.error_code, 0) << generated.error_message;
  EXPECT_EQ(generated.tokens.size(), 5u);
  const std::string data_plane = DataPlaneAddress(d);
  ASSERT_FALSE(data_plane.empty()) << d.LogOf("ctx0/rank0");
  absl::StatusOr<v1::StatsResponse> gen_stats = InstanceStats(d, "gen0");
  ASSERT_TRUE(gen_stats.ok()) << gen_stats.status();
  EXPECT_EQ(gen_stats->transfers_received(), 2);
  EXPECT_EQ(gen_stats->transfer_failures(), 0);

  // Plain HTTP to the HTTPS port: 400, saying why.
  {
    const std::string host_port = d.http_address();
    const size_t colon = host_port.rfind(':');
    httplib::Client plain(host_port.substr(0, colon), std::stoi(host_port.substr(colon + 1)));
    httplib::Result result = plain.Get("/health");
    ASSERT_TRUE(result);
    EXPECT_EQ(result->status, 400);
    EXPECT_NE(result->body.find("HTTPS"), std::string::npos) << result->body;
  }

  // gRPC: with TLS and the token, served; a plaintext channel with the right token
  // cannot even connect, to the router or to a leader.
  const std::string token = security::ProcessClusterSecurity().cluster_token;
  security::ClusterSecurity plaintext;
  plaintext.cluster_token = token;
  std::string leader;
  {
    auto router = v1::RouterService::NewStub(security::CreateChannel(d.grpc_address()));
    grpc::ClientContext call;
    call.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    v1::ListInstancesResponse list;
    ASSERT_TRUE(router->ListInstances(&call, v1::ListInstancesRequest(), &list).ok());
    ASSERT_EQ(list.instances_size(), 2);
    leader = list.instances(0).leader_address();
  }
  EXPECT_EQ(ListInstancesCode(security::CreateChannel(d.grpc_address(), plaintext)),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(HealthCode(security::CreateChannel(leader, plaintext)), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(HealthCode(security::CreateChannel(leader)), grpc::StatusCode::OK);

  // The data plane: a plaintext puller with the right token gets no answer in clear.
  {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    absl::StatusOr<transfer::TcpSocket> socket = transfer::ConnectTcp(data_plane, deadline);
    ASSERT_TRUE(socket.ok()) << socket.status();
    ASSERT_TRUE(transfer::SendTcpToken(*socket, token, deadline).ok());
    transfer::FrameHeader frame;
    EXPECT_TRUE(absl::IsUnavailable(
        transfer::RecvAll(*socket, &frame, sizeof(frame), deadline, nullptr)));
  }

  // `lockstep bench` over HTTPS (and its counters over TLS gRPC).
  const std::string bench_log = tmp + "/tls_bench.log";
  const std::string command = absl::StrCat(
      "timeout 120 ", LockstepBinary(), " bench --http ", d.http_url(), " --ca-file ",
      certs->ca_file, " --grpc ", d.grpc_address(),
      " --requests 4 --concurrency 2 --min-output 2 --max-output 4 > ", bench_log, " 2>&1");
  EXPECT_EQ(std::system(command.c_str()), 0) << Slurp(bench_log);
  EXPECT_NE(Slurp(bench_log).find("requests 4: completed 4, failed 0"), std::string::npos)
      << Slurp(bench_log);

  // Nothing the refused connections sent changed the deployment: it still serves.
  EXPECT_EQ(d.Generate({5, 6, 7}, 3, 8).error_code, 0) << LogTails(d);
}

}  // namespace
}  // namespace lockstep::e2e
