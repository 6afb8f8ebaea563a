// A per-step bump allocator: the forward takes all its scratch from here, so no heap
// allocation happens per token once the arena has grown to the largest batch seen.
//
//   arena.Reset();                      // start of a forward
//   float* h = arena.Alloc<float>(m * hidden);
//
// Reset invalidates every pointer handed out. Thread-compatible (owned by the engine
// thread; worker threads only use memory handed to them).
#ifndef LOCKSTEP_RUNTIME_ENGINE_CPU_ARENA_H_
#define LOCKSTEP_RUNTIME_ENGINE_CPU_ARENA_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace lockstep::engine {

class Arena {
 public:
  Arena() = default;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // Uninitialised storage for `n` values of trivial type T, 64-byte aligned.
  template <typename T>
  T* Alloc(size_t n) {
    return static_cast<T*>(AllocBytes(n * sizeof(T)));
  }

  // Frees everything. When the last cycle needed more than one chunk, they are
  // replaced by one chunk of the total size, so the next cycle allocates nothing.
  void Reset();

  // Bytes held (for tests and stats).
  size_t capacity() const;
  // Heap allocations made so far (for tests).
  int64_t num_heap_allocations() const { return heap_allocations_; }

 private:
  struct Chunk {
    std::unique_ptr<std::byte[]> data;
    size_t size = 0;
  };

  void* AllocBytes(size_t bytes);
  void AddChunk(size_t bytes);

  std::vector<Chunk> chunks_;
  size_t used_ = 0;  // bytes used in chunks_.back()
  int64_t heap_allocations_ = 0;
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_ARENA_H_
