#include "runtime/security/grpc_credentials.h"

#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "grpcpp/grpcpp.h"
#include "runtime/security/cluster_security.h"
#include "runtime/security/testing/echo_test.grpc.pb.h"
#include "runtime/security/testing/test_certs.h"

namespace lockstep::security {
namespace {

using ::lockstep::security::testing::EchoMessage;
using ::lockstep::security::testing::EchoService;
using ::lockstep::testing::StatusIs;

class CountingEcho final : public EchoService::Service {
 public:
  grpc::Status Echo(grpc::ServerContext* /*context*/, const EchoMessage* request,
                    EchoMessage* response) override {
    calls.fetch_add(1);
    response->set_text(request->text());
    return grpc::Status::OK;
  }
  std::atomic<int> calls{0};
};

// An echo server on a free port with `security`.
class EchoServer {
 public:
  explicit EchoServer(const ClusterSecurity& security, std::vector<std::string> open_methods = {}) {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", ServerCredentials(security, std::move(open_methods)),
                             &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    address_ = "127.0.0.1:" + std::to_string(port);
  }
  ~EchoServer() { server_->Shutdown(); }
  const std::string& address() const { return address_; }
  int calls() const { return service_.calls.load(); }

 private:
  CountingEcho service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

grpc::Status CallEcho(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = EchoService::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  EchoMessage request, response;
  request.set_text("hello");
  grpc::Status status = stub->Echo(&context, request, &response);
  if (status.ok() && response.text() != "hello") {
    return grpc::Status(grpc::StatusCode::INTERNAL, "echo mismatch: " + response.text());
  }
  return status;
}

ClusterSecurity WithToken(const std::string& token) {
  ClusterSecurity security;
  security.cluster_token = token;
  return security;
}

TEST(GrpcCredentialsTest, PlaintextServerRequiresTheToken) {
  EchoServer server(WithToken("right"));
  const int64_t rejected_before = RejectedCalls();

  grpc::Status none = CallEcho(grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED) << none.error_message();
  EXPECT_EQ(none.error_message(), "no cluster token");

  grpc::Status wrong = CallEcho(CreateChannel(server.address(), WithToken("wrong")));
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED) << wrong.error_message();
  EXPECT_EQ(wrong.error_message(), "wrong cluster token");

  grpc::Status prefix = CallEcho(CreateChannel(server.address(), WithToken("righ")));
  EXPECT_EQ(prefix.error_code(), grpc::StatusCode::UNAUTHENTICATED);

  // Rejected calls never reached the handler.
  EXPECT_EQ(server.calls(), 0);
  EXPECT_EQ(RejectedCalls() - rejected_before, 3);

  grpc::Status right = CallEcho(CreateChannel(server.address(), WithToken("right")));
  EXPECT_TRUE(right.ok()) << right.error_message();
  EXPECT_EQ(server.calls(), 1);
}

TEST(GrpcCredentialsTest, OpenMethodsNeedNoToken) {
  EchoServer open(WithToken("right"), {"/lockstep.security.testing.EchoService/Echo"});
  EXPECT_TRUE(CallEcho(grpc::CreateChannel(open.address(), grpc::InsecureChannelCredentials())).ok());
  EchoServer other(WithToken("right"), {"/lockstep.security.testing.EchoService/Other"});
  EXPECT_EQ(CallEcho(grpc::CreateChannel(other.address(), grpc::InsecureChannelCredentials()))
                .error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST(GrpcCredentialsTest, WithoutTokenEveryCallIsServed) {
  EchoServer server(ClusterSecurity{});
  EXPECT_TRUE(CallEcho(grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials())).ok());
  EXPECT_TRUE(CallEcho(CreateChannel(server.address(), WithToken("any"))).ok());
  EXPECT_EQ(server.calls(), 2);
}

TEST(GrpcCredentialsTest, ProcessSecurityIsWhatTheDefaultsUse) {
  ScopedClusterSecurity scoped(WithToken("process-token"));
  EchoServer server(ProcessClusterSecurity());
  EXPECT_TRUE(CallEcho(CreateChannel(server.address())).ok());
  {
    ScopedClusterSecurity other(WithToken("another-cluster"));
    EXPECT_EQ(CallEcho(CreateChannel(server.address())).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_EQ(ProcessClusterSecurity().cluster_token, "process-token");
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<TestCerts> certs = MakeTestCerts(::testing::TempDir());
    LOCKSTEP_ASSERT_OK(certs.status());
    certs_ = *certs;
  }
  TestCerts certs_;
};

TEST_F(TlsTest, TlsWithTheClusterCaAndToken) {
  EchoServer server(certs_.Security("tls-token"));
  grpc::Status ok = CallEcho(CreateChannel(server.address(), certs_.Security("tls-token")));
  EXPECT_TRUE(ok.ok()) << ok.error_message();

  // The right CA but a wrong token.
  EXPECT_EQ(CallEcho(CreateChannel(server.address(), certs_.Security("wrong"))).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  // Plaintext to a TLS port, even with the token: no connection.
  EXPECT_EQ(CallEcho(CreateChannel(server.address(), WithToken("tls-token"))).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(server.calls(), 1);
}

TEST_F(TlsTest, ClientRejectsAServerItsCaDidNotSign) {
  // The server presents the stranger's certificate; the client trusts the cluster CA.
  SecurityFiles stranger{.tls_cert_file = certs_.other_cert_file,
                         .tls_key_file = certs_.other_key_file,
                         .tls_ca_file = certs_.other_ca_file};
  absl::StatusOr<ClusterSecurity> stranger_security = LoadClusterSecurity(stranger);
  LOCKSTEP_ASSERT_OK(stranger_security.status());
  stranger_security->cluster_token = "tls-token";
  EchoServer server(*stranger_security);
  EXPECT_EQ(CallEcho(CreateChannel(server.address(), certs_.Security("tls-token"))).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(server.calls(), 0);
}

TEST(LoadClusterSecurityTest, ReadsFilesAndChecksTlsIsComplete) {
  const std::string token_file = ::testing::TempDir() + "/cluster_token";
  std::ofstream(token_file) << "tok\n";
  absl::StatusOr<ClusterSecurity> loaded = LoadClusterSecurity({.cluster_token_file = token_file});
  LOCKSTEP_ASSERT_OK(loaded.status());
  EXPECT_EQ(loaded->cluster_token, "tok");
  EXPECT_FALSE(loaded->tls());
  EXPECT_THAT(LoadClusterSecurity({.tls_cert_file = token_file}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(LoadClusterSecurity({.cluster_token_file = "/nonexistent/token"}),
              StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace lockstep::security
