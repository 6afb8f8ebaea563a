#include "spec_decode/dynamic_k.h"

#include "gtest/gtest.h"

namespace lockstep::spec {
namespace {

TEST(DynamicKTest, StartsAtTheMaximum) {
  EXPECT_EQ(DynamicK(4).k(), 4);
  EXPECT_EQ(DynamicK(0).k(), 0);
  EXPECT_DOUBLE_EQ(DynamicK(4).acceptance(), 1.0);
}

TEST(DynamicKTest, ShrinksWhileDraftsFailAndGrowsBack) {
  DynamicK k(5);
  int last = k.k();
  for (int step = 0; step < 20 && k.k() > 0; ++step) {
    k.Observe(k.k(), 0);
    EXPECT_LE(k.k(), last) << "step " << step;
    last = k.k();
  }
  EXPECT_EQ(k.k(), 0);
  EXPECT_LT(k.acceptance(), 0.2);
  for (int step = 0; step < 40; ++step) {
    const int proposed = std::max(k.k(), 1);
    k.Observe(proposed, proposed);
  }
  EXPECT_EQ(k.k(), 5);
  EXPECT_GT(k.acceptance(), 0.9);
}

TEST(DynamicKTest, StaysWithinBounds) {
  DynamicK k(3);
  for (int step = 0; step < 200; ++step) {
    k.Observe(3, step % 4);
    EXPECT_GE(k.k(), 0);
    EXPECT_LE(k.k(), 3);
  }
}

TEST(DynamicKTest, ProbesAfterIdleStepsAtZero) {
  DynamicKOptions options;
  options.probe_every = 4;
  DynamicK k(2, options);
  while (k.k() > 0) k.Observe(k.k(), 0);
  for (int i = 0; i < 3; ++i) {
    k.Observe(0, 0);
    EXPECT_EQ(k.k(), 0);
  }
  k.Observe(0, 0);
  EXPECT_EQ(k.k(), 1) << "the fourth idle step probes one draft";
}

TEST(DynamicKTest, StepsWithoutProposalsChangeNothing) {
  DynamicK k(4);
  k.Observe(4, 1);
  const int before = k.k();
  const double rate = k.acceptance();
  for (int i = 0; i < 10; ++i) k.Observe(0, 0);
  EXPECT_EQ(k.k(), before);
  EXPECT_DOUBLE_EQ(k.acceptance(), rate);
}

TEST(DynamicKTest, ModerateAcceptanceSettlesBetween) {
  // 9 accepted of 14 trials every five steps: a settles near 0.64 and K near the
  // largest j with 0.64^j >= 0.2, i.e. 3.
  DynamicK k(8);
  for (int step = 0; step < 300; ++step) {
    const int accepted = (step % 5 == 4) ? 3 : (step % 5 < 2 ? 1 : 2);
    k.Observe(8, accepted);
  }
  EXPECT_GE(k.k(), 2);
  EXPECT_LE(k.k(), 4);
}

}  // namespace
}  // namespace lockstep::spec
