// A refused call is logged once per caller host, with the caller's address and the
// method; alone in its process because the log remembers hosts process-wide.
#include <chrono>
#include <memory>
#include <sstream>
#include <string>

#include "common/log.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "runtime/security/cluster_security.h"
#include "runtime/security/grpc_credentials.h"
#include "runtime/security/testing/echo_test.grpc.pb.h"
#include "runtime/security/token_checked_service.h"
#include "spdlog/sinks/ostream_sink.h"

namespace lockstep::security {
namespace {

using ::lockstep::security::testing::EchoMessage;
using ::lockstep::security::testing::EchoService;
using ::testing::HasSubstr;

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(TokenCheckedServiceLogTest, OncePerCallerHostWithItsAddress) {
  std::ostringstream out;
  spdlog::sink_ptr sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  AddLogSink(sink);

  ClusterSecurity security;
  security.cluster_token = "right";
  EchoService::Service service;  // every method unimplemented: never reached here
  std::unique_ptr<grpc::Service> checked = RequireClusterToken<EchoService>(&service, security);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", ServerTransportCredentials(security), &port);
  builder.RegisterService(checked.get());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  const std::string address = "127.0.0.1:" + std::to_string(port);

  // Three connections (three client ports) from one host, without and with a wrong token.
  for (const std::string token : {"", "wrong", ""}) {
    auto channel = token.empty() ? grpc::CreateChannel(address, grpc::InsecureChannelCredentials())
                                 : CreateChannel(address, ClusterSecurity{.cluster_token = token});
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    EchoMessage request, response;
    EXPECT_EQ(EchoService::NewStub(channel)->Echo(&context, request, &response).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  server->Shutdown();
  FlushAllLoggers();
  RemoveLogSink(sink);
  const std::string text = out.str();
  EXPECT_EQ(Count(text, "gRPC refused"), 1) << text;
  EXPECT_THAT(text, HasSubstr("gRPC refused a call to /lockstep.security.testing.EchoService/Echo: "
                              "no cluster token from ipv4:127.0.0.1:"));
  EXPECT_THAT(text, HasSubstr("further refusals from 127.0.0.1 are not logged"));
}

}  // namespace
}  // namespace lockstep::security
