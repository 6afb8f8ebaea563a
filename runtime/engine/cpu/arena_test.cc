#include "runtime/engine/cpu/arena.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace lockstep::engine {
namespace {

TEST(ArenaTest, AlignedDisjointAndAllocationFreeOnceGrown) {
  Arena arena;
  for (int cycle = 0; cycle < 5; ++cycle) {
    arena.Reset();
    float* a = arena.Alloc<float>(100000);
    int32_t* b = arena.Alloc<int32_t>(3);
    double* c = arena.Alloc<double>(50000);
    for (void* p : {static_cast<void*>(a), static_cast<void*>(b), static_cast<void*>(c)}) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    }
    a[99999] = 1.0f;
    b[2] = 7;
    c[0] = 2.0;
    EXPECT_EQ(a[99999], 1.0f);
    EXPECT_EQ(b[2], 7);
    EXPECT_TRUE(reinterpret_cast<char*>(b) >= reinterpret_cast<char*>(a + 100000) ||
                reinterpret_cast<char*>(b + 3) <= reinterpret_cast<char*>(a));
    if (cycle == 0) continue;
    // From the second cycle on, one chunk holds everything.
    static int64_t after_first = -1;
    if (cycle == 1) after_first = arena.num_heap_allocations();
    EXPECT_EQ(arena.num_heap_allocations(), after_first) << "cycle " << cycle;
  }
}

}  // namespace
}  // namespace lockstep::engine
