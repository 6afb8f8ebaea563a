// Devices: how many (LOCKSTEP_CUDA_CPU_DEVICES, default 8), their memory
// (LOCKSTEP_CUDA_CPU_MEMORY bytes each, default 2 GiB), the properties of an H200 under
// a name that says what it is, each thread's current device, and versions.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cuda_runtime_api.h"
#include "runtime/cuda/cpu/runtime_state.h"

namespace lockstep::cuda_cpu {
namespace internal {
namespace {

constexpr size_t kGiB = size_t{1} << 30;
thread_local int current_device = 0;

// A positive integer from the environment variable `name`, `fallback` when unset; a
// bad value ends the process with a message naming it.
long long EnvInt(const char* name, long long fallback, long long max) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0' || value < 1 || value > max) {
    std::fprintf(stderr, "cuda_cpu: %s=%s is not an integer in [1, %lld]\n", name, text, max);
    std::abort();
  }
  return value;
}

}  // namespace

int DeviceCount() {
  static const int count = static_cast<int>(EnvInt("LOCKSTEP_CUDA_CPU_DEVICES", 8, 64));
  return count;
}

size_t MemoryCap() {
  static const size_t cap = static_cast<size_t>(
      EnvInt("LOCKSTEP_CUDA_CPU_MEMORY", static_cast<long long>(2 * kGiB), 1LL << 46));
  return cap;
}

void SetThreadDevice(int device) { current_device = device; }

}  // namespace internal

int CurrentDevice() { return internal::current_device; }

}  // namespace lockstep::cuda_cpu

namespace cc = lockstep::cuda_cpu;
namespace ci = lockstep::cuda_cpu::internal;

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return ci::Ret(cudaErrorInvalidValue);
  *count = ci::DeviceCount();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= ci::DeviceCount()) return ci::Ret(cudaErrorInvalidDevice);
  ci::SetThreadDevice(device);
  return ci::CheckSticky();
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return ci::Ret(cudaErrorInvalidValue);
  *device = cc::CurrentDevice();
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (prop == nullptr) return ci::Ret(cudaErrorInvalidValue);
  if (device < 0 || device >= ci::DeviceCount()) return ci::Ret(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof(prop->name), "CPU execution layer (as an H200)");
  prop->totalGlobalMem = ci::MemoryCap();
  prop->sharedMemPerBlock = 48 * 1024;
  prop->sharedMemPerBlockOptin = 232448;
  prop->sharedMemPerMultiprocessor = 233472;
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = 1024;
  prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 2147483647;
  prop->maxGridSize[1] = 65535;
  prop->maxGridSize[2] = 65535;
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 132;
  prop->canMapHostMemory = 1;
  prop->memoryBusWidth = 6144;
  prop->l2CacheSize = 50 * 1024 * 1024;
  prop->unifiedAddressing = 1;
  prop->maxThreadsPerMultiProcessor = 2048;
  return ci::CheckSticky();
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (value == nullptr) return ci::Ret(cudaErrorInvalidValue);
  cudaDeviceProp prop;
  const cudaError_t got = cudaGetDeviceProperties(&prop, device);
  if (got != cudaSuccess) return got;
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock:
      *value = prop.maxThreadsPerBlock;
      break;
    case cudaDevAttrMaxBlockDimX:
    case cudaDevAttrMaxBlockDimY:
    case cudaDevAttrMaxBlockDimZ:
      *value = prop.maxThreadsDim[attr - cudaDevAttrMaxBlockDimX];
      break;
    case cudaDevAttrMaxGridDimX:
    case cudaDevAttrMaxGridDimY:
    case cudaDevAttrMaxGridDimZ:
      *value = prop.maxGridSize[attr - cudaDevAttrMaxGridDimX];
      break;
    case cudaDevAttrMaxSharedMemoryPerBlock:
      *value = static_cast<int>(prop.sharedMemPerBlock);
      break;
    case cudaDevAttrWarpSize:
      *value = prop.warpSize;
      break;
    case cudaDevAttrMaxRegistersPerBlock:
      *value = prop.regsPerBlock;
      break;
    case cudaDevAttrMultiProcessorCount:
      *value = prop.multiProcessorCount;
      break;
    case cudaDevAttrCanMapHostMemory:
      *value = prop.canMapHostMemory;
      break;
    case cudaDevAttrMemoryClockRate:
      *value = 3201000;  // kHz
      break;
    case cudaDevAttrGlobalMemoryBusWidth:
      *value = prop.memoryBusWidth;
      break;
    case cudaDevAttrL2CacheSize:
      *value = prop.l2CacheSize;
      break;
    case cudaDevAttrUnifiedAddressing:
      *value = prop.unifiedAddressing;
      break;
    case cudaDevAttrComputeCapabilityMajor:
      *value = prop.major;
      break;
    case cudaDevAttrComputeCapabilityMinor:
      *value = prop.minor;
      break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = static_cast<int>(prop.sharedMemPerBlockOptin);
      break;
    default:
      return ci::Ret(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* driverVersion) {
  if (driverVersion == nullptr) return ci::Ret(cudaErrorInvalidValue);
  *driverVersion = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* runtimeVersion) {
  if (runtimeVersion == nullptr) return ci::Ret(cudaErrorInvalidValue);
  *runtimeVersion = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  if (const cudaError_t sticky = ci::CheckSticky(); sticky != cudaSuccess) return sticky;
  std::unique_lock lock(ci::Mu());
  const int device = cc::CurrentDevice();
  bool capturing = false;
  for (CUstream_st* s : ci::StreamsLocked()) {
    if (s->device == device && s->capture != nullptr) {
      ci::InvalidateLocked(*s->capture, cudaErrorStreamCaptureUnsupported);
      capturing = true;
    }
  }
  if (capturing) return ci::Ret(cudaErrorStreamCaptureUnsupported);
  ci::DrainLocked(lock, device);
  return ci::CheckSticky();
}
