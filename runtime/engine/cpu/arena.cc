#include "runtime/engine/cpu/arena.h"

#include <algorithm>

namespace lockstep::engine {
namespace {

constexpr size_t kAlign = 64;

size_t RoundUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

void Arena::AddChunk(size_t bytes) {
  Chunk chunk;
  chunk.size = RoundUp(bytes);
  // Over-allocate so the start can be aligned.
  chunk.data.reset(new std::byte[chunk.size + kAlign]);
  ++heap_allocations_;
  chunks_.push_back(std::move(chunk));
  used_ = 0;
}

void* Arena::AllocBytes(size_t bytes) {
  bytes = RoundUp(std::max<size_t>(bytes, 1));
  if (chunks_.empty() || used_ + bytes > chunks_.back().size) {
    const size_t last = chunks_.empty() ? 0 : chunks_.back().size;
    AddChunk(std::max({bytes, 2 * last, size_t{1} << 16}));
  }
  Chunk& chunk = chunks_.back();
  auto base = reinterpret_cast<uintptr_t>(chunk.data.get());
  base = (base + kAlign - 1) / kAlign * kAlign;
  void* result = reinterpret_cast<void*>(base + used_);
  used_ += bytes;
  return result;
}

void Arena::Reset() {
  if (chunks_.size() > 1) {
    const size_t total = capacity();
    chunks_.clear();
    AddChunk(total);
  }
  used_ = 0;
}

size_t Arena::capacity() const {
  size_t total = 0;
  for (const Chunk& chunk : chunks_) total += chunk.size;
  return total;
}

}  // namespace lockstep::engine
