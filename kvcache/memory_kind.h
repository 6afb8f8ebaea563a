// Where KV block storage lives. Host memory may be read and written through its
// pointers; device memory may not (its addresses belong to an accelerator) and is
// reached only through a BlockCopier (block_copier.h).
#ifndef LOCKSTEP_KVCACHE_MEMORY_KIND_H_
#define LOCKSTEP_KVCACHE_MEMORY_KIND_H_

namespace lockstep::kv {

enum class MemoryKind { kHost, kDevice };

// "host" or "device".
constexpr const char* MemoryKindName(MemoryKind kind) {
  return kind == MemoryKind::kHost ? "host" : "device";
}

}  // namespace lockstep::kv

#endif  // LOCKSTEP_KVCACHE_MEMORY_KIND_H_
