#include "runtime/worker/request_streams.h"

#include "absl/time/time.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace lockstep::worker {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;

exec::Response Tokens(int64_t id, std::vector<int32_t> tokens, bool finished) {
  exec::Response r;
  r.id = RequestId(id);
  r.tokens = std::move(tokens);
  r.finished = finished;
  return r;
}

TEST(RequestStreamsTest, RoutesResponsesAndClosesOnTheLastOne) {
  RequestStreams streams;
  auto a = streams.Open(RequestId(1));
  auto b = streams.Open(RequestId(2));
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  EXPECT_THAT(streams.Open(RequestId(1)), StatusIs(absl::StatusCode::kAlreadyExists));
  streams.OnResponses({Tokens(1, {5}, false), Tokens(2, {6}, true), Tokens(3, {7}, true)});
  EXPECT_EQ((*a)->Next(absl::Seconds(1))->tokens, std::vector<int32_t>{5});
  EXPECT_TRUE((*b)->Next(absl::Seconds(1))->finished);
  EXPECT_EQ(streams.open_streams(), 1);  // 2 closed by its final response; 3 was unknown
  EXPECT_FALSE((*a)->Next(absl::ZeroDuration()).has_value());  // nothing more: no hang
}

TEST(RequestStreamsTest, FailAllEndsEveryOpenStream) {
  RequestStreams streams;
  auto a = streams.Open(RequestId(1));
  ASSERT_THAT(a, IsOk());
  streams.FailAll(absl::UnavailableError("rank lost"));
  std::optional<exec::Response> r = (*a)->Next(absl::Seconds(1));
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->finished);
  EXPECT_EQ(r->status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(streams.open_streams(), 0);
}

}  // namespace
}  // namespace lockstep::worker
