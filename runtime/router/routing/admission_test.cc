#include "runtime/router/routing/admission.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace lockstep::router {
namespace {

TEST(AdmissionTest, RefusesBeyondTheLimitAndReleasesWithTheLastCopy) {
  Admission admission(2);
  Admission::Ticket a = admission.TryAdmit();
  Admission::Ticket b = admission.TryAdmit();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(admission.TryAdmit(), nullptr);
  EXPECT_EQ(admission.refused(), 1);
  EXPECT_EQ(admission.RefusalStatus().code(), absl::StatusCode::kResourceExhausted);
  Admission::Ticket copy = a;  // e.g. captured by a streaming response
  a.reset();
  EXPECT_EQ(admission.TryAdmit(), nullptr);
  copy.reset();
  EXPECT_EQ(admission.in_flight(), 1);
  EXPECT_NE(admission.TryAdmit(), nullptr);  // admitted, then released at once
  EXPECT_EQ(admission.in_flight(), 1);
}

// A request with n choices takes n places, all or none, and gives all of them back.
TEST(AdmissionTest, ATicketForSeveralPlacesIsAllOrNone) {
  Admission admission(4);
  Admission::Ticket one = admission.TryAdmit();
  Admission::Ticket three = admission.TryAdmit(3);
  ASSERT_NE(one, nullptr);
  ASSERT_NE(three, nullptr);
  EXPECT_EQ(admission.in_flight(), 4);
  one.reset();
  EXPECT_EQ(admission.TryAdmit(2), nullptr);  // one place free: none is taken
  EXPECT_EQ(admission.in_flight(), 3);
  three.reset();
  EXPECT_EQ(admission.in_flight(), 0);
  EXPECT_NE(admission.TryAdmit(4), nullptr);
  EXPECT_EQ(admission.TryAdmit(5), nullptr);  // more than the limit: never
}

TEST(AdmissionTest, RefusalsNameTheLimit) {
  Admission admission(1, "router.grpc_max_threads - 16");
  EXPECT_EQ(admission.max_in_flight(), 1);
  EXPECT_NE(admission.RefusalStatus().message().find("limit of 1 requests in flight "
                                                     "(router.grpc_max_threads - 16)"),
            std::string::npos)
      << admission.RefusalStatus();
}

TEST(AdmissionTest, NoLimitAdmitsEveryone) {
  Admission admission(0);
  std::vector<Admission::Ticket> tickets;
  for (int i = 0; i < 1000; ++i) tickets.push_back(admission.TryAdmit());
  for (const Admission::Ticket& t : tickets) EXPECT_NE(t, nullptr);
  EXPECT_EQ(admission.in_flight(), 1000);
}

TEST(AdmissionTest, ConcurrentCallersNeverExceedTheLimit) {
  Admission admission(3);
  std::atomic<int64_t> most{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        Admission::Ticket ticket = admission.TryAdmit();
        if (ticket == nullptr) continue;
        int64_t now = admission.in_flight();
        int64_t seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_LE(most.load(), 3);
  EXPECT_EQ(admission.in_flight(), 0);
}

}  // namespace
}  // namespace lockstep::router
