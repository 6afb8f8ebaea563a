// The shape checks of the kernel wrappers: they refuse bad geometry with
// InvalidArgument before anything is launched, so this runs (and must pass) with or
// without a GPU.
#include "runtime/cuda/kernels/kernel_ops.h"

#include <cstdint>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "runtime/cuda/kernels/attention_desc.h"
#include "runtime/cuda/kernels/bf16.h"
#include "runtime/cuda/kernels/decode_attention_kernel.h"
#include "runtime/cuda/kernels/prefill_attention_kernel.h"

namespace lockstep::cuda::kernels {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;

PagedKvDesc Kv(int kv_heads, int head_dim) {
  return {.num_layers = 2, .num_kv_heads = kv_heads, .head_dim = head_dim};
}

TEST(KernelOpsTest, AttentionShapes) {
  EXPECT_THAT(CheckAttentionShape(Kv(8, 128), 32, true), IsOk());
  EXPECT_THAT(CheckAttentionShape(Kv(1, 256), 16, true), IsOk());
  EXPECT_THAT(CheckAttentionShape(Kv(1, 256), 17, true),
              StatusIs(absl::StatusCode::kInvalidArgument));        // group > 16
  EXPECT_THAT(CheckAttentionShape(Kv(1, 256), 17, false), IsOk());  // prefill: any group
  EXPECT_THAT(CheckAttentionShape(Kv(8, 128), 28, true),
              StatusIs(absl::StatusCode::kInvalidArgument));  // not a multiple
  EXPECT_THAT(CheckAttentionShape(Kv(8, 257), 32, false),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(CheckAttentionShape(Kv(8, 0), 32, true),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(CheckAttentionShape(Kv(0, 64), 32, true),
              StatusIs(absl::StatusCode::kInvalidArgument));
  PagedKvDesc misaligned = Kv(8, 128);
  misaligned.storage = reinterpret_cast<void*>(uintptr_t{4096 + 8});
  EXPECT_THAT(CheckAttentionShape(misaligned, 32, true),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(KernelOpsTest, RefusedBeforeLaunch) {
  DecodeAttentionArgs decode{.kv = Kv(8, 128), .layer = 2, .num_heads = 32};
  EXPECT_THAT(DecodeAttention(decode, nullptr), StatusIs(absl::StatusCode::kInvalidArgument));
  decode.kv.head_dim = 512;
  decode.layer = 0;
  EXPECT_THAT(DecodeAttention(decode, nullptr), StatusIs(absl::StatusCode::kInvalidArgument));
  PrefillAttentionArgs prefill{.kv = Kv(8, 128), .layer = -1, .num_heads = 32};
  EXPECT_THAT(PrefillAttention(prefill, nullptr), StatusIs(absl::StatusCode::kInvalidArgument));
  const Bf16* none = nullptr;
  EXPECT_THAT(WriteKv(Kv(8, 128), 0, none, none, 1000, nullptr, nullptr, 1, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));  // stride < 8 x 128
  EXPECT_THAT(WriteKv(Kv(8, 128), 3, none, none, 1024, nullptr, nullptr, 1, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
  const float* no_floats = nullptr;  // f32 rows into a bf16 pool
  EXPECT_THAT(WriteKv(Kv(8, 128), 0, no_floats, no_floats, 1024, nullptr, nullptr, 1, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
  PagedKvDesc bytes = Kv(8, 128);
  bytes.element_bytes = 1;
  EXPECT_THAT(CheckAttentionShape(bytes, 32, true), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(MoeRoute(nullptr, 1, 8, 9, false, nullptr, nullptr, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(MoeRoute(nullptr, 1, 1024, 2, false, nullptr, nullptr, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(MoeRoute(nullptr, 1, 64, 17, false, nullptr, nullptr, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace lockstep::cuda::kernels
