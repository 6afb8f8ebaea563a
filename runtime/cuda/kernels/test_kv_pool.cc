#include "runtime/cuda/kernels/test_kv_pool.h"

#include <algorithm>
#include <numeric>

#include "absl/types/span.h"
#include "runtime/cuda/kernels/block_table_pack.h"

namespace lockstep::cuda::kernels::testing {

absl::StatusOr<std::unique_ptr<TestKvPool>> TestKvPool::Create(int kv_heads, int head_dim,
                                                               const std::vector<int64_t>& lens,
                                                               std::mt19937_64& rng,
                                                               int spec_tokens) {
  std::unique_ptr<TestKvPool> pool(new TestKvPool());
  pool->layout_ = {.num_layers = 2,
                   .num_kv_heads = kv_heads,
                   .head_dim = head_dim,
                   .tokens_per_block = 16,
                   .element_bytes = 4};
  // The positions each sequence keeps in the pool.
  std::vector<int64_t> pooled = lens;
  pool->spec_tokens_ = spec_tokens;
  if (spec_tokens > 0) {
    for (int64_t& len : pooled) {
      len = std::max<int64_t>(0, len - spec_tokens);
      pool->spec_base_.push_back(len);
    }
  }
  for (int64_t len : pooled)
    pool->num_blocks_ += static_cast<int32_t>(pool->layout_.BlocksFor(len));
  std::vector<int32_t> order(pool->num_blocks_);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  size_t next = 0;
  for (int64_t len : pooled) {
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
      PackBlockTables(spans, pooled, pool->layout_.tokens_per_block, pool->num_blocks_);
  if (!packed.ok()) return packed.status();
  pool->device_table_ = std::make_unique<DeviceArray<int32_t>>(packed->table);
  pool->desc_ = {.storage = pool->device_->get(),
                 .num_layers = pool->layout_.num_layers,
                 .num_kv_heads = kv_heads,
                 .head_dim = head_dim,
                 .tokens_per_block = pool->layout_.tokens_per_block,
                 .block_table = pool->device_table_->get(),
                 .table_stride = packed->stride};
  if (spec_tokens > 0) {
    std::vector<void*> pointers;
    for (size_t q = 0; q < lens.size(); ++q) {
      pool->host_spec_.push_back(
          RandomBf16Floats(rng, engine::SpecBufferFloats(pool->layout_, spec_tokens)));
      pool->device_spec_.push_back(
          std::make_unique<DeviceArray<Bf16>>(ToBf16(pool->host_spec_.back())));
      if (!pool->device_spec_.back()->ok()) return absl::ResourceExhaustedError("spec buffer");
      pointers.push_back(pool->device_spec_.back()->get());
    }
    pool->device_spec_base_ = std::make_unique<DeviceArray<int32_t>>(
        std::vector<int32_t>(pool->spec_base_.begin(), pool->spec_base_.end()));
    pool->device_spec_ptrs_ = std::make_unique<DeviceArray<void*>>(pointers);
    pool->desc_.spec_base = pool->device_spec_base_->get();
    pool->desc_.spec = pool->device_spec_ptrs_->get();
    pool->desc_.spec_tokens = spec_tokens;
  }
  return pool;
}

engine::SequenceKv TestKvPool::host_seq(int32_t seq) {
  engine::SequenceKv kv{.blocks = tables_[seq]};
  if (spec_tokens_ > 0) {
    kv.spec_base = spec_base_[seq];
    kv.spec = host_spec_[seq].data();
    kv.spec_tokens = spec_tokens_;
  }
  return kv;
}

bool TestKvPool::DeviceMatchesHost() const {
  if (ToFloat(device_->Download()) != host_) return false;
  for (size_t q = 0; q < host_spec_.size(); ++q) {
    if (ToFloat(device_spec_[q]->Download()) != host_spec_[q]) return false;
  }
  return true;
}

}  // namespace lockstep::cuda::kernels::testing
