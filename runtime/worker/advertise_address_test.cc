#include "runtime/worker/advertise_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <map>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::worker {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

Environment Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(AdvertiseAddressTest, LoopbackRendezvousAdvertisesLoopback) {
  EXPECT_EQ(*RouteAddressTo("127.0.0.1:5000"), "127.0.0.1");
  EXPECT_EQ(*RouteAddressTo("127.0.1.1:5000"), "127.0.0.1");
  EXPECT_EQ(*RouteAddressTo("localhost:5000"), "127.0.0.1");
}

// This host's IPv4 addresses outside 127.0.0.0/8, on interfaces that are up.
std::vector<std::string> NonLoopbackAddresses() {
  std::vector<std::string> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET ||
        (a->ifa_flags & IFF_UP) == 0) {
      continue;
    }
    const in_addr ip = reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr;
    if ((ntohl(ip.s_addr) >> 24) == 127) continue;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &ip, text, sizeof(text));
    out.emplace_back(text);
  }
  freeifaddrs(list);
  return out;
}

// A rendezvous on one of this host's own non-loopback addresses is reached from that
// address: needs an interface besides loopback, not a default route.
TEST(AdvertiseAddressTest, RendezvousOnALocalInterfaceIsReachedFromIt) {
  const std::vector<std::string> addresses = NonLoopbackAddresses();
  if (addresses.empty()) {
    GTEST_SKIP() << "RendezvousOnALocalInterfaceIsReachedFromIt needs a network interface "
                    "besides loopback; this host (or sandbox) has none";
  }
  for (const std::string& address : addresses) {
    EXPECT_EQ(RouteAddressTo(address + ":5000").value_or("error"), address);
  }
}

// A rendezvous elsewhere is reached through the default route, from a non-loopback
// address. 192.0.2.0/24 is TEST-NET-1: routed, never answered; no packet is sent.
TEST(AdvertiseAddressTest, RemoteRendezvousIsReachedFromANonLoopbackAddress) {
  absl::StatusOr<std::string> routed = RouteAddressTo("192.0.2.1:5000");
  if (!routed.ok()) {
    GTEST_SKIP() << "RemoteRendezvousIsReachedFromANonLoopbackAddress needs a route to "
                    "192.0.2.1 (a default route); this host has none: "
                 << routed.status();
  }
  EXPECT_NE(*routed, "127.0.0.1");
  EXPECT_FALSE(routed->empty());
}

TEST(AdvertiseAddressTest, FlagThenVariableThenRoute) {
  EXPECT_EQ(*ResolveAdvertiseHost("10.0.0.7", Env({{"LOCKSTEP_ADVERTISE_ADDRESS", "10.0.0.8"}}),
                                  "127.0.0.1:1"),
            "10.0.0.7");
  EXPECT_EQ(
      *ResolveAdvertiseHost("", Env({{"LOCKSTEP_ADVERTISE_ADDRESS", "10.0.0.8"}}), "127.0.0.1:1"),
      "10.0.0.8");
  EXPECT_EQ(*ResolveAdvertiseHost("", Env({}), "127.0.0.1:1"), "127.0.0.1");
  EXPECT_THAT(ResolveAdvertiseHost("", Env({}), "no-such-host.invalid:1"),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("--advertise-address")));
}

TEST(AdvertiseAddressTest, GlooFollowsGlooSocketIfname) {
  EXPECT_EQ(*ResolveGlooHost(Env({}), "10.0.0.7"), "10.0.0.7");
  EXPECT_EQ(*ResolveGlooHost(Env({{"GLOO_SOCKET_IFNAME", "lo"}}), "10.0.0.7"), "127.0.0.1");
  EXPECT_THAT(ResolveGlooHost(Env({{"GLOO_SOCKET_IFNAME", "nosuch0"}}), "10.0.0.7"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("GLOO_SOCKET_IFNAME")));
}

TEST(AdvertiseAddressTest, ListenOnTheAdvertisedHost) {
  EXPECT_EQ(*ListenAddress("", "10.0.0.7"), "10.0.0.7:0");
  EXPECT_EQ(*ListenAddress("0.0.0.0:8700", "10.0.0.7"), "10.0.0.7:8700");
  EXPECT_EQ(*ListenAddress("[::]:8700", "fd00::7"), "[fd00::7]:8700");
  EXPECT_EQ(*ListenAddress("127.0.0.1:0", "10.0.0.7"), "127.0.0.1:0");
  EXPECT_THAT(ListenAddress("nonsense", "10.0.0.7"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--listen")));
}

}  // namespace
}  // namespace lockstep::worker
