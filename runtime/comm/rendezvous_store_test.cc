#include "runtime/comm/rendezvous_store.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/comm/rendezvous_service.h"

namespace lockstep::comm {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(RendezvousStoreTest, SetGetWaitThroughTheService) {
  auto server = RendezvousServer::Start();
  ASSERT_THAT(server, IsOk());
  auto client = RendezvousClient::Connect((*server)->address(), "launch-1");
  RendezvousStore store(client.get());
  store.set("group/0", {'a', '\0', 'b'});
  store.wait({"group/0"}, std::chrono::milliseconds(5000));
  EXPECT_THAT(store.get("group/0"), ElementsAre('a', '\0', 'b'));
  EXPECT_THAT(store.first_error(), IsOk());
}

TEST(RendezvousStoreTest, FailuresAreRecordedNotThrown) {
  auto server = RendezvousServer::Start();
  ASSERT_THAT(server, IsOk());
  auto client = RendezvousClient::Connect((*server)->address(), "launch-1");
  RendezvousStore store(client.get());
  store.wait({"group/1"}, std::chrono::milliseconds(30));
  EXPECT_TRUE(store.get("group/1").empty());
  // The first error is kept: the wait that timed out.
  EXPECT_THAT(store.first_error(),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("group/1")));
}

// A loopback port held bound but not listening: connecting is refused, and no other
// process can take the port while this holds it (unlike a port closed after use).
class RefusingPort {
 public:
  RefusingPort() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
        getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
      port_ = ntohs(address.sin_port);
    }
  }
  ~RefusingPort() {
    if (fd_ >= 0) close(fd_);
  }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST(RendezvousStoreTest, UnreachableServiceIsAnErrorWithinTheDeadline) {
  RefusingPort refusing;
  ASSERT_GT(refusing.port(), 0);
  const std::string address = "127.0.0.1:" + std::to_string(refusing.port());
  auto client = RendezvousClient::Connect(address, "launch-1", absl::Milliseconds(200));
  RendezvousStore store(client.get());
  store.set("group/0", {'x'});
  EXPECT_THAT(store.first_error(), StatusIs(absl::StatusCode::kDeadlineExceeded));
}

}  // namespace
}  // namespace lockstep::comm
