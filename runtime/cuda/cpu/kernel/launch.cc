#include "runtime/cuda/cpu/kernel/launch.h"

#include <cstdio>
#include <mutex>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/cuda/cpu/stream_ops.h"

namespace lockstep::cuda_cpu {
namespace {

struct FuncAttributes {
  std::mutex mu;
  absl::flat_hash_map<const void*, size_t> max_dynamic_shared;  // guarded by mu
};

FuncAttributes& Attributes() {
  static FuncAttributes* attributes = new FuncAttributes();
  return *attributes;
}

size_t MaxDynamicShared(const void* kernel_id) {
  FuncAttributes& a = Attributes();
  std::lock_guard<std::mutex> lock(a.mu);
  auto it = a.max_dynamic_shared.find(kernel_id);
  return it == a.max_dynamic_shared.end() ? kDefaultMaxDynamicShared : it->second;
}

}  // namespace

cudaError_t ValidateLaunch(const void* kernel_id, dim3 grid, dim3 block,
                           size_t dynamic_shared_bytes, std::string* message) {
  const uint64_t threads = static_cast<uint64_t>(block.x) * block.y * block.z;
  if (block.x < 1 || block.y < 1 || block.z < 1 || block.x > 1024 || block.y > 1024 ||
      block.z > 64 || threads > 1024) {
    *message = absl::StrFormat(
        "block (%u,%u,%u) is empty or beyond (1024,1024,64) and 1024 "
        "threads",
        block.x, block.y, block.z);
    return cudaErrorInvalidConfiguration;
  }
  if (grid.x < 1 || grid.y < 1 || grid.z < 1 || grid.x > 0x7fffffffu || grid.y > 65535 ||
      grid.z > 65535) {
    *message = absl::StrFormat("grid (%u,%u,%u) is empty or beyond (2^31-1,65535,65535)", grid.x,
                               grid.y, grid.z);
    return cudaErrorInvalidConfiguration;
  }
  if (const size_t limit = MaxDynamicShared(kernel_id); dynamic_shared_bytes > limit) {
    *message = absl::StrCat(dynamic_shared_bytes, " bytes of dynamic shared memory exceed the ",
                            limit, " this kernel may use (cudaFuncSetAttribute raises it to ",
                            kOptInMaxDynamicShared, ")");
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

void SubmitLaunch(const void* kernel_id, std::shared_ptr<const void> state,
                  const kernel::GridSpec* spec, cudaStream_t stream) {
  std::string message;
  if (cudaError_t e =
          ValidateLaunch(kernel_id, spec->grid, spec->block, spec->dynamic_shared_bytes, &message);
      e != cudaSuccess) {
    SetLastError(e);
    return;
  }
  cudaError_t e = Enqueue(stream, absl::StrCat("kernel ", spec->kernel_name),
                          [state = std::move(state), spec]() { return kernel::RunGrid(*spec); });
  if (e != cudaSuccess) SetLastError(e);
}

}  // namespace lockstep::cuda_cpu

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  if (func == nullptr) return cudaErrorInvalidDeviceFunction;
  switch (attr) {
    case cudaFuncAttributeMaxDynamicSharedMemorySize: {
      if (value < 0 || static_cast<size_t>(value) > lockstep::cuda_cpu::kOptInMaxDynamicShared) {
        return cudaErrorInvalidValue;
      }
      auto& a = lockstep::cuda_cpu::Attributes();
      std::lock_guard<std::mutex> lock(a.mu);
      a.max_dynamic_shared[func] = static_cast<size_t>(value);
      return cudaSuccess;
    }
    case cudaFuncAttributePreferredSharedMemoryCarveout:
      return value >= -1 && value <= 100 ? cudaSuccess : cudaErrorInvalidValue;
  }
  return cudaErrorInvalidValue;
}
