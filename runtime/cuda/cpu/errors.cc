// Errors: the calling thread's last error, each device's sticky error, and the names
// and descriptions of the codes.
#include <array>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>

#include "cuda_runtime_api.h"
#include "runtime/cuda/cpu/runtime_state.h"

namespace lockstep::cuda_cpu {
namespace internal {
namespace {

constexpr int kMaxDevices = 64;
thread_local cudaError_t last_error = cudaSuccess;
std::array<std::atomic<int>, kMaxDevices> sticky{};

}  // namespace

cudaError_t StickyError(int device) {
  if (device < 0 || device >= kMaxDevices) return cudaSuccess;
  return static_cast<cudaError_t>(sticky[device].load(std::memory_order_acquire));
}

cudaError_t Ret(cudaError_t error) {
  if (error != cudaSuccess) last_error = error;
  return error;
}

cudaError_t CheckSticky() { return Ret(StickyError(CurrentDevice())); }

void SetStickyErrorOn(int device, cudaError_t error, const std::string& message) {
  if (error == cudaSuccess || device < 0 || device >= kMaxDevices) return;
  int expected = cudaSuccess;
  if (sticky[device].compare_exchange_strong(expected, error, std::memory_order_acq_rel)) {
    std::fprintf(stderr, "cuda_cpu: device %d: %s: %s (every later call returns it)\n", device,
                 cudaGetErrorName(error), message.c_str());
  }
}

void ClearStickyErrors() {
  for (auto& s : sticky) s.store(cudaSuccess, std::memory_order_release);
}

}  // namespace internal

void SetStickyError(cudaError_t error, std::string message) {
  internal::SetStickyErrorOn(CurrentDevice(), error, message);
}

void SetLastError(cudaError_t error) { internal::Ret(error); }

}  // namespace lockstep::cuda_cpu

using lockstep::cuda_cpu::CurrentDevice;
using lockstep::cuda_cpu::internal::last_error;
using lockstep::cuda_cpu::internal::StickyError;

cudaError_t cudaGetLastError() {
  const cudaError_t sticky = StickyError(CurrentDevice());
  if (sticky != cudaSuccess) return sticky;
  const cudaError_t error = last_error;
  last_error = cudaSuccess;
  return error;
}

cudaError_t cudaPeekAtLastError() {
  const cudaError_t sticky = StickyError(CurrentDevice());
  return sticky != cudaSuccess ? sticky : last_error;
}

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError:
      return "cudaErrorInitializationError";
    case cudaErrorCudartUnloading:
      return "cudaErrorCudartUnloading";
    case cudaErrorProfilerDisabled:
      return "cudaErrorProfilerDisabled";
    case cudaErrorProfilerNotInitialized:
      return "cudaErrorProfilerNotInitialized";
    case cudaErrorProfilerAlreadyStarted:
      return "cudaErrorProfilerAlreadyStarted";
    case cudaErrorProfilerAlreadyStopped:
      return "cudaErrorProfilerAlreadyStopped";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidPitchValue:
      return "cudaErrorInvalidPitchValue";
    case cudaErrorInvalidSymbol:
      return "cudaErrorInvalidSymbol";
    case cudaErrorInvalidHostPointer:
      return "cudaErrorInvalidHostPointer";
    case cudaErrorInvalidDevicePointer:
      return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidTexture:
      return "cudaErrorInvalidTexture";
    case cudaErrorInvalidTextureBinding:
      return "cudaErrorInvalidTextureBinding";
    case cudaErrorInvalidChannelDescriptor:
      return "cudaErrorInvalidChannelDescriptor";
    case cudaErrorInvalidMemcpyDirection:
      return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorAddressOfConstant:
      return "cudaErrorAddressOfConstant";
    case cudaErrorTextureFetchFailed:
      return "cudaErrorTextureFetchFailed";
    case cudaErrorTextureNotBound:
      return "cudaErrorTextureNotBound";
    case cudaErrorSynchronizationError:
      return "cudaErrorSynchronizationError";
    case cudaErrorInvalidFilterSetting:
      return "cudaErrorInvalidFilterSetting";
    case cudaErrorInvalidNormSetting:
      return "cudaErrorInvalidNormSetting";
    case cudaErrorMixedDeviceExecution:
      return "cudaErrorMixedDeviceExecution";
    case cudaErrorNotYetImplemented:
      return "cudaErrorNotYetImplemented";
    case cudaErrorMemoryValueTooLarge:
      return "cudaErrorMemoryValueTooLarge";
    case cudaErrorStubLibrary:
      return "cudaErrorStubLibrary";
    case cudaErrorInsufficientDriver:
      return "cudaErrorInsufficientDriver";
    case cudaErrorCallRequiresNewerDriver:
      return "cudaErrorCallRequiresNewerDriver";
    case cudaErrorInvalidSurface:
      return "cudaErrorInvalidSurface";
    case cudaErrorDuplicateVariableName:
      return "cudaErrorDuplicateVariableName";
    case cudaErrorDuplicateTextureName:
      return "cudaErrorDuplicateTextureName";
    case cudaErrorDuplicateSurfaceName:
      return "cudaErrorDuplicateSurfaceName";
    case cudaErrorDevicesUnavailable:
      return "cudaErrorDevicesUnavailable";
    case cudaErrorIncompatibleDriverContext:
      return "cudaErrorIncompatibleDriverContext";
    case cudaErrorMissingConfiguration:
      return "cudaErrorMissingConfiguration";
    case cudaErrorPriorLaunchFailure:
      return "cudaErrorPriorLaunchFailure";
    case cudaErrorLaunchMaxDepthExceeded:
      return "cudaErrorLaunchMaxDepthExceeded";
    case cudaErrorLaunchFileScopedTex:
      return "cudaErrorLaunchFileScopedTex";
    case cudaErrorLaunchFileScopedSurf:
      return "cudaErrorLaunchFileScopedSurf";
    case cudaErrorSyncDepthExceeded:
      return "cudaErrorSyncDepthExceeded";
    case cudaErrorLaunchPendingCountExceeded:
      return "cudaErrorLaunchPendingCountExceeded";
    case cudaErrorInvalidDeviceFunction:
      return "cudaErrorInvalidDeviceFunction";
    case cudaErrorNoDevice:
      return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorDeviceNotLicensed:
      return "cudaErrorDeviceNotLicensed";
    case cudaErrorSoftwareValidityNotEstablished:
      return "cudaErrorSoftwareValidityNotEstablished";
    case cudaErrorStartupFailure:
      return "cudaErrorStartupFailure";
    case cudaErrorInvalidKernelImage:
      return "cudaErrorInvalidKernelImage";
    case cudaErrorDeviceUninitialized:
      return "cudaErrorDeviceUninitialized";
    case cudaErrorMapBufferObjectFailed:
      return "cudaErrorMapBufferObjectFailed";
    case cudaErrorUnmapBufferObjectFailed:
      return "cudaErrorUnmapBufferObjectFailed";
    case cudaErrorArrayIsMapped:
      return "cudaErrorArrayIsMapped";
    case cudaErrorAlreadyMapped:
      return "cudaErrorAlreadyMapped";
    case cudaErrorNoKernelImageForDevice:
      return "cudaErrorNoKernelImageForDevice";
    case cudaErrorAlreadyAcquired:
      return "cudaErrorAlreadyAcquired";
    case cudaErrorNotMapped:
      return "cudaErrorNotMapped";
    case cudaErrorNotMappedAsArray:
      return "cudaErrorNotMappedAsArray";
    case cudaErrorNotMappedAsPointer:
      return "cudaErrorNotMappedAsPointer";
    case cudaErrorECCUncorrectable:
      return "cudaErrorECCUncorrectable";
    case cudaErrorUnsupportedLimit:
      return "cudaErrorUnsupportedLimit";
    case cudaErrorDeviceAlreadyInUse:
      return "cudaErrorDeviceAlreadyInUse";
    case cudaErrorPeerAccessUnsupported:
      return "cudaErrorPeerAccessUnsupported";
    case cudaErrorInvalidPtx:
      return "cudaErrorInvalidPtx";
    case cudaErrorInvalidGraphicsContext:
      return "cudaErrorInvalidGraphicsContext";
    case cudaErrorNvlinkUncorrectable:
      return "cudaErrorNvlinkUncorrectable";
    case cudaErrorJitCompilerNotFound:
      return "cudaErrorJitCompilerNotFound";
    case cudaErrorUnsupportedPtxVersion:
      return "cudaErrorUnsupportedPtxVersion";
    case cudaErrorJitCompilationDisabled:
      return "cudaErrorJitCompilationDisabled";
    case cudaErrorUnsupportedExecAffinity:
      return "cudaErrorUnsupportedExecAffinity";
    case cudaErrorUnsupportedDevSideSync:
      return "cudaErrorUnsupportedDevSideSync";
    case cudaErrorContained:
      return "cudaErrorContained";
    case cudaErrorInvalidSource:
      return "cudaErrorInvalidSource";
    case cudaErrorFileNotFound:
      return "cudaErrorFileNotFound";
    case cudaErrorSharedObjectSymbolNotFound:
      return "cudaErrorSharedObjectSymbolNotFound";
    case cudaErrorSharedObjectInitFailed:
      return "cudaErrorSharedObjectInitFailed";
    case cudaErrorOperatingSystem:
      return "cudaErrorOperatingSystem";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorIllegalState:
      return "cudaErrorIllegalState";
    case cudaErrorLossyQuery:
      return "cudaErrorLossyQuery";
    case cudaErrorSymbolNotFound:
      return "cudaErrorSymbolNotFound";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorIllegalAddress:
      return "cudaErrorIllegalAddress";
    case cudaErrorLaunchOutOfResources:
      return "cudaErrorLaunchOutOfResources";
    case cudaErrorLaunchTimeout:
      return "cudaErrorLaunchTimeout";
    case cudaErrorLaunchIncompatibleTexturing:
      return "cudaErrorLaunchIncompatibleTexturing";
    case cudaErrorPeerAccessAlreadyEnabled:
      return "cudaErrorPeerAccessAlreadyEnabled";
    case cudaErrorPeerAccessNotEnabled:
      return "cudaErrorPeerAccessNotEnabled";
    case cudaErrorSetOnActiveProcess:
      return "cudaErrorSetOnActiveProcess";
    case cudaErrorContextIsDestroyed:
      return "cudaErrorContextIsDestroyed";
    case cudaErrorAssert:
      return "cudaErrorAssert";
    case cudaErrorTooManyPeers:
      return "cudaErrorTooManyPeers";
    case cudaErrorHostMemoryAlreadyRegistered:
      return "cudaErrorHostMemoryAlreadyRegistered";
    case cudaErrorHostMemoryNotRegistered:
      return "cudaErrorHostMemoryNotRegistered";
    case cudaErrorHardwareStackError:
      return "cudaErrorHardwareStackError";
    case cudaErrorIllegalInstruction:
      return "cudaErrorIllegalInstruction";
    case cudaErrorMisalignedAddress:
      return "cudaErrorMisalignedAddress";
    case cudaErrorInvalidAddressSpace:
      return "cudaErrorInvalidAddressSpace";
    case cudaErrorInvalidPc:
      return "cudaErrorInvalidPc";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
    case cudaErrorCooperativeLaunchTooLarge:
      return "cudaErrorCooperativeLaunchTooLarge";
    case cudaErrorTensorMemoryLeak:
      return "cudaErrorTensorMemoryLeak";
    case cudaErrorNotPermitted:
      return "cudaErrorNotPermitted";
    case cudaErrorNotSupported:
      return "cudaErrorNotSupported";
    case cudaErrorSystemNotReady:
      return "cudaErrorSystemNotReady";
    case cudaErrorSystemDriverMismatch:
      return "cudaErrorSystemDriverMismatch";
    case cudaErrorCompatNotSupportedOnDevice:
      return "cudaErrorCompatNotSupportedOnDevice";
    case cudaErrorMpsConnectionFailed:
      return "cudaErrorMpsConnectionFailed";
    case cudaErrorMpsRpcFailure:
      return "cudaErrorMpsRpcFailure";
    case cudaErrorMpsServerNotReady:
      return "cudaErrorMpsServerNotReady";
    case cudaErrorMpsMaxClientsReached:
      return "cudaErrorMpsMaxClientsReached";
    case cudaErrorMpsMaxConnectionsReached:
      return "cudaErrorMpsMaxConnectionsReached";
    case cudaErrorMpsClientTerminated:
      return "cudaErrorMpsClientTerminated";
    case cudaErrorCdpNotSupported:
      return "cudaErrorCdpNotSupported";
    case cudaErrorCdpVersionMismatch:
      return "cudaErrorCdpVersionMismatch";
    case cudaErrorStreamCaptureUnsupported:
      return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated:
      return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureMerge:
      return "cudaErrorStreamCaptureMerge";
    case cudaErrorStreamCaptureUnmatched:
      return "cudaErrorStreamCaptureUnmatched";
    case cudaErrorStreamCaptureUnjoined:
      return "cudaErrorStreamCaptureUnjoined";
    case cudaErrorStreamCaptureIsolation:
      return "cudaErrorStreamCaptureIsolation";
    case cudaErrorStreamCaptureImplicit:
      return "cudaErrorStreamCaptureImplicit";
    case cudaErrorCapturedEvent:
      return "cudaErrorCapturedEvent";
    case cudaErrorStreamCaptureWrongThread:
      return "cudaErrorStreamCaptureWrongThread";
    case cudaErrorTimeout:
      return "cudaErrorTimeout";
    case cudaErrorGraphExecUpdateFailure:
      return "cudaErrorGraphExecUpdateFailure";
    case cudaErrorExternalDevice:
      return "cudaErrorExternalDevice";
    case cudaErrorInvalidClusterSize:
      return "cudaErrorInvalidClusterSize";
    case cudaErrorFunctionNotLoaded:
      return "cudaErrorFunctionNotLoaded";
    case cudaErrorInvalidResourceType:
      return "cudaErrorInvalidResourceType";
    case cudaErrorInvalidResourceConfiguration:
      return "cudaErrorInvalidResourceConfiguration";
    case cudaErrorUnknown:
      return "cudaErrorUnknown";
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorInvalidPitchValue:
      return "invalid pitch argument";
    case cudaErrorInvalidDevicePointer:
      return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection:
      return "invalid copy direction for memcpy";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorIllegalState:
      return "the operation cannot be performed in the present state";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorIllegalAddress:
      return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources:
      return "too many resources requested for launch";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure";
    case cudaErrorAssert:
      return "device-side assert triggered";
    case cudaErrorNotSupported:
      return "operation not supported";
    case cudaErrorStreamCaptureUnsupported:
      return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated:
      return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureUnmatched:
      return "capture was not initiated in this stream";
    case cudaErrorStreamCaptureIsolation:
      return "dependency created on uncaptured work in another stream";
    case cudaErrorStreamCaptureImplicit:
      return "operation would make the legacy stream depend on a capturing blocking stream";
    case cudaErrorCapturedEvent:
      return "operation not permitted on an event last recorded in a capturing stream";
    case cudaErrorStreamCaptureWrongThread:
      return "attempt to terminate a thread-local capture sequence from another thread";
    default:
      return cudaGetErrorName(error);
  }
}
