// The executor's inter-rank messages: the step vote's reduction, and one codec per
// type (sampling parameters, context source, request spec, intake batch, responses, KV
// event delta, step vote). Each type round-trips a value with every field set, checked
// field by field (every_field.h, so a new field fails here until the filler and then
// the codec carry it), and every truncation of its bytes is refused, never misread.
#include <string>
#include <tuple>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/executor/context_source_codec.h"
#include "runtime/executor/field_count.h"
#include "runtime/executor/intake.h"
#include "runtime/executor/request_spec_codec.h"
#include "runtime/executor/response.h"
#include "runtime/executor/sampling_codec.h"
#include "runtime/executor/step_vote.h"
#include "runtime/executor/testing/every_field.h"
#include "runtime/executor/testing/filled.h"
#include "runtime/executor/wire.h"

namespace lockstep::exec {
namespace {

using ::lockstep::exec::testing::DifferingFields;
using ::lockstep::exec::testing::FieldTie;
using ::lockstep::exec::testing::FilledContextSource;
using ::lockstep::exec::testing::FilledIntakeBatch;
using ::lockstep::exec::testing::FilledRequestSpec;
using ::lockstep::exec::testing::FilledResponse;
using ::lockstep::exec::testing::FilledSamplingParams;
using ::lockstep::exec::testing::UnsetFields;
using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

// `want` through put then get: every field comes back, and every strict prefix of the
// bytes is refused.
template <typename T, typename Put, typename Get>
void ExpectRoundTrip(const T& want, Put put, Get get) {
  WireWriter w;
  put(w, want);
  const std::string bytes = w.Take();
  T got;
  WireReader r(bytes);
  ASSERT_TRUE(get(r, &got));
  EXPECT_TRUE(r.done()) << "trailing bytes";
  EXPECT_THAT(DifferingFields(got, want), IsEmpty());
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::string prefix = bytes.substr(0, n);
    WireReader truncated(prefix);
    T ignored;
    EXPECT_FALSE(get(truncated, &ignored)) << "a prefix of " << n << " bytes was accepted";
  }
}

TEST(SamplingCodecTest, EveryFieldRoundTrips) {
  const sched::SamplingParams want = FilledSamplingParams();
  ASSERT_THAT(UnsetFields(want), IsEmpty()) << "FilledSamplingParams must set every field";
  ExpectRoundTrip(want, PutSamplingParams, GetSamplingParams);
  ExpectRoundTrip(sched::SamplingParams(), PutSamplingParams, GetSamplingParams);
}

TEST(ContextSourceCodecTest, EveryFieldRoundTrips) {
  const sched::ContextSource want = FilledContextSource();
  ASSERT_THAT(UnsetFields(want), IsEmpty()) << "FilledContextSource must set every field";
  ExpectRoundTrip(want, PutContextSource, GetContextSource);
}

TEST(RequestSpecCodecTest, EveryFieldRoundTrips) {
  const NewRequestSpec want = FilledRequestSpec();
  ASSERT_THAT(UnsetFields(want), IsEmpty()) << "FilledRequestSpec must set every field";
  ExpectRoundTrip(want, PutRequestSpec, GetRequestSpec);
  // Absent optionals stay absent; rank 0 is a rank, not "absent".
  ExpectRoundTrip(NewRequestSpec(), PutRequestSpec, GetRequestSpec);
  NewRequestSpec zero;
  zero.pinned_rank = 0;
  zero.preferred_rank = 0;
  ExpectRoundTrip(zero, PutRequestSpec, GetRequestSpec);
}

TEST(RequestSpecCodecTest, AnUnknownTypeOrBoolIsRefused) {
  WireWriter w;
  PutRequestSpec(w, NewRequestSpec());
  std::string bytes = w.Take();
  NewRequestSpec got;
  bytes[sizeof(int64_t)] = 3;  // the type byte follows the id
  WireReader r(bytes);
  EXPECT_FALSE(GetRequestSpec(r, &got));

  WireWriter v;
  v.Put<uint8_t>(2);
  const std::string two = v.Take();
  WireReader b(two);
  bool flag = false;
  EXPECT_FALSE(b.GetBool(&flag));
}

TEST(IntakeCodecTest, EveryFieldRoundTrips) {
  const IntakeBatch want = FilledIntakeBatch();
  ASSERT_THAT(UnsetFields(want), IsEmpty()) << "FilledIntakeBatch must set every field";
  absl::StatusOr<IntakeBatch> got = IntakeBatch::Decode(want.Encode());
  ASSERT_THAT(got, IsOk());
  EXPECT_THAT(DifferingFields(*got, want), IsEmpty());
}

TEST(StepVoteTest, AnyEmptyBatchVetoes) {
  StepVote a, b;
  a.nonempty_batch = 1;
  b.empty_batch = 1;
  b.errors = 2;
  const StepVote both = ReduceVotes({a, b});
  EXPECT_FALSE(both.can_queue());
  EXPECT_TRUE(both.vetoed());
  EXPECT_EQ(both.errors, 2);
  const StepVote idle = ReduceVotes({b, b});
  EXPECT_FALSE(idle.can_queue());
  EXPECT_FALSE(idle.vetoed());  // nobody had a batch: an idle step, not a veto
  EXPECT_TRUE(ReduceVotes({a, a}).can_queue());
  EXPECT_EQ(StepVote::Decode(a.Encode()).nonempty_batch, 1);
}

TEST(StepVoteTest, EveryFieldRoundTrips) {
  static_assert(FieldCount<StepVote>() == StepVote::kFields,
                "a field was added to StepVote: add it to Encode/Decode and kFields");
  StepVote want;
  std::apply(
      [](auto&... field) {
        int64_t v = 1;
        ((field = v++), ...);
      },
      FieldTie(want));
  ASSERT_THAT(UnsetFields(want), IsEmpty());
  EXPECT_THAT(DifferingFields(StepVote::Decode(want.Encode()), want), IsEmpty());
}

TEST(StepVoteTest, RowsAndContextReduceToTheLargestForward) {
  StepVote decode, prefill, dummy;
  decode.rows = 12;  // e.g. 3 generation steps verifying K = 3 drafts each
  prefill.rows = 64;
  prefill.context = 1;
  dummy.rows = 4;  // the pad dummy: 1 + K
  const StepVote all = ReduceVotes({decode, dummy, prefill});
  EXPECT_EQ(all.rows, 64);
  EXPECT_EQ(all.context, 1);
  const StepVote decoding = ReduceVotes({dummy, decode});
  EXPECT_EQ(decoding.rows, 12);
  EXPECT_EQ(decoding.context, 0);
  const StepVote round_trip = StepVote::Decode(prefill.Encode());
  EXPECT_EQ(round_trip.rows, 64);
  EXPECT_EQ(round_trip.context, 1);
}

TEST(IntakeCodecTest, TruncatedInputIsDataLoss) {
  const std::string bytes = FilledIntakeBatch().Encode();
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_THAT(IntakeBatch::Decode(bytes.substr(0, n)), StatusIs(absl::StatusCode::kDataLoss))
        << n;
  }
  EXPECT_THAT(IntakeBatch::Decode(bytes + "x"), StatusIs(absl::StatusCode::kDataLoss));
}

TEST(IntakeCodecTest, DrainExpiredRoundTrips) {
  IntakeBatch b;
  b.drain_expired = true;
  EXPECT_FALSE(b.empty());
  absl::StatusOr<IntakeBatch> got = IntakeBatch::Decode(b.Encode());
  ASSERT_THAT(got, IsOk());
  EXPECT_FALSE(got->drain);
  EXPECT_TRUE(got->drain_expired);
}

TEST(ResponseCodecTest, EveryFieldRoundTrips) {
  const Response want = FilledResponse();
  ASSERT_THAT(UnsetFields(want), IsEmpty()) << "FilledResponse must set every field";
  const std::string bytes = EncodeResponses({want, Response()});
  absl::StatusOr<std::vector<Response>> got = DecodeResponses(bytes);
  ASSERT_THAT(got, IsOk());
  ASSERT_EQ(got->size(), 2u);
  EXPECT_THAT(DifferingFields((*got)[0], want), IsEmpty());
  EXPECT_THAT(DifferingFields((*got)[1], Response()), IsEmpty());
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_THAT(DecodeResponses(bytes.substr(0, n)), StatusIs(absl::StatusCode::kDataLoss)) << n;
  }
}

TEST(ResponseCodecTest, GatherPartCarriesTheKvEvents) {
  Response r;
  r.id = RequestId(4);
  r.tokens = {1};
  const kv::KvEventDelta events{.committed = {11, 12},
                                .evicted = {99},
                                .host = {.stored = {21}, .removed = {22, 23}},
                                .disk = {.stored = {31, 32}, .removed = {33}}};
  ASSERT_THAT(UnsetFields(events), IsEmpty());
  ASSERT_THAT(UnsetFields(events.host), IsEmpty());
  ASSERT_THAT(UnsetFields(events.disk), IsEmpty());
  const std::string bytes = EncodeGatherPart({r}, events);
  std::vector<Response> responses;
  kv::KvEventDelta got;
  ASSERT_THAT(DecodeGatherPart(bytes, &responses, &got), IsOk());
  ASSERT_EQ(responses.size(), 1u);
  EXPECT_EQ(responses[0].id, RequestId(4));
  EXPECT_THAT(got.committed, ElementsAre(11, 12));
  EXPECT_THAT(got.evicted, ElementsAre(99));
  EXPECT_THAT(got.host.stored, ElementsAre(21));
  EXPECT_THAT(got.host.removed, ElementsAre(22, 23));
  EXPECT_THAT(got.disk.stored, ElementsAre(31, 32));
  EXPECT_THAT(got.disk.removed, ElementsAre(33));
  EXPECT_THAT(DecodeGatherPart(bytes.substr(0, bytes.size() - 1), &responses, &got),
              StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(DecodeGatherPart(bytes + "x", &responses, &got),
              StatusIs(absl::StatusCode::kDataLoss));
}

}  // namespace
}  // namespace lockstep::exec
