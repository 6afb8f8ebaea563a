#include "runtime/launcher/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace lockstep::launcher {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;

TEST(FreePortTest, ReturnsAPortThatCanBeBound) {
  absl::StatusOr<int> port = PickFreePort();
  ASSERT_THAT(port, IsOk());
  EXPECT_GT(*port, 0);
  EXPECT_LT(*port, 65536);
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(*port));
  inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  close(fd);
}

TEST(FreePortTest, RejectsABadHost) {
  EXPECT_THAT(PickFreePort("localhost:1"), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace lockstep::launcher
