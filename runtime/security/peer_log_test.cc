#include "runtime/security/peer_log.h"

#include <memory>
#include <sstream>
#include <string>

#include "common/log.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spdlog/sinks/ostream_sink.h"

namespace lockstep::security {
namespace {

using ::testing::HasSubstr;

TEST(PeerLogHostTest, HostOfEveryAddressForm) {
  EXPECT_EQ(PeerLog::HostOf("10.0.0.7:51234"), "10.0.0.7");
  EXPECT_EQ(PeerLog::HostOf("ipv4:10.0.0.7:51234"), "10.0.0.7");
  EXPECT_EQ(PeerLog::HostOf("ipv6:[fe80::1]:51234"), "fe80::1");
  EXPECT_EQ(PeerLog::HostOf("[::1]:8"), "::1");
  EXPECT_EQ(PeerLog::HostOf("unix:/run/lockstep.sock"), "/run/lockstep.sock");
  EXPECT_EQ(PeerLog::HostOf("fe80::1"), "fe80::1");  // no port
  EXPECT_EQ(PeerLog::HostOf("?"), "?");
}

class PeerLogTest : public ::testing::Test {
 protected:
  void SetUp() override { AddLogSink(sink_); }
  void TearDown() override { RemoveLogSink(sink_); }

  std::ostringstream out_;
  spdlog::sink_ptr sink_ = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
};

TEST_F(PeerLogTest, OncePerHostWithTheAddress) {
  PeerLog log("test listener");
  EXPECT_TRUE(log.Note("ipv4:10.0.0.7:5000", "a call: no cluster token"));
  EXPECT_FALSE(log.Note("ipv4:10.0.0.7:5001", "a call: wrong cluster token"));  // another port
  EXPECT_TRUE(log.Note("10.0.0.8:5000", "a connection"));
  EXPECT_THAT(out_.str(), HasSubstr("test listener refused a call: no cluster token from "
                                    "ipv4:10.0.0.7:5000; further refusals from 10.0.0.7 are "
                                    "not logged"));
  EXPECT_THAT(out_.str(), HasSubstr("refused a connection from 10.0.0.8:5000"));
  EXPECT_EQ(out_.str().find("5001"), std::string::npos);
}

// A scan from many hosts: after max_hosts, one line says so and nothing more is logged.
TEST_F(PeerLogTest, BoundedHostsThenOneLineThenSilence) {
  PeerLog log("test listener", /*max_hosts=*/2);
  int logged = 0;
  for (int i = 0; i < 100; ++i) logged += log.Note("10.1.0." + std::to_string(i) + ":1", "x");
  EXPECT_EQ(logged, 3);
  EXPECT_THAT(out_.str(), HasSubstr("refusals from 2 hosts were logged, refusals from further "
                                    "hosts are not"));
  EXPECT_FALSE(log.Note("10.1.0.0:2", "x"));  // a host it remembers
}

}  // namespace
}  // namespace lockstep::security
