#include "runtime/transfer/send_buffers.h"

#include <cstddef>
#include <memory>
#include <thread>

#include "gtest/gtest.h"

namespace lockstep::transfer {
namespace {

TEST(SendBuffersTest, ABufferReturnsWhenItsLastReferenceGoes) {
  SendBuffers buffers(/*max_idle=*/1);
  std::shared_ptr<absl::Span<std::byte>> a = buffers.Take(100);
  ASSERT_EQ(a->size(), 100u);
  (*a)[99] = std::byte{7};
  std::shared_ptr<const void> held = a;  // e.g. a gRPC slice
  const std::byte* where = a->data();
  a.reset();
  EXPECT_EQ(buffers.idle(), 0u);  // still referenced
  held.reset();
  EXPECT_EQ(buffers.idle(), 1u);
  // Reused (and resized down to the request).
  std::shared_ptr<absl::Span<std::byte>> b = buffers.Take(50);
  EXPECT_EQ(b->data(), where);
  EXPECT_EQ(b->size(), 50u);
  EXPECT_EQ(buffers.idle(), 0u);
  std::shared_ptr<absl::Span<std::byte>> c = buffers.Take(200);
  EXPECT_NE(c->data(), b->data());
  b.reset();
  c.reset();
  EXPECT_EQ(buffers.idle(), 1u);  // max_idle: one kept, one freed
}

TEST(SendBuffersTest, BuffersMayOutliveThePoolAndReturnFromOtherThreads) {
  std::shared_ptr<absl::Span<std::byte>> kept;
  {
    SendBuffers buffers;
    kept = buffers.Take(10);
  }
  std::thread other([kept = std::move(kept)]() mutable { kept.reset(); });
  other.join();
  SUCCEED();  // no use after free (the sanitizer configs check this)
}

}  // namespace
}  // namespace lockstep::transfer
