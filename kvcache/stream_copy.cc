#include "kvcache/stream_copy.h"

#include <atomic>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace lockstep::kv {
namespace {

#if defined(__x86_64__)

// Below this, a streaming copy saves too little to pay for its fence.
constexpr size_t kStreamMin = 4096;

__attribute__((target("avx2"))) void CopyAvx2(uint8_t* dst, const uint8_t* src, size_t n) {
  // Head: up to the next 32-byte boundary of dst.
  const size_t head = (32 - (reinterpret_cast<uintptr_t>(dst) & 31)) & 31;
  std::memcpy(dst, src, head);
  dst += head;
  src += head;
  n -= head;
  for (; n >= 128; dst += 128, src += 128, n -= 128) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 64));
    const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 96));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + 32), b);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + 64), c);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + 96), d);
  }
  for (; n >= 32; dst += 32, src += 32, n -= 32) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)));
  }
  std::memcpy(dst, src, n);
}

bool HasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

#else

bool HasAvx2() { return false; }

#endif

}  // namespace

void StreamCopy(void* dst, const void* src, size_t n) {
#if defined(__x86_64__)
  if (n >= kStreamMin && HasAvx2()) {
    CopyAvx2(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), n);
    return;
  }
#endif
  std::memcpy(dst, src, n);
}

void StreamCopyFence() {
#if defined(__x86_64__)
  _mm_sfence();
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

bool StreamCopyIsAccelerated() { return HasAvx2(); }

}  // namespace lockstep::kv
