// Prints the driver, CUDA runtime, cuBLAS and NCCL versions and every visible GPU.
// Exit status 0 when at least one GPU is usable, 1 otherwise (the reason is printed).
#include <cstdio>

#include "runtime/cuda/device_probe.h"

int main() {
  const lockstep::cuda::DeviceProbe probe = lockstep::cuda::ProbeDevices();
  std::printf("%s", probe.ToString().c_str());
  if (probe.devices.empty()) {
    std::printf("no usable CUDA device: %s\n",
                probe.device_error.empty() ? "none visible" : probe.device_error.c_str());
    return 1;
  }
  return 0;
}
