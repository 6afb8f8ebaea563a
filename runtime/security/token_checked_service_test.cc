#include "runtime/security/token_checked_service.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/testing/status_matchers.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/impl/client_unary_call.h"
#include "grpcpp/impl/rpc_method.h"
#include "gtest/gtest.h"
#include "runtime/security/cluster_security.h"
#include "runtime/security/grpc_credentials.h"
#include "runtime/security/testing/echo_test.grpc.pb.h"
#include "runtime/security/testing/test_certs.h"
#include "runtime/security/token_check.h"

namespace lockstep::security {
namespace {

using ::lockstep::security::testing::EchoMessage;
using ::lockstep::security::testing::EchoService;

constexpr char kEcho[] = "/lockstep.security.testing.EchoService/Echo";

class CountingEcho final : public EchoService::Service {
 public:
  grpc::Status Echo(grpc::ServerContext* /*context*/, const EchoMessage* request,
                    EchoMessage* response) override {
    calls.fetch_add(1);
    response->set_text(request->text());
    return grpc::Status::OK;
  }
  grpc::Status Spell(grpc::ServerContext* /*context*/, const EchoMessage* request,
                     grpc::ServerWriter<EchoMessage>* writer) override {
    calls.fetch_add(1);
    for (char c : request->text()) {
      EchoMessage letter;
      letter.set_text(std::string(1, c));
      writer->Write(letter);
    }
    return grpc::Status::OK;
  }
  std::atomic<int> calls{0};
};

// The same service on gRPC's callback API: no thread waits on any of its calls.
class CallbackEcho final : public EchoService::CallbackService {
 public:
  grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* context, const EchoMessage* request,
                                 EchoMessage* response) override {
    calls.fetch_add(1);
    response->set_text(request->text());
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  grpc::ServerWriteReactor<EchoMessage>* Spell(grpc::CallbackServerContext* /*context*/,
                                               const EchoMessage* request) override {
    calls.fetch_add(1);
    return new Speller(request->text());
  }
  std::atomic<int> calls{0};

 private:
  class Speller final : public grpc::ServerWriteReactor<EchoMessage> {
   public:
    explicit Speller(std::string text) : text_(std::move(text)) { Next(); }
    void OnWriteDone(bool ok) override {
      if (ok) {
        Next();
      } else {
        Finish(grpc::Status::CANCELLED);
      }
    }
    void OnDone() override { delete this; }

   private:
    void Next() {
      if (next_ == text_.size()) {
        Finish(grpc::Status::OK);
        return;
      }
      letter_.set_text(std::string(1, text_[next_++]));
      StartWrite(&letter_);
    }
    const std::string text_;
    size_t next_ = 0;
    EchoMessage letter_;
  };
};

// An echo server on a free port whose service is wrapped with `security`'s token.
template <class Impl = CountingEcho>
class EchoServer {
 public:
  explicit EchoServer(const ClusterSecurity& security, std::vector<std::string> open_methods = {})
      : checked_(RequireClusterToken<EchoService>(&service_, security, std::move(open_methods))) {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", ServerTransportCredentials(security), &port);
    builder.RegisterService(checked_.get());
    server_ = builder.BuildAndStart();
    address_ = "127.0.0.1:" + std::to_string(port);
  }
  ~EchoServer() { server_->Shutdown(); }
  const std::string& address() const { return address_; }
  int calls() const { return service_.calls.load(); }

 private:
  Impl service_;
  std::unique_ptr<grpc::Service> checked_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

void Deadline(grpc::ClientContext& context) {
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
}

grpc::Status CallEcho(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = EchoService::NewStub(channel);
  grpc::ClientContext context;
  Deadline(context);
  EchoMessage request, response;
  request.set_text("hello");
  grpc::Status status = stub->Echo(&context, request, &response);
  if (status.ok() && response.text() != "hello") {
    return grpc::Status(grpc::StatusCode::INTERNAL, "echo mismatch: " + response.text());
  }
  return status;
}

// The letters Spell streamed, and how the call ended.
std::pair<std::string, grpc::Status> CallSpell(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = EchoService::NewStub(channel);
  grpc::ClientContext context;
  Deadline(context);
  EchoMessage request, letter;
  request.set_text("abc");
  auto reader = stub->Spell(&context, request);
  std::string letters;
  while (reader->Read(&letter)) letters += letter.text();
  return {letters, reader->Finish()};
}

std::shared_ptr<grpc::Channel> NoToken(const std::string& address) {
  return grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
}

ClusterSecurity WithToken(const std::string& token) {
  ClusterSecurity security;
  security.cluster_token = token;
  return security;
}

TEST(TokenCheckedServiceTest, RefusedWithoutOrWithAWrongTokenBeforeTheHandler) {
  EchoServer server(WithToken("right"));
  const int64_t rejected_before = RejectedCalls();

  grpc::Status none = CallEcho(NoToken(server.address()));
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED) << none.error_message();
  EXPECT_EQ(none.error_message(), "no cluster token");
  grpc::Status wrong = CallEcho(CreateChannel(server.address(), WithToken("wrong")));
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED) << wrong.error_message();
  EXPECT_EQ(wrong.error_message(), "wrong cluster token");
  EXPECT_EQ(CallEcho(CreateChannel(server.address(), WithToken("righ"))).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(server.calls(), 0);  // no refused call reached the handler
  EXPECT_EQ(RejectedCalls() - rejected_before, 3);

  grpc::Status right = CallEcho(CreateChannel(server.address(), WithToken("right")));
  EXPECT_TRUE(right.ok()) << right.error_message();
  EXPECT_EQ(server.calls(), 1);
}

TEST(TokenCheckedServiceTest, StreamingMethodsAreCheckedToo) {
  EchoServer server(WithToken("right"));
  auto [none_letters, none] = CallSpell(NoToken(server.address()));
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(none_letters, "");
  auto [wrong_letters, wrong] = CallSpell(CreateChannel(server.address(), WithToken("x")));
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(server.calls(), 0);
  auto [letters, right] = CallSpell(CreateChannel(server.address(), WithToken("right")));
  EXPECT_TRUE(right.ok()) << right.error_message();
  EXPECT_EQ(letters, "abc");
}

// A refused call's request is never parsed; an admitted call's bad request fails the way
// gRPC fails it for any service, before the handler.
TEST(TokenCheckedServiceTest, RequestsAreParsedOnlyForAdmittedCalls) {
  EchoServer server(WithToken("right"));
  const grpc::internal::RpcMethod echo(kEcho, grpc::internal::RpcMethod::NORMAL_RPC);
  const grpc::Slice junk(std::string("\xff\xff\xff", 3));
  const grpc::ByteBuffer request(&junk, 1);
  auto call = [&](const std::shared_ptr<grpc::Channel>& channel) {
    grpc::ClientContext context;
    Deadline(context);
    grpc::ByteBuffer response;
    return grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
        channel.get(), echo, &context, request, &response);
  };
  EXPECT_EQ(call(NoToken(server.address())).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  const grpc::Status admitted = call(CreateChannel(server.address(), WithToken("right")));
  EXPECT_EQ(admitted.error_code(), grpc::StatusCode::INTERNAL) << admitted.error_message();
  EXPECT_EQ(server.calls(), 0);
}

TEST(TokenCheckedServiceTest, OpenMethodsNeedNoToken) {
  EchoServer open(WithToken("right"), {kEcho});
  EXPECT_TRUE(CallEcho(NoToken(open.address())).ok());
  EXPECT_EQ(CallSpell(NoToken(open.address())).second.error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST(TokenCheckedServiceTest, WithoutTokenEveryCallIsServed) {
  EchoServer server(ClusterSecurity{});
  EXPECT_TRUE(CallEcho(NoToken(server.address())).ok());
  EXPECT_TRUE(CallEcho(CreateChannel(server.address(), WithToken("any"))).ok());
  EXPECT_EQ(CallSpell(NoToken(server.address())).first, "abc");
  EXPECT_EQ(server.calls(), 3);
}

// The token is the one of the security the wrapper was made with, whatever the process
// uses later.
TEST(TokenCheckedServiceTest, TheTokenIsFixedWhenTheWrapperIsMade) {
  ScopedClusterSecurity scoped(WithToken("process-token"));
  EchoServer server(ProcessClusterSecurity());
  EXPECT_TRUE(CallEcho(CreateChannel(server.address())).ok());
  ScopedClusterSecurity other(WithToken("another-cluster"));
  EXPECT_EQ(CallEcho(CreateChannel(server.address())).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST(TokenCheckedServiceTest, TlsAndTheToken) {
  absl::StatusOr<TestCerts> certs = MakeTestCerts(::testing::TempDir());
  LOCKSTEP_ASSERT_OK(certs.status());
  EchoServer server(certs->Security("tls-token"));
  grpc::Status ok = CallEcho(CreateChannel(server.address(), certs->Security("tls-token")));
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(CallEcho(CreateChannel(server.address(), certs->Security("wrong"))).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  // Plaintext to a TLS port, even with the token: no connection.
  EXPECT_EQ(CallEcho(CreateChannel(server.address(), WithToken("tls-token"))).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(server.calls(), 1);
}

// Callback methods are checked the same way, and a refused call ends without a handler.
TEST(TokenCheckedServiceTest, CallbackMethodsAreCheckedToo) {
  EchoServer<CallbackEcho> server(WithToken("right"));
  const int64_t rejected_before = RejectedCalls();
  grpc::Status none = CallEcho(NoToken(server.address()));
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED) << none.error_message();
  EXPECT_EQ(none.error_message(), "no cluster token");
  auto [wrong_letters, wrong] = CallSpell(CreateChannel(server.address(), WithToken("x")));
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED) << wrong.error_message();
  EXPECT_EQ(wrong.error_message(), "wrong cluster token");
  EXPECT_EQ(wrong_letters, "");
  EXPECT_EQ(server.calls(), 0);
  EXPECT_EQ(RejectedCalls() - rejected_before, 2);

  const auto token = WithToken("right");
  grpc::Status right = CallEcho(CreateChannel(server.address(), token));
  EXPECT_TRUE(right.ok()) << right.error_message();
  auto [letters, spelled] = CallSpell(CreateChannel(server.address(), token));
  EXPECT_TRUE(spelled.ok()) << spelled.error_message();
  EXPECT_EQ(letters, "abc");
  EXPECT_EQ(server.calls(), 2);
  // Many refused calls in a row: each requests the next call (none is lost).
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(CallSpell(NoToken(server.address())).second.error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_TRUE(CallEcho(CreateChannel(server.address(), token)).ok());
}

}  // namespace
}  // namespace lockstep::security
