#include "runtime/router/router_address.h"

#include <filesystem>
#include <fstream>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace lockstep::router {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;

std::string TempPath(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) / name).string();
}

TEST(RouterAddressTest, RoundTrip) {
  const std::string path = TempPath("router.address.json");
  ASSERT_THAT(WriteRouterAddress(path, {"127.0.0.1:41234", "127.0.0.1:41235"}), IsOk());
  absl::StatusOr<RouterAddress> read = ReadRouterAddress(path);
  ASSERT_THAT(read, IsOk());
  EXPECT_EQ(read->http, "127.0.0.1:41234");
  EXPECT_EQ(read->grpc, "127.0.0.1:41235");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(RouterAddressTest, MissingAndMalformedFiles) {
  EXPECT_THAT(ReadRouterAddress(TempPath("absent.json")), StatusIs(absl::StatusCode::kNotFound));
  const std::string path = TempPath("bad.json");
  std::ofstream(path) << R"({"http": "127.0.0.1:1"})";
  EXPECT_THAT(ReadRouterAddress(path), StatusIs(absl::StatusCode::kDataLoss));
}

}  // namespace
}  // namespace lockstep::router
