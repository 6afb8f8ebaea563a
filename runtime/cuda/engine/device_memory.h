// Device and pinned host allocations of the CUDA engine, made at load (never inside a
// step): an allocation the device cannot hold is ResourceExhausted naming what it was
// for, its size and the device's free and total memory.
//
// Move-only owners; thread-compatible. Each frees on destruction with the device it
// was made on current.
#ifndef LOCKSTEP_RUNTIME_CUDA_ENGINE_DEVICE_MEMORY_H_
#define LOCKSTEP_RUNTIME_CUDA_ENGINE_DEVICE_MEMORY_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lockstep::cuda {

// "<bytes> bytes free of <total>" for the current device (or why unknown).
std::string FreeMemoryText();

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // cudaMalloc of `bytes` (>= 1) on `device`; `what` names it in errors.
  static absl::StatusOr<DeviceBuffer> Allocate(int device, size_t bytes, absl::string_view what);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return data_; }
  size_t bytes() const { return bytes_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  void Release();

  int device_ = 0;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Page-locked host memory (cudaMallocHost), the staging of the step's copies.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  static absl::StatusOr<PinnedBuffer> Allocate(size_t bytes, absl::string_view what);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void* get() const { return data_; }
  size_t bytes() const { return bytes_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  void Release();

  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace lockstep::cuda

#endif  // LOCKSTEP_RUNTIME_CUDA_ENGINE_DEVICE_MEMORY_H_
