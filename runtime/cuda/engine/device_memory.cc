#include "runtime/cuda/engine/device_memory.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/cuda/cuda_status.h"

namespace lockstep::cuda {

std::string FreeMemoryText() {
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    cudaGetLastError();
    return "free memory unknown";
  }
  return absl::StrCat(free_bytes, " bytes free of ", total_bytes);
}

absl::StatusOr<DeviceBuffer> DeviceBuffer::Allocate(int device, size_t bytes,
                                                    absl::string_view what) {
  if (bytes == 0) bytes = 1;
  if (absl::Status s = CudaStatus(cudaSetDevice(device), absl::StrCat("device ", device));
      !s.ok()) {
    return s;
  }
  DeviceBuffer buffer;
  const cudaError_t err = cudaMalloc(&buffer.data_, bytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: later calls start clean
    return absl::ResourceExhaustedError(absl::StrCat("device ", device, ": ", what, " (", bytes,
                                                     " bytes) does not fit: ", FreeMemoryText()));
  }
  if (absl::Status s = CudaStatus(err, absl::StrCat("device ", device, ": allocating ", what));
      !s.ok()) {
    return s;
  }
  buffer.device_ = device;
  buffer.bytes_ = bytes;
  return buffer;
}

DeviceBuffer::~DeviceBuffer() { Release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : device_(other.device_),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    device_ = other.device_;
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::Release() {
  if (data_ == nullptr) return;
  cudaSetDevice(device_);
  cudaFree(data_);
  data_ = nullptr;
  bytes_ = 0;
}

absl::StatusOr<PinnedBuffer> PinnedBuffer::Allocate(size_t bytes, absl::string_view what) {
  if (bytes == 0) bytes = 1;
  PinnedBuffer buffer;
  if (absl::Status s =
          CudaStatus(cudaMallocHost(&buffer.data_, bytes),
                     absl::StrCat("pinned host memory for ", what, " (", bytes, " bytes)"));
      !s.ok()) {
    return s;
  }
  buffer.bytes_ = bytes;
  return buffer;
}

PinnedBuffer::~PinnedBuffer() { Release(); }

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void PinnedBuffer::Release() {
  if (data_ == nullptr) return;
  cudaFreeHost(data_);
  data_ = nullptr;
  bytes_ = 0;
}

}  // namespace lockstep::cuda
