#include "runtime/transfer/tcp_wire.h"

#include <atomic>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/testing/refusing_port.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::transfer {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;

// A connected pair over loopback.
struct Pair {
  TcpSocket client;
  TcpSocket server;
};

Pair Connect() {
  absl::StatusOr<std::pair<TcpSocket, int>> listening = ListenTcp("127.0.0.1");
  EXPECT_THAT(listening.status(), IsOk());
  absl::StatusOr<TcpSocket> client =
      ConnectTcp(absl::StrCat("127.0.0.1:", listening->second), absl::Now() + absl::Seconds(10));
  EXPECT_THAT(client.status(), IsOk());
  absl::StatusOr<TcpSocket> server = AcceptTcp(listening->first, nullptr);
  EXPECT_THAT(server.status(), IsOk());
  return {std::move(*client), std::move(*server)};
}

TEST(TcpWireTest, GatheredWriteArrivesScatteredAcrossPartialTransfers) {
  Pair pair = Connect();
  // Larger than the socket buffers, so both sides go through partial transfers.
  std::vector<uint8_t> source(24 << 20);
  std::iota(source.begin(), source.end(), 0);
  std::vector<iovec> out;
  for (size_t at = 0; at < source.size(); at += 3 << 20) out.push_back({&source[at], 3 << 20});
  std::thread writer([&] {
    EXPECT_THAT(SendAll(pair.client, out, absl::Now() + absl::Seconds(60), nullptr), IsOk());
  });
  std::vector<uint8_t> sink(source.size());
  std::vector<iovec> in;
  for (size_t at = 0; at < sink.size(); at += 1 << 20) in.push_back({&sink[at], 1 << 20});
  EXPECT_THAT(RecvAll(pair.server, in, absl::Now() + absl::Seconds(60), nullptr), IsOk());
  writer.join();
  EXPECT_EQ(std::memcmp(source.data(), sink.data(), source.size()), 0);
}

TEST(TcpWireTest, ReadStopsAtDeadlineAndOnStop) {
  Pair pair = Connect();
  char byte;
  EXPECT_THAT(RecvAll(pair.server, &byte, 1, absl::Now() + absl::Milliseconds(50), nullptr),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  std::atomic<bool> stop{false};
  std::thread stopper([&] { stop = true; });
  EXPECT_THAT(RecvAll(pair.server, &byte, 1, absl::InfiniteFuture(), [&] { return stop.load(); }),
              StatusIs(absl::StatusCode::kCancelled));
  stopper.join();
}

TEST(TcpWireTest, PeerCloseIsUnavailable) {
  Pair pair = Connect();
  pair.client.Close();
  char byte;
  EXPECT_THAT(RecvAll(pair.server, &byte, 1, absl::Now() + absl::Seconds(10), nullptr),
              StatusIs(absl::StatusCode::kUnavailable));
  // Writing into a closed connection fails too (no SIGPIPE), once the reset arrives.
  std::vector<char> data(1 << 20);
  absl::Status sent;
  for (int i = 0; i < 100 && sent.ok(); ++i) {
    sent = SendAll(pair.server, data.data(), data.size(), absl::Now() + absl::Seconds(10), nullptr);
  }
  EXPECT_THAT(sent, StatusIs(absl::StatusCode::kUnavailable));
}

TEST(TcpWireTest, StatusFrameRoundTrip) {
  Pair pair = Connect();
  const absl::Status sent = absl::FailedPreconditionError("tokens_per_block: context 16, gen 32");
  ASSERT_THAT(SendStatusFrame(pair.client, sent, absl::Now() + absl::Seconds(10), nullptr), IsOk());
  FrameHeader header;
  ASSERT_THAT(
      RecvAll(pair.server, &header, sizeof(header), absl::Now() + absl::Seconds(10), nullptr),
      IsOk());
  ASSERT_EQ(header.kind, FrameKind::kStatus);
  std::string text(header.size, '\0');
  ASSERT_THAT(
      RecvAll(pair.server, text.data(), text.size(), absl::Now() + absl::Seconds(10), nullptr),
      IsOk());
  EXPECT_EQ(StatusFromFrame(header, text), sent);
  header.pool = 99;
  EXPECT_THAT(StatusFromFrame(header, text), StatusIs(absl::StatusCode::kDataLoss));
}

TEST(TcpWireTest, ConnectErrorsNameTheAddress) {
  EXPECT_THAT(ConnectTcp("no-port", absl::Now() + absl::Seconds(1)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // A port nobody listens on, held for the whole test.
  testing::RefusingPort refusing;
  ASSERT_GT(refusing.port(), 0);
  const int port = refusing.port();
  const absl::Status refused =
      ConnectTcp(absl::StrCat("127.0.0.1:", port), absl::Now() + absl::Seconds(5)).status();
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_NE(refused.message().find(absl::StrCat("127.0.0.1:", port)), std::string::npos) << refused;
}

}  // namespace
}  // namespace lockstep::transfer
