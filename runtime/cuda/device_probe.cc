#include "runtime/cuda/device_probe.h"

#include <cublasLt.h>
#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace lockstep::cuda {
namespace {

// 13000 -> "13.0" (the driver and runtime encoding: major*1000 + minor*10).
std::string CudaVersionString(int v) {
  if (v == 0) return "none";
  return absl::StrCat(v / 1000, ".", (v % 1000) / 10);
}

// major*10000 + minor*100 + patch -> "major.minor.patch" (cuBLAS, cuBLASLt, NCCL >= 2.9).
std::string TripleVersionString(size_t v) {
  return absl::StrCat(v / 10000, ".", (v / 100) % 100, ".", v % 100);
}

int CublasVersion() {
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS ||
      cublasGetProperty(MINOR_VERSION, &minor) != CUBLAS_STATUS_SUCCESS ||
      cublasGetProperty(PATCH_LEVEL, &patch) != CUBLAS_STATUS_SUCCESS) {
    return 0;
  }
  return major * 10000 + minor * 100 + patch;
}

}  // namespace

DeviceProbe ProbeDevices() {
  DeviceProbe probe;
  cudaDriverGetVersion(&probe.driver_version);
  cudaRuntimeGetVersion(&probe.runtime_version);
  probe.cublas_version = CublasVersion();
  probe.cublaslt_version = cublasLtGetVersion();
  ncclGetVersion(&probe.nccl_version);

  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    probe.device_error = absl::StrCat(cudaGetErrorName(err), ": ", cudaGetErrorString(err));
    cudaGetLastError();  // reset the error state for later calls
    return probe;
  }
  for (int i = 0; i < count; ++i) {
    DeviceInfo info;
    info.index = i;
    cudaDeviceProp prop{};
    err = cudaGetDeviceProperties(&prop, i);
    if (err == cudaSuccess) {
      info.name = prop.name;
      info.compute_major = prop.major;
      info.compute_minor = prop.minor;
      info.sm_count = prop.multiProcessorCount;
      info.total_bytes = prop.totalGlobalMem;
    }
    if (err == cudaSuccess) err = cudaSetDevice(i);
    if (err == cudaSuccess) err = cudaMemGetInfo(&info.free_bytes, &info.total_bytes);
    if (err != cudaSuccess) {
      probe.device_error =
          absl::StrCat("device ", i, ": ", cudaGetErrorName(err), ": ", cudaGetErrorString(err));
    }
    probe.devices.push_back(std::move(info));
  }
  if (count > 0) cudaSetDevice(0);
  return probe;
}

std::string DeviceProbe::ToString() const {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  std::string out = absl::StrCat(
      "driver (CUDA) ", CudaVersionString(driver_version), "\n", "cuda runtime ",
      CudaVersionString(runtime_version), "\n", "cublas ", TripleVersionString(cublas_version),
      "\n", "cublasLt ", TripleVersionString(cublaslt_version), "\n", "nccl ",
      TripleVersionString(nccl_version), "\n", "devices ", devices.size(),
      device_error.empty() ? "" : absl::StrCat(" (", device_error, ")"), "\n");
  for (const DeviceInfo& d : devices) {
    absl::StrAppendFormat(&out, "device %d: %s, sm_%d%d, %d SMs, %.1f GiB total, %.1f GiB free\n",
                          d.index, d.name, d.compute_major, d.compute_minor, d.sm_count,
                          d.total_bytes / kGiB, d.free_bytes / kGiB);
  }
  return out;
}

}  // namespace lockstep::cuda
