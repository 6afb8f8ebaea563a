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
#include "runtime/engine/paged_attention.h"

namespace lockstep::cuda::kernels::testing {

class TestKvPool {
 public:
  // Two layers of `kv_heads` x `head_dim`, 16-token blocks, room for `lens[s]` tokens of
  // sequence s.
  static absl::StatusOr<std::unique_ptr<TestKvPool>> Create(int kv_heads, int head_dim,
                                                            const std::vector<int64_t>& lens,
                                                            std::mt19937_64& rng);

  const PagedKvDesc& desc() const { return desc_; }
  engine::KvPoolView host_view() { return {host_.data(), layout_, num_blocks_}; }
  engine::SequenceKv host_seq(int32_t seq) const { return {.blocks = tables_[seq]}; }
  const std::vector<float>& host() const { return host_; }
  std::vector<float> DownloadDevice() const { return ToFloat(device_->Download()); }

 private:
  TestKvPool() = default;

  kv::BlockLayout layout_;
  int32_t num_blocks_ = 0;
  std::vector<float> host_;
  std::vector<std::vector<BlockId>> tables_;
  std::unique_ptr<DeviceArray<Bf16>> device_;
  std::unique_ptr<DeviceArray<int32_t>> device_table_;
  PagedKvDesc desc_;
};

}  // namespace lockstep::cuda::kernels::testing

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_TEST_KV_POOL_H_
