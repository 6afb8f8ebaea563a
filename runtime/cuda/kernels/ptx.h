// Tensor-core building blocks for the faster kernels (device code: included by .cu files
// only; no kernel uses them yet): one warp's mma.sync m16n8k16 with bf16 inputs and f32
// accumulation, ldmatrix of four 8x8 b16 matrices from shared memory, and cp.async
// 16-byte copies from global to shared memory with commit and wait groups.
//
// Under nvcc each is the PTX instruction (inline asm, sm_80 and later). On the CPU
// execution layer each implements the instruction's documented per-lane semantics:
// mma and ldmatrix gather the other lanes' fragments or row addresses with warp
// shuffles (so every lane of the warp must call them, as on the GPU, or the layer
// reports the missing lane), and cp.async copies nothing until a wait covers its
// group (so a missing wait reads the destination's old contents, as a GPU may).
//
// Fragments (PTX ISA, "Matrix fragments for mma.m16n8k16"; lane = 4 g + t):
//   A (16 x 16, row-major), 4 registers of two bf16 (the lower column in the low half):
//     a[0] = A[g][2t, 2t+1], a[1] = A[g+8][2t, 2t+1], a[2] = A[g][2t+8, 2t+9],
//     a[3] = A[g+8][2t+8, 2t+9]
//   B (16 x 8, "col": k down the rows), 2 registers: b[0] = B[2t, 2t+1][g],
//     b[1] = B[2t+8, 2t+9][g] (the lower k in the low half)
//   C and D (16 x 8 f32): c[0..1] = C[g][2t, 2t+1], c[2..3] = C[g+8][2t, 2t+1]
#ifndef LOCKSTEP_RUNTIME_CUDA_KERNELS_PTX_H_
#define LOCKSTEP_RUNTIME_CUDA_KERNELS_PTX_H_

#include <cstdint>
#ifndef __CUDACC__
#include <cstring>
#include <vector>
#endif

namespace lockstep::cuda::kernels::ptx {

#ifdef __CUDACC__

// d = a * b + c for the warp's 16 x 8 tile (every lane calls it).
__device__ __forceinline__ void MmaM16N8K16Bf16(float d[4], const uint32_t a[4],
                                                const uint32_t b[2], const float c[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
        "f"(c[2]), "f"(c[3]));
}

// Lanes 8j..8j+7 give the 16-byte rows 0..7 of 8 x 8 matrix j (shared memory); every lane
// receives r[j] = matrix j's row lane / 4, columns 2 (lane % 4) and 2 (lane % 4) + 1.
__device__ __forceinline__ void LdMatrixX4(uint32_t r[4], const void* row) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// 16 bytes from global `src` to shared `dst` (both 16-byte aligned), asynchronously.
__device__ __forceinline__ void CpAsync16(void* dst, const void* src) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address), "l"(src));
}

// Closes the group of this thread's cp.async calls since the last commit.
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }

// Waits until at most `kPending` of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

#else  // the CPU execution layer

namespace internal {

inline float Bf16Low(uint32_t v) {
  const uint32_t bits = v << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline float Bf16High(uint32_t v) {
  const uint32_t bits = v & 0xffff0000u;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// One kernel thread's cp.async copies: open (not committed) and committed groups.
struct CpAsyncCopy {
  void* dst;
  const void* src;
};
struct CpAsyncQueue {
  const void* owner = nullptr;  // the kernel thread (its coordinates' address)
  uint64_t grid = 0;            // and its grid and block: a queue an earlier grid or block
  uint3 block{};                // left (never waited for) is dropped
  std::vector<CpAsyncCopy> open;
  std::vector<std::vector<CpAsyncCopy>> committed;  // oldest first
};

inline CpAsyncQueue& QueueOfThisThread() {
  // The kernel threads of a block are fibers of one OS thread: one queue per kernel
  // thread, found by its coordinates' address.
  thread_local std::vector<CpAsyncQueue> queues;
  const void* owner = &threadIdx;
  const uint64_t grid = ::lockstep::cuda_cpu::kernel::CurrentGridSerial();
  for (CpAsyncQueue& q : queues) {
    if (q.owner == owner) {
      if (q.grid != grid || q.block.x != blockIdx.x || q.block.y != blockIdx.y ||
          q.block.z != blockIdx.z) {
        q = CpAsyncQueue{owner, grid, blockIdx, {}, {}};
      }
      return q;
    }
  }
  queues.push_back(CpAsyncQueue{owner, grid, blockIdx, {}, {}});
  return queues.back();
}

}  // namespace internal

inline void MmaM16N8K16Bf16(float d[4], const uint32_t a[4], const uint32_t b[2],
                            const float c[4]) {
  constexpr unsigned kAll = 0xffffffffu;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int g = lane / 4;
  const int t = lane % 4;
  // This lane's rows of A (g and g + 8, all 16 k) from the lanes 4g..4g+3 that hold them.
  float a_rows[2][16];
  for (int j = 0; j < 4; ++j) {
    for (int r = 0; r < 4; ++r) {
      const uint32_t v = __shfl_sync(kAll, a[r], 4 * g + j);
      const int row = r % 2;                 // a[0], a[2]: row g; a[1], a[3]: row g + 8
      const int col = 2 * j + (r / 2) * 8;   // lane 4g + j holds columns 2j, 2j + 1 (+8)
      a_rows[row][col] = internal::Bf16Low(v);
      a_rows[row][col + 1] = internal::Bf16High(v);
    }
  }
  // This lane's columns of B (2t and 2t + 1, all 16 k) from lanes 4n..4n+3 (n = column).
  float b_cols[2][16];
  for (int n = 0; n < 2; ++n) {
    for (int j = 0; j < 4; ++j) {
      for (int r = 0; r < 2; ++r) {
        const uint32_t v = __shfl_sync(kAll, b[r], 4 * (2 * t + n) + j);
        const int k = 2 * j + r * 8;
        b_cols[n][k] = internal::Bf16Low(v);
        b_cols[n][k + 1] = internal::Bf16High(v);
      }
    }
  }
  for (int i = 0; i < 4; ++i) {
    float sum = c[i];
    for (int k = 0; k < 16; ++k) sum = __builtin_fmaf(a_rows[i / 2][k], b_cols[i % 2][k], sum);
    d[i] = sum;
  }
}

inline void LdMatrixX4(uint32_t r[4], const void* row) {
  constexpr unsigned kAll = 0xffffffffu;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const auto mine = static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(row));
  for (int j = 0; j < 4; ++j) {
    const unsigned long long from = __shfl_sync(kAll, mine, 8 * j + lane / 4);
    std::memcpy(&r[j], reinterpret_cast<const char*>(static_cast<uintptr_t>(from)) + 4 * (lane % 4),
                4);
  }
}

inline void CpAsync16(void* dst, const void* src) {
  internal::QueueOfThisThread().open.push_back({dst, src});
}

inline void CpAsyncCommit() {
  internal::CpAsyncQueue& q = internal::QueueOfThisThread();
  q.committed.push_back(std::move(q.open));
  q.open.clear();
}

template <int kPending>
inline void CpAsyncWait() {
  internal::CpAsyncQueue& q = internal::QueueOfThisThread();
  while (static_cast<int>(q.committed.size()) > kPending) {
    for (const internal::CpAsyncCopy& copy : q.committed.front()) std::memcpy(copy.dst, copy.src, 16);
    q.committed.erase(q.committed.begin());
  }
}

#endif  // __CUDACC__

}  // namespace lockstep::cuda::kernels::ptx

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_PTX_H_
