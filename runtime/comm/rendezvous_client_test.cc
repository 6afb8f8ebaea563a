#include "runtime/comm/rendezvous_client.h"

#include <memory>

#include "absl/time/time.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/comm/rendezvous_service.h"

namespace lockstep::comm {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

TEST(RendezvousClientTest, LongWaitSpansSeveralCappedServiceWaits) {
  RendezvousServiceOptions options;
  options.max_wait = absl::Milliseconds(10);
  auto server = RendezvousServer::Start("127.0.0.1:0", options);
  ASSERT_THAT(server, IsOk());
  auto client = RendezvousClient::Connect((*server)->address(), "launch-7");
  EXPECT_THAT(client->Wait({"never"}, absl::Milliseconds(100)),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("never")));
  EXPECT_GE((*server)->service().wait_calls(), 2);
}

TEST(RendezvousClientTest, ErrorsNameTheKeyAndKeySpace) {
  auto server = RendezvousServer::Start();
  ASSERT_THAT(server, IsOk());
  auto client = RendezvousClient::Connect((*server)->address(), "launch-7");
  EXPECT_EQ(client->key_space(), "launch-7");
  EXPECT_THAT(client->Get("rank/9"),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("rendezvous Get 'rank/9': rendezvous key 'rank/9' in key space "
                                 "'launch-7' is not set")));
}

}  // namespace
}  // namespace lockstep::comm
