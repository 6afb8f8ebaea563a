// Kernel launches on the CPU execution layer: the call that
// runtime/cuda/kernels/launch.h's LOCKSTEP_LAUNCH expands to outside nvcc,
//
//   ::lockstep::cuda_cpu::Launch(kernel, "Kernel<T>", grid, block, shared_bytes, stream)(args...);
//
// (grid and block: dim3 or an integer; shared_bytes: size_t; returns nothing, like
// <<<>>>), its dynamic shared memory (LOCKSTEP_EXTERN_SHARED:
// `type* const name = ::lockstep::cuda_cpu::DynamicShared<type>()`), and
// cudaFuncSetAttribute.
//
// Launch validates as the driver does: block dimensions >= 1, <= (1024, 1024, 64) and
// <= 1024 threads, grid dimensions >= 1, <= (2^31 - 1, 65535, 65535)
// (cudaErrorInvalidConfiguration); dynamic shared memory <= 48 KiB, or up to what
// cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize) allowed for
// that kernel (cudaErrorInvalidValue). A bad launch sets the calling thread's last error
// (SetLastError, not sticky) and runs nothing. Otherwise the arguments are converted to
// the kernel's parameter types and copied now (as the GPU does; a graph being captured
// keeps them), and the grid runs in the stream's order (Enqueue, stream_ops.h) on the
// block executor (block_executor.h); a fault inside it is the device's sticky error.
//
// Thread safety: any thread may launch; cudaFuncSetAttribute takes a lock.
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_LAUNCH_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_LAUNCH_H_

#include <cstddef>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "driver_types.h"
#include "runtime/cuda/cpu/kernel/block_executor.h"
#include "vector_types.h"

namespace lockstep::cuda_cpu {

inline constexpr size_t kDefaultMaxDynamicShared = 48 * 1024;
inline constexpr size_t kOptInMaxDynamicShared = 232448;  // 227 KiB (H200)

// cudaSuccess, or the launch configuration error of `kernel_id`'s launch with these
// dimensions and `dynamic_shared_bytes` (message: why, for the report).
cudaError_t ValidateLaunch(const void* kernel_id, dim3 grid, dim3 block,
                           size_t dynamic_shared_bytes, std::string* message);

// Validates, records a bad configuration (SetLastError) or enqueues `spec` on
// `stream`; `state` keeps spec.context alive until the grid ran (or its graph is gone).
void SubmitLaunch(const void* kernel_id, std::shared_ptr<const void> state,
                  const kernel::GridSpec* spec, cudaStream_t stream);

template <typename... Params>
class KernelLaunch {
 public:
  KernelLaunch(void (*kernel)(Params...), const char* name, dim3 grid, dim3 block,
               size_t shared_bytes, cudaStream_t stream)
      : kernel_(kernel),
        name_(name),
        grid_(grid),
        block_(block),
        shared_bytes_(shared_bytes),
        stream_(stream) {}

  template <typename... Args>
  void operator()(Args&&... args) const {
    static_assert(sizeof...(Args) == sizeof...(Params), "a kernel launch with the wrong arity");
    auto state = std::make_shared<State>(kernel_, std::forward<Args>(args)...);
    state->spec.kernel_name = name_;
    state->spec.grid = grid_;
    state->spec.block = block_;
    state->spec.dynamic_shared_bytes = shared_bytes_;
    state->spec.body = &Body;
    state->spec.context = state.get();
    const kernel::GridSpec* spec = &state->spec;
    SubmitLaunch(reinterpret_cast<const void*>(kernel_), std::move(state), spec, stream_);
  }

 private:
  struct State {
    template <typename... Args>
    explicit State(void (*k)(Params...), Args&&... args)
        : kernel(k), params(std::forward<Args>(args)...) {}
    void (*kernel)(Params...);
    std::tuple<std::decay_t<Params>...> params;
    kernel::GridSpec spec;
  };

  static void Body(const void* context) {
    const State& state = *static_cast<const State*>(context);
    std::apply(state.kernel, state.params);
  }

  void (*kernel_)(Params...);
  const char* name_;
  dim3 grid_;
  dim3 block_;
  size_t shared_bytes_;
  cudaStream_t stream_;
};

template <typename... Params>
KernelLaunch<Params...> Launch(void (*kernel)(Params...), const char* name, dim3 grid, dim3 block,
                               size_t shared_bytes, cudaStream_t stream) {
  return KernelLaunch<Params...>(kernel, name, grid, block, shared_bytes, stream);
}

// The running block's dynamic shared memory (poisoned with 0xFF bytes at block start).
template <typename T>
T* DynamicShared() {
  return static_cast<T*>(kernel::DynamicShared());
}

}  // namespace lockstep::cuda_cpu

// The kernel attributes a .cu file sets (cudaFuncAttributeMaxDynamicSharedMemorySize:
// 0..232448 bytes; cudaFuncAttributePreferredSharedMemoryCarveout: -1..100, kept
// without effect). cudaErrorInvalidDeviceFunction for a null kernel,
// cudaErrorInvalidValue for another attribute or a value out of range.
cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value);
template <typename T>
cudaError_t cudaFuncSetAttribute(T* entry, cudaFuncAttribute attr, int value) {
  return cudaFuncSetAttribute(reinterpret_cast<const void*>(entry), attr, value);
}

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_LAUNCH_H_
