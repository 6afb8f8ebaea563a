// A minimal device kernel, used to prove that nvcc output links and (on a GPU) runs.
#ifndef LOCKSTEP_RUNTIME_CUDA_VECTOR_ADD_H_
#define LOCKSTEP_RUNTIME_CUDA_VECTOR_ADD_H_

namespace lockstep::cuda {

// out[i] = a[i] + b[i] for i < n, computed on device 0. Host pointers in and out.
// Returns the cudaError_t value (0 on success).
int VectorAdd(const float* a, const float* b, float* out, int n);

}  // namespace lockstep::cuda

#endif  // LOCKSTEP_RUNTIME_CUDA_VECTOR_ADD_H_
