// A KV pool for the attention kernels' GPU checks: random bf16-rounded contents, kept as
// f32 on the host (for the CPU engine's paged attention) and as bf16 on the device, with
// each sequence's blocks drawn at random and the packed block table on the device.
#ifndef LOCKSTEP_RUNTIME_CUDA_KERNELS_TEST_KV_POOL_H_
#define LOCKSTEP_RUNTIME_CUDA_KERNELS_TEST_KV_POOL_H_

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "common/ids.h"
#include "kvcache/block_layout.h"
#include "runtime/cuda/kernels/attention_desc.h"
#include "runtime/cuda/kernels/bf16.h"
#include "runtime/cuda/kernels/kernel_test_util.h"
#include "runtime/engine/cpu/paged_attention.h"

namespace lockstep::cuda::kernels::testing {

class TestKvPool {
 public:
  // Two layers of `kv_heads` x `head_dim`, 16-token blocks, room for `lens[s]` tokens of
  // sequence s. With spec_tokens > 0, each sequence's last spec_tokens positions (all of
  // them when it is shorter) live in its own spec buffer instead of the pool.
  static absl::StatusOr<std::unique_ptr<TestKvPool>> Create(int kv_heads, int head_dim,
                                                            const std::vector<int64_t>& lens,
                                                            std::mt19937_64& rng,
                                                            int spec_tokens = 0);

  const PagedKvDesc& desc() const { return desc_; }
  engine::KvPoolView host_view() { return {host_.data(), layout_, num_blocks_}; }
  engine::SequenceKv host_seq(int32_t seq);
  // Whether the device pool and spec buffers hold the host's values.
  bool DeviceMatchesHost() const;

 private:
  TestKvPool() = default;

  kv::BlockLayout layout_;
  int32_t num_blocks_ = 0;
  std::vector<float> host_;
  std::vector<std::vector<BlockId>> tables_;
  std::unique_ptr<DeviceArray<Bf16>> device_;
  std::unique_ptr<DeviceArray<int32_t>> device_table_;
  int spec_tokens_ = 0;
  std::vector<int64_t> spec_base_;
  std::vector<std::vector<float>> host_spec_;
  std::vector<std::unique_ptr<DeviceArray<Bf16>>> device_spec_;
  std::unique_ptr<DeviceArray<int32_t>> device_spec_base_;
  std::unique_ptr<DeviceArray<void*>> device_spec_ptrs_;
  PagedKvDesc desc_;
};

}  // namespace lockstep::cuda::kernels::testing

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_TEST_KV_POOL_H_
