#include "runtime/cuda/engine/device_kv_pool.h"

#include <cuda_runtime_api.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "runtime/cuda/cuda_status.h"

namespace lockstep::cuda {

absl::StatusOr<DeviceKvPool> MakeDeviceKvPool(int device, const kv::BlockLayout& layout,
                                              int32_t blocks) {
  if (blocks < 1) return absl::InvalidArgumentError(absl::StrCat("a pool of ", blocks, " blocks"));
  const std::string what = absl::StrCat("a KV pool of ", blocks, " blocks");
  DeviceKvPool pool;
  ASSIGN_OR_RETURN(
      pool.memory,
      DeviceBuffer::Allocate(device, static_cast<size_t>(blocks) * layout.BlockBytes(), what));
  RETURN_IF_ERROR(CudaStatus(cudaMemset(pool.memory.get(), 0, pool.memory.bytes()), what));
  RETURN_IF_ERROR(CudaStatus(cudaDeviceSynchronize(), what));
  pool.view = {pool.memory.as<float>(), layout, blocks};
  return pool;
}

}  // namespace lockstep::cuda
