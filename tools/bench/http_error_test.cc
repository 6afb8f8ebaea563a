#include "tools/bench/http_error.h"

#include "gtest/gtest.h"

namespace lockstep::bench {
namespace {

constexpr absl::Duration kRead = absl::Seconds(600);
constexpr absl::Duration kConnect = absl::Seconds(10);

TEST(DescribeHttpErrorTest, NamesEachErrorInWords) {
  EXPECT_EQ(DescribeHttpError(httplib::Error::Read, absl::Seconds(600), kRead, kConnect),
            "read timed out after 600 s");
  EXPECT_EQ(DescribeHttpError(httplib::Error::Read, absl::Seconds(2), kRead, kConnect),
            "the server closed the connection before the response was complete");
  EXPECT_EQ(DescribeHttpError(httplib::Error::Connection, absl::ZeroDuration(), kRead, kConnect),
            "connection refused (or the host is unreachable)");
  EXPECT_EQ(
      DescribeHttpError(httplib::Error::ConnectionTimeout, absl::ZeroDuration(), kRead, kConnect),
      "connection timed out after 10 s");
  EXPECT_EQ(DescribeHttpError(httplib::Error::Write, absl::ZeroDuration(), kRead, kConnect),
            "the connection closed while sending the request");
  EXPECT_EQ(DescribeHttpError(httplib::Error::Read, absl::Milliseconds(1500), absl::Seconds(1.5),
                              kConnect),
            "read timed out after 1.5 s");
}

TEST(DescribeHttpErrorTest, NoErrorValueIsLeftAsANumber) {
  for (int e = 0; e <= static_cast<int>(httplib::Error::ConnectionTimeout); ++e) {
    const std::string text =
        DescribeHttpError(static_cast<httplib::Error>(e), absl::ZeroDuration(), kRead, kConnect);
    EXPECT_FALSE(text.empty()) << e;
    if (static_cast<httplib::Error>(e) != httplib::Error::Unknown) {
      EXPECT_EQ(text.find("error ("), std::string::npos) << e << ": " << text;
    }
  }
  EXPECT_EQ(
      DescribeHttpError(static_cast<httplib::Error>(99), absl::ZeroDuration(), kRead, kConnect),
      "unknown transport error (httplib error 99)");
}

}  // namespace
}  // namespace lockstep::bench
