#include "common/host_port.h"

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

HostPort Parsed(absl::string_view address) {
  absl::StatusOr<HostPort> parsed = ParseHostPort(address);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.value_or(HostPort{"<error>", -1});
}

TEST(HostPortTest, ParsesNamesAndIpv4) {
  EXPECT_EQ(Parsed("127.0.0.1:0"), (HostPort{"127.0.0.1", 0}));
  EXPECT_EQ(Parsed("localhost:8080"), (HostPort{"localhost", 8080}));
  EXPECT_EQ(Parsed("node-3.cluster:65535"), (HostPort{"node-3.cluster", 65535}));
}

TEST(HostPortTest, ParsesBracketedIpv6) {
  EXPECT_EQ(Parsed("[::1]:80"), (HostPort{"::1", 80}));
  EXPECT_EQ(Parsed("[fe80::1%eth0]:9000"), (HostPort{"fe80::1%eth0", 9000}));
}

TEST(HostPortTest, ToStringRoundTrips) {
  for (const char* address : {"127.0.0.1:0", "localhost:8080", "[::1]:80"}) {
    EXPECT_EQ(Parsed(address).ToString(), address);
  }
  EXPECT_EQ(HostPort({"::1", 0}).WithPort(4321).ToString(), "[::1]:4321");
  EXPECT_EQ(HostPort({"10.0.0.2", 0}).WithPort(4321).ToString(), "10.0.0.2:4321");
}

TEST(HostPortTest, MalformedAddressesNameTheAddress) {
  for (const char* address : {"nowhere", ":80", "", "::1:80", "[::1]80", "[]:80", "[::1"}) {
    EXPECT_THAT(ParseHostPort(address),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr(absl::StrCat("must be host:port, got '", address, "'"))))
        << address;
  }
}

TEST(HostPortTest, BadPortsNameTheAddress) {
  for (const char* address :
       {"host:", "host:http", "host:-1", "host:65536", "host:+80", "host: 80", "host:123456"}) {
    EXPECT_THAT(ParseHostPort(address),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr(absl::StrCat("port must be a number in [0, 65535], got '",
                                                address, "'"))))
        << address;
  }
}

}  // namespace
}  // namespace lockstep
