// What the CUDA runtime and NCCL report on this machine. Works without a GPU (the
// device count is then 0), so it proves the toolkit links.
#ifndef LOCKSTEP_RUNTIME_CUDA_DEVICE_PROBE_H_
#define LOCKSTEP_RUNTIME_CUDA_DEVICE_PROBE_H_

#include <string>

namespace lockstep::cuda {

struct DeviceProbe {
  int nccl_version = 0;  // e.g. 22703 for 2.27.3
  int cuda_runtime_version = 0;
  int device_count = 0;      // 0 when no GPU or no driver
  std::string device_error;  // why the device count is 0, if it is

  std::string ToString() const;
};

DeviceProbe ProbeDevices();

}  // namespace lockstep::cuda

#endif  // LOCKSTEP_RUNTIME_CUDA_DEVICE_PROBE_H_
