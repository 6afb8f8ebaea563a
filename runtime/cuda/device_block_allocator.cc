#include "runtime/cuda/device_block_allocator.h"

#include <cuda_runtime_api.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/cuda/cuda_status.h"

namespace lockstep::cuda {

absl::StatusOr<DeviceMemory> QueryDeviceMemory(int device) {
  DeviceMemory memory;
  if (absl::Status s = CudaStatus(cudaSetDevice(device), absl::StrCat("device ", device));
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CudaStatus(cudaMemGetInfo(&memory.free_bytes, &memory.total_bytes),
                                  absl::StrCat("device ", device, ": cudaMemGetInfo"));
      !s.ok()) {
    return s;
  }
  return memory;
}

absl::StatusOr<std::byte*> DeviceBlockAllocator::Allocate(size_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("KV block storage of 0 bytes requested");
  const std::string where = absl::StrCat("device ", device_);
  if (absl::Status s = CudaStatus(cudaSetDevice(device_), where); !s.ok()) return s;
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky; clear it so later calls start clean
    size_t free_bytes = 0, total_bytes = 0;
    const std::string free_text = cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess
                                      ? absl::StrCat(free_bytes, " bytes free of ", total_bytes)
                                      : std::string("free bytes unknown");
    return absl::ResourceExhaustedError(
        absl::StrCat(where, ": cannot allocate ", bytes, " bytes for KV blocks; ", free_text));
  }
  if (absl::Status s = CudaStatus(err, absl::StrCat(where, ": cudaMalloc of ", bytes, " bytes"));
      !s.ok()) {
    return s;
  }
  absl::Status s = CudaStatus(cudaMemset(p, 0, bytes), absl::StrCat(where, ": zero-filling"));
  if (s.ok()) s = CudaStatus(cudaDeviceSynchronize(), absl::StrCat(where, ": zero-filling"));
  if (!s.ok()) {
    cudaFree(p);
    return s;
  }
  return static_cast<std::byte*>(p);
}

void DeviceBlockAllocator::Free(std::byte* p, size_t /*bytes*/) {
  if (p == nullptr) return;
  cudaSetDevice(device_);
  cudaFree(p);
}

absl::StatusOr<std::unique_ptr<kv::BlockCopier>> DeviceBlockAllocator::MakeCopier(
    std::byte* base, const kv::BlockLayout& layout, int32_t num_blocks) {
  absl::StatusOr<std::unique_ptr<DeviceBlockCopier>> copier =
      DeviceBlockCopier::Create(device_, base, layout, num_blocks, copier_options_);
  if (!copier.ok()) return copier.status();
  return std::unique_ptr<kv::BlockCopier>(std::move(copier).value());
}

}  // namespace lockstep::cuda
