#include "runtime/cuda/kernels/test_kv_pool.h"

#include <algorithm>
#include <numeric>

#include "absl/types/span.h"
#include "runtime/cuda/kernels/block_table_pack.h"

namespace lockstep::cuda::kernels::testing {

absl::StatusOr<std::unique_ptr<TestKvPool>> TestKvPool::Create(int kv_heads, int head_dim,
                                                               const std::vector<int64_t>& lens,
                                                               std::mt19937_64& rng) {
  std::unique_ptr<TestKvPool> pool(new TestKvPool());
  pool->layout_ = {.num_layers = 2,
                   .num_kv_heads = kv_heads,
                   .head_dim = head_dim,
                   .tokens_per_block = 16,
                   .element_bytes = 4};
  for (int64_t len : lens) pool->num_blocks_ += static_cast<int32_t>(pool->layout_.BlocksFor(len));
  std::vector<int32_t> order(pool->num_blocks_);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  size_t next = 0;
  for (int64_t len : lens) {
    std::vector<BlockId>& table = pool->tables_.emplace_back();
    for (int64_t b = 0; b < pool->layout_.BlocksFor(len); ++b) {
      table.push_back(BlockId(order[next++]));
    }
  }
  pool->host_ = RandomBf16Floats(rng, pool->num_blocks_ * pool->layout_.BlockElements());
  pool->device_ = std::make_unique<DeviceArray<Bf16>>(ToBf16(pool->host_));
  if (!pool->device_->ok()) return absl::ResourceExhaustedError("device pool");
  std::vector<absl::Span<const BlockId>> spans(pool->tables_.begin(), pool->tables_.end());
  absl::StatusOr<PackedBlockTable> packed =
      PackBlockTables(spans, lens, pool->layout_.tokens_per_block, pool->num_blocks_);
  if (!packed.ok()) return packed.status();
  pool->device_table_ = std::make_unique<DeviceArray<int32_t>>(packed->table);
  pool->desc_ = {.storage = pool->device_->get(),
                 .num_layers = pool->layout_.num_layers,
                 .num_kv_heads = kv_heads,
                 .head_dim = head_dim,
                 .tokens_per_block = pool->layout_.tokens_per_block,
                 .block_table = pool->device_table_->get(),
                 .table_stride = packed->stride};
  return pool;
}

}  // namespace lockstep::cuda::kernels::testing
