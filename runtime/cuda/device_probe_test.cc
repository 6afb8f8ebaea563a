#include "runtime/cuda/device_probe.h"

#include <vector>

#include "gtest/gtest.h"
#include "runtime/cuda/vector_add.h"

namespace lockstep::cuda {
namespace {

TEST(DeviceProbeTest, NcclAndRuntimeLink) {
  const DeviceProbe probe = ProbeDevices();
  EXPECT_GE(probe.nccl_version, 20000) << probe.ToString();
  EXPECT_GT(probe.cuda_runtime_version, 0) << probe.ToString();
}

TEST(DeviceProbeTest, VectorAddOnDevice) {
  if (ProbeDevices().device_count == 0) GTEST_SKIP() << "no CUDA device";
  std::vector<float> a = {1, 2, 3}, b = {10, 20, 30}, out(3);
  ASSERT_EQ(VectorAdd(a.data(), b.data(), out.data(), 3), 0);
  EXPECT_EQ(out, (std::vector<float>{11, 22, 33}));
}

}  // namespace
}  // namespace lockstep::cuda
