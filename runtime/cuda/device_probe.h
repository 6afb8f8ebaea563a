// What the CUDA driver, runtime, cuBLAS and NCCL report on this machine, and each
// visible GPU. Works without a GPU or driver (no devices, and `device_error` says why),
// so it proves the libraries load. Printed first by every GPU acceptance run.
#ifndef LOCKSTEP_RUNTIME_CUDA_DEVICE_PROBE_H_
#define LOCKSTEP_RUNTIME_CUDA_DEVICE_PROBE_H_

#include <cstddef>
#include <string>
#include <vector>

namespace lockstep::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;  // e.g. "NVIDIA H200"
  int compute_major = 0;
  int compute_minor = 0;
  int sm_count = 0;
  size_t total_bytes = 0;
  size_t free_bytes = 0;  // at probe time (cudaMemGetInfo)
};

struct DeviceProbe {
  int driver_version = 0;       // CUDA version the driver supports, e.g. 13000; 0: none
  int runtime_version = 0;      // libcudart, e.g. 13000
  int cublas_version = 0;       // libcublas major*10000 + minor*100 + patch
  size_t cublaslt_version = 0;  // cublasLtGetVersion(), e.g. 130100
  int nccl_version = 0;         // ncclGetVersion(), e.g. 22809 for 2.28.9
  std::vector<DeviceInfo> devices;
  std::string device_error;  // why `devices` is empty, if it is

  // One line per library and per device.
  std::string ToString() const;
};

DeviceProbe ProbeDevices();

}  // namespace lockstep::cuda

#endif  // LOCKSTEP_RUNTIME_CUDA_DEVICE_PROBE_H_
