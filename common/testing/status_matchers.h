// gMock matchers for absl::Status and absl::StatusOr<T>.
//
//   EXPECT_THAT(cache.Resize(4, 8), StatusIs(absl::StatusCode::kInvalidArgument));
//   EXPECT_THAT(manager.Grow(id, 16), IsOk());
//   EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
//                                testing::HasSubstr("cannot exceed capacity")));
#ifndef LOCKSTEP_COMMON_TESTING_STATUS_MATCHERS_H_
#define LOCKSTEP_COMMON_TESTING_STATUS_MATCHERS_H_

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"

namespace lockstep::testing {
namespace internal {

inline const absl::Status& GetStatus(const absl::Status& status) { return status; }

template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

}  // namespace internal

MATCHER(IsOk, negation ? "is not OK" : "is OK") {
  const absl::Status& status = internal::GetStatus(arg);
  if (!status.ok()) *result_listener << "status is " << status;
  return status.ok();
}

MATCHER_P(StatusIs, code,
          std::string(negation ? "has a code other than " : "has code ") +
              absl::StatusCodeToString(code)) {
  const absl::Status& status = internal::GetStatus(arg);
  *result_listener << "status is " << status;
  return status.code() == code;
}

MATCHER_P2(StatusIs, code, message_matcher,
           std::string(negation ? "does not have code " : "has code ") +
               absl::StatusCodeToString(code) + " and a matching message") {
  const absl::Status& status = internal::GetStatus(arg);
  *result_listener << "status is " << status;
  return status.code() == code &&
         ::testing::Matches(message_matcher)(std::string(status.message()));
}

}  // namespace lockstep::testing

// Asserts/expects that an absl::Status or StatusOr is OK, printing the status if not.
#define LOCKSTEP_ASSERT_OK(expr) ASSERT_THAT(expr, ::lockstep::testing::IsOk())
#define LOCKSTEP_EXPECT_OK(expr) EXPECT_THAT(expr, ::lockstep::testing::IsOk())

#endif  // LOCKSTEP_COMMON_TESTING_STATUS_MATCHERS_H_
