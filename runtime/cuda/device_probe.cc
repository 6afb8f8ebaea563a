#include "runtime/cuda/device_probe.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include "absl/strings/str_cat.h"

namespace lockstep::cuda {

DeviceProbe ProbeDevices() {
  DeviceProbe probe;
  ncclGetVersion(&probe.nccl_version);
  cudaRuntimeGetVersion(&probe.cuda_runtime_version);
  const cudaError_t err = cudaGetDeviceCount(&probe.device_count);
  if (err != cudaSuccess) {
    probe.device_count = 0;
    probe.device_error = cudaGetErrorString(err);
  }
  return probe;
}

std::string DeviceProbe::ToString() const {
  return absl::StrCat("nccl ", nccl_version / 10000, ".", (nccl_version / 100) % 100, ".",
                      nccl_version % 100, ", cuda runtime ", cuda_runtime_version / 1000, ".",
                      (cuda_runtime_version % 1000) / 10, ", devices ", device_count,
                      device_error.empty() ? "" : absl::StrCat(" (", device_error, ")"));
}

}  // namespace lockstep::cuda
