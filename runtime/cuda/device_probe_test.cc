#include "runtime/cuda/device_probe.h"

#include "gtest/gtest.h"
#include "runtime/cuda/gpu_test_env.h"

namespace lockstep::cuda {
namespace {

// Needs no GPU: the libraries load and report their versions.
TEST(DeviceProbeTest, LibrariesReportVersions) {
  const DeviceProbe probe = ProbeDevices();
  EXPECT_GE(probe.runtime_version, 12000) << probe.ToString();
  EXPECT_GE(probe.cublas_version, 10000) << probe.ToString();
  EXPECT_GE(probe.cublaslt_version, 10000u) << probe.ToString();
  EXPECT_GE(probe.nccl_version, 21900) << probe.ToString();
}

TEST(DeviceProbeTest, DevicesHaveNamesAndMemory) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const DeviceProbe probe = ProbeDevices();
  ASSERT_FALSE(probe.devices.empty()) << probe.ToString();
  EXPECT_GE(probe.driver_version, probe.runtime_version) << probe.ToString();
  for (const DeviceInfo& d : probe.devices) {
    EXPECT_FALSE(d.name.empty()) << probe.ToString();
    EXPECT_GT(d.sm_count, 0) << probe.ToString();
    EXPECT_GT(d.total_bytes, 0u) << probe.ToString();
    EXPECT_LE(d.free_bytes, d.total_bytes) << probe.ToString();
  }
}

}  // namespace
}  // namespace lockstep::cuda
