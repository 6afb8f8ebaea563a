// Prints the NCCL and CUDA runtime versions and the number of visible GPUs.
#include <cstdio>

#include "runtime/cuda/device_probe.h"

int main() {
  std::printf("%s\n", lockstep::cuda::ProbeDevices().ToString().c_str());
  return 0;
}
