// Helpers of the kernels' GPU checks: device buffers that are poisoned (all bits set:
// NaN as bf16 and as f32) before each run, bf16-rounded random inputs, NaN checks and
// the relative L2 error the checks compare with (||out - ref|| / ||ref||).
#ifndef LOCKSTEP_RUNTIME_CUDA_KERNELS_KERNEL_TEST_UTIL_H_
#define LOCKSTEP_RUNTIME_CUDA_KERNELS_KERNEL_TEST_UTIL_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <random>
#include <vector>

#include "absl/types/span.h"
#include "runtime/cuda/kernels/bf16.h"

namespace lockstep::cuda::kernels::testing {

// Device memory of `count` T's, freed on destruction. Copy() and Fill() are synchronous.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t count) : count_(count) {
    void* data = nullptr;
    if (cudaMalloc(&data, (count_ == 0 ? 1 : count_) * sizeof(T)) == cudaSuccess) {
      data_ = static_cast<T*>(data);
    }
  }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) { Upload(host); }
  ~DeviceArray() {
    if (data_ != nullptr) cudaFree(data_);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() const { return data_; }
  size_t size() const { return count_; }
  bool ok() const { return data_ != nullptr; }

  cudaError_t Upload(const std::vector<T>& host) {
    return cudaMemcpy(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  // Sets every byte to 0xff (NaN for bf16 and f32 elements).
  cudaError_t Poison() { return cudaMemset(data_, 0xff, count_ * sizeof(T)); }
  std::vector<T> Download() const {
    std::vector<T> host(count_);
    if (cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost) != cudaSuccess) {
      host.clear();
    }
    return host;
  }

 private:
  size_t count_ = 0;
  T* data_ = nullptr;
};

// `n` floats from N(0, stddev), each rounded to bf16 (the inputs the kernels see).
std::vector<float> RandomBf16Floats(std::mt19937_64& rng, size_t n, float stddev = 1.0f);

std::vector<Bf16> ToBf16(absl::Span<const float> values);
std::vector<float> ToFloat(absl::Span<const Bf16> values);
// Each value rounded to bf16 (the reference as a bf16 kernel stores it).
std::vector<float> RoundedToBf16(absl::Span<const float> values);

bool HasNaN(absl::Span<const float> values);

// ||out - ref||_2 / ||ref||_2 (in double); infinity when the sizes differ.
double RelativeL2(absl::Span<const float> out, absl::Span<const float> ref);

}  // namespace lockstep::cuda::kernels::testing

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_KERNEL_TEST_UTIL_H_
