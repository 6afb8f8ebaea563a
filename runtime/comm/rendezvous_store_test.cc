#include "runtime/comm/rendezvous_store.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/testing/refusing_port.h"
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

TEST(RendezvousStoreTest, UnreachableServiceIsAnErrorWithinTheDeadline) {
  testing::RefusingPort refusing;
  ASSERT_GT(refusing.port(), 0);
  const std::string address = "127.0.0.1:" + std::to_string(refusing.port());
  auto client = RendezvousClient::Connect(address, "launch-1", absl::Milliseconds(200));
  RendezvousStore store(client.get());
  store.set("group/0", {'x'});
  EXPECT_THAT(store.first_error(), StatusIs(absl::StatusCode::kDeadlineExceeded));
}

}  // namespace
}  // namespace lockstep::comm
