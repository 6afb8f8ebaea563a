#include "common/grpc_status.h"

#include "gtest/gtest.h"

namespace lockstep {
namespace {

TEST(GrpcStatusTest, OkBothWays) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK, "Set").ok());
}

TEST(GrpcStatusTest, EveryCanonicalCodeKeepsItsNumberAndMessage) {
  for (int code = 1; code <= 16; ++code) {
    const absl::Status absl_status(static_cast<absl::StatusCode>(code), "why");
    const grpc::Status grpc_status = ToGrpcStatus(absl_status);
    EXPECT_EQ(static_cast<int>(grpc_status.error_code()), code);
    EXPECT_EQ(grpc_status.error_message(), "why");
    EXPECT_EQ(FromGrpcStatus(grpc_status), absl_status);
  }
}

TEST(GrpcStatusTest, NamedCodesMatch) {
  EXPECT_EQ(ToGrpcStatus(absl::NotFoundError("x")).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "late")),
            absl::DeadlineExceededError("late"));
}

TEST(GrpcStatusTest, ContextPrefixesTheMessage) {
  EXPECT_EQ(
      FromGrpcStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, "refused"), "rendezvous Set"),
      absl::UnavailableError("rendezvous Set: refused"));
}

}  // namespace
}  // namespace lockstep
