#include "runtime/engine/cpu/parallel.h"

#include <atomic>
#include <vector>

#include "gtest/gtest.h"

namespace lockstep::engine {
namespace {

TEST(ThreadPoolTest, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (int64_t n : {0, 1, 3, 17, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      for (int repeat = 0; repeat < 20; ++repeat) {
        pool.ParallelFor(n, [&](int64_t begin, int64_t end, int thread) {
          ASSERT_LE(begin, end);
          ASSERT_GE(thread, 0);
          ASSERT_LT(thread, threads);
          for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
        });
      }
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(hits[i].load(), 20) << "threads=" << threads << " n=" << n << " i=" << i;
      }
    }
  }
}

}  // namespace
}  // namespace lockstep::engine
