// The device functions CUDA kernels call, for kernels compiled as C++ on the CPU
// execution layer (included by prelude.h): barriers, warp shuffles and votes (each a
// sync op of the block executor, reported with its file:line), atomics, __ldg, __trap,
// fences, and the math builtins the device has beyond <math.h>.
//
// Thread safety: sync ops act on the calling kernel thread's block; atomics are
// std::atomic_ref operations, safe across blocks and streams.
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_DEVICE_BUILTINS_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_DEVICE_BUILTINS_H_

#include <math.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "runtime/cuda/cpu/kernel/block_executor.h"
#include "runtime/cuda/cpu/kernel/fma.h"

namespace lockstep::cuda_cpu::kernel {

template <typename T>
inline uint64_t ToBits(T value) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= sizeof(uint64_t),
                "a warp shuffle moves at most 8 bytes of a trivially copyable type");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
}

template <typename T>
inline T FromBits(uint64_t bits) {
  T value;
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}

template <typename T, typename Op>
inline T AtomicUpdate(T* address, Op op) {
  std::atomic_ref<T> ref(*address);
  T old = ref.load();
  while (!ref.compare_exchange_weak(old, op(old))) {
  }
  return old;
}

}  // namespace lockstep::cuda_cpu::kernel

// ---- Barriers and warp ops (file:line of the caller name them in reports).

inline void __syncthreads(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  ::lockstep::cuda_cpu::kernel::SyncThreads(file, line);
}

inline void __syncwarp(unsigned mask = 0xffffffffu, const char* file = __builtin_FILE(),
                       int line = __builtin_LINE()) {
  ::lockstep::cuda_cpu::kernel::WarpOp(::lockstep::cuda_cpu::kernel::WarpOpKind::kSync, mask, 0, 0,
                                       32, file, line);
}

#define LOCKSTEP_CUDA_CPU_SHUFFLE(name, kind, operand_type)                         \
  template <typename T>                                                             \
  inline T name(unsigned mask, T var, operand_type operand, int width = 32,         \
                const char* file = __builtin_FILE(), int line = __builtin_LINE()) { \
    namespace k = ::lockstep::cuda_cpu::kernel;                                     \
    return k::FromBits<T>(k::WarpOp(k::WarpOpKind::kind, mask, k::ToBits(var),      \
                                    static_cast<int>(operand), width, file, line)); \
  }
LOCKSTEP_CUDA_CPU_SHUFFLE(__shfl_sync, kShfl, int)
LOCKSTEP_CUDA_CPU_SHUFFLE(__shfl_up_sync, kShflUp, unsigned)
LOCKSTEP_CUDA_CPU_SHUFFLE(__shfl_down_sync, kShflDown, unsigned)
LOCKSTEP_CUDA_CPU_SHUFFLE(__shfl_xor_sync, kShflXor, int)
#undef LOCKSTEP_CUDA_CPU_SHUFFLE

inline unsigned __ballot_sync(unsigned mask, int predicate, const char* file = __builtin_FILE(),
                              int line = __builtin_LINE()) {
  namespace k = ::lockstep::cuda_cpu::kernel;
  return static_cast<unsigned>(
      k::WarpOp(k::WarpOpKind::kBallot, mask, predicate != 0, 0, 32, file, line));
}

inline int __any_sync(unsigned mask, int predicate, const char* file = __builtin_FILE(),
                      int line = __builtin_LINE()) {
  namespace k = ::lockstep::cuda_cpu::kernel;
  return static_cast<int>(k::WarpOp(k::WarpOpKind::kAny, mask, predicate != 0, 0, 32, file, line));
}

inline int __all_sync(unsigned mask, int predicate, const char* file = __builtin_FILE(),
                      int line = __builtin_LINE()) {
  namespace k = ::lockstep::cuda_cpu::kernel;
  return static_cast<int>(k::WarpOp(k::WarpOpKind::kAll, mask, predicate != 0, 0, 32, file, line));
}

// ---- Faults.

// Fails the launch (cudaErrorLaunchFailure, sticky) naming the kernel thread.
[[noreturn]] inline void __trap(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  ::lockstep::cuda_cpu::kernel::FailKernel(cudaErrorLaunchFailure, "__trap()", file, line);
}

// ---- Memory.

template <typename T>
inline T __ldg(const T* address) {
  return *address;
}

inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }

// Atomics on int, unsigned, unsigned long long, float and double, as the device has
// them; each returns the old value.
template <typename T>
inline T atomicAdd(T* address, std::type_identity_t<T> value) {
  return std::atomic_ref<T>(*address).fetch_add(value);
}
template <typename T>
inline T atomicSub(T* address, std::type_identity_t<T> value) {
  return std::atomic_ref<T>(*address).fetch_sub(value);
}
template <typename T>
inline T atomicExch(T* address, std::type_identity_t<T> value) {
  return std::atomic_ref<T>(*address).exchange(value);
}
template <typename T>
inline T atomicCAS(T* address, std::type_identity_t<T> compare, std::type_identity_t<T> value) {
  std::atomic_ref<T>(*address).compare_exchange_strong(compare, value);
  return compare;
}
template <typename T>
inline T atomicMax(T* address, std::type_identity_t<T> value) {
  return ::lockstep::cuda_cpu::kernel::AtomicUpdate(address,
                                                    [value](T v) { return v < value ? value : v; });
}
template <typename T>
inline T atomicMin(T* address, std::type_identity_t<T> value) {
  return ::lockstep::cuda_cpu::kernel::AtomicUpdate(address,
                                                    [value](T v) { return value < v ? value : v; });
}
template <typename T>
inline T atomicAnd(T* address, std::type_identity_t<T> value) {
  return std::atomic_ref<T>(*address).fetch_and(value);
}
template <typename T>
inline T atomicOr(T* address, std::type_identity_t<T> value) {
  return std::atomic_ref<T>(*address).fetch_or(value);
}
template <typename T>
inline T atomicXor(T* address, std::type_identity_t<T> value) {
  return std::atomic_ref<T>(*address).fetch_xor(value);
}

// ---- Math beyond <math.h> (the fast intrinsics are the accurate functions here).

inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fmaf_rn(float a, float b, float c) {
  return ::lockstep::cuda_cpu::kernel::Fma(a, b, c);
}
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }

inline int min(int a, int b) { return a < b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline long min(long a, long b) { return a < b ? a : b; }
inline unsigned long min(unsigned long a, unsigned long b) { return a < b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long max(long a, long b) { return a > b ? a : b; }
inline unsigned long max(unsigned long a, unsigned long b) { return a > b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double max(double a, double b) { return fmax(a, b); }

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_DEVICE_BUILTINS_H_
