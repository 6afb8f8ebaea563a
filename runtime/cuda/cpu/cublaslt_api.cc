// The cuBLASLt and cuBLAS entry points of the CPU execution layer (<cublasLt.h>,
// <cublas_api.h>): handles and descriptors over cublaslt_descriptors.h, the heuristic
// of cublaslt_heuristic.h, and cublasLtMatmul, which checks the call at once (as the
// real library does before it launches) and puts the product on the stream through
// Enqueue (stream_ops.h). On the stream it checks that every operand lies inside a live
// allocation (else cudaErrorIllegalAddress, sticky, naming the operand) and computes
// with cublaslt_product.h: split-K partials go to the caller's workspace and are added
// in split order. A strided batch runs its products one after another, in batch order.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cublasLt.h"
#include "cublas_api.h"
#include "runtime/cuda/cpu/cublaslt_descriptors.h"
#include "runtime/cuda/cpu/cublaslt_faults.h"
#include "runtime/cuda/cpu/cublaslt_heuristic.h"
#include "runtime/cuda/cpu/cublaslt_product.h"
#include "runtime/cuda/cpu/stream_ops.h"

struct cublasLtContext {
  uint32_t magic = 0x4c48444c;  // "LHDL"
};

namespace lockstep::cuda_cpu::cublaslt {
namespace {

constexpr uint32_t kHandleMagic = 0x4c48444c;
constexpr int kCudartVersion = 13000;
// The workspace holds fp32 partials.
constexpr uintptr_t kWorkspaceAlignment = 16;

bool LiveHandle(cublasLtHandle_t handle) {
  return handle != nullptr && handle->magic == kHandleMagic;
}

template <typename State, typename Opaque>
bool Live(const Opaque* opaque, uint32_t magic, State* state) {
  if (opaque == nullptr) return false;
  *state = LoadState<State>(*opaque);
  return state->magic == magic;
}

// Says why a call was refused (the status alone rarely tells).
cublasStatus_t Refuse(const char* call, cublasStatus_t status, const std::string& why) {
  std::fprintf(stderr, "cublasLt (CPU execution layer): %s: %s: %s\n", call,
               cublasLtGetStatusName(status), why.c_str());
  return status;
}

// Bytes from the first to past the last element of a batch of rows x cols column-major
// matrices `stride` elements apart.
size_t Extent(int64_t rows, int64_t cols, int64_t ld, ElementType type, int64_t batch,
              int64_t stride) {
  return static_cast<size_t>((batch - 1) * stride + (cols - 1) * ld + rows) * ElementBytes(type);
}

// `p` advanced by `elements` of `type`.
template <typename Pointer>
Pointer Advance(Pointer p, int64_t elements, ElementType type) {
  if (p == nullptr) return p;
  using Byte =
      std::conditional_t<std::is_const_v<std::remove_pointer_t<Pointer>>, const char, char>;
  return reinterpret_cast<Pointer>(reinterpret_cast<Byte*>(p) + elements * ElementBytes(type));
}

// Whether [p, p + bytes) lies in one live allocation; else why not.
bool InsideAllocation(const void* p, size_t bytes, const char* operand, std::string* why) {
  const std::optional<Allocation> a = FindAllocation(p);
  const auto begin = reinterpret_cast<uintptr_t>(p);
  if (!a.has_value()) {
    *why = absl::StrFormat("operand %s at %#x is in no live allocation", operand, begin);
    return false;
  }
  const auto base = reinterpret_cast<uintptr_t>(a->base);
  if (begin + bytes > base + a->bytes) {
    *why = absl::StrFormat(
        "operand %s [%#x, +%u bytes) runs %u bytes past its allocation [%#x, +%u bytes)", operand,
        begin, bytes, begin + bytes - base - a->bytes, base, a->bytes);
    return false;
  }
  return true;
}

// One enqueued product, with everything it reads when it runs.
struct Launch {
  Problem p;
  uint32_t splitk = 1;
  bool m_dependent = false;
  float alpha = 1, beta = 0;
  const void* a = nullptr;
  const void* b = nullptr;
  const void* c = nullptr;
  void* d = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

// One product of the batch: operands at their batch's offsets.
void RunOne(const Launch& l, int64_t batch);

cudaError_t Run(const Launch& l) {
  const Problem& p = l.p;
  std::string why;
  if (!InsideAllocation(l.a, Extent(p.a_rows, p.a_cols, p.lda, p.in, p.batch, p.stride_a), "A",
                        &why) ||
      !InsideAllocation(l.b, Extent(p.b_rows, p.b_cols, p.ldb, p.in, p.batch, p.stride_b), "B",
                        &why) ||
      (l.beta != 0 &&
       !InsideAllocation(l.c, Extent(p.m, p.n, p.ldc, p.out, p.batch, p.stride_c), "C", &why)) ||
      !InsideAllocation(l.d, Extent(p.m, p.n, p.ldd, p.out, p.batch, p.stride_d), "D", &why) ||
      (l.workspace_bytes > 0 &&
       !InsideAllocation(l.workspace, l.workspace_bytes, "workspace", &why))) {
    SetStickyError(cudaErrorIllegalAddress,
                   absl::StrCat("cublasLtMatmul m=", p.m, " n=", p.n, " k=", p.k, " batch ",
                                p.batch, ": ", why));
    return cudaErrorIllegalAddress;
  }
  // The batch's products one after another (each reuses the workspace).
  for (int64_t batch = 0; batch < p.batch; ++batch) RunOne(l, batch);
  return cudaSuccess;
}

void RunOne(const Launch& l, int64_t batch) {
  const Problem& p = l.p;
  const MatrixOperand a{Advance(l.a, batch * p.stride_a, p.in), p.in, p.lda, p.transa};
  const MatrixOperand b{Advance(l.b, batch * p.stride_b, p.in), p.in, p.ldb, p.transb};
  const MatrixOperand c{Advance(l.c, batch * p.stride_c, p.out), p.out, p.ldc, false};
  const OutputMatrix d{Advance(l.d, batch * p.stride_d, p.out), p.out, p.ldd};
  const int64_t mn = p.m * p.n;
  if (l.m_dependent && p.n > 1) {
    // k's halves apart, then added: other bits than the single chain of n == 1.
    std::vector<float> halves(static_cast<size_t>(2 * mn), 0.0f);
    AccumulateProduct(a, b, p.m, p.n, 0, p.k / 2, halves.data());
    AccumulateProduct(a, b, p.m, p.n, p.k / 2, p.k, halves.data() + mn);
    WriteOutput(halves.data(), 2, mn, p.m, p.n, l.alpha, l.beta, c, d);
    return;
  }
  if (l.splitk <= 1) {
    std::vector<float> acc(static_cast<size_t>(mn), 0.0f);
    AccumulateProduct(a, b, p.m, p.n, 0, p.k, acc.data());
    WriteOutput(acc.data(), 1, mn, p.m, p.n, l.alpha, l.beta, c, d);
    return;
  }
  // Split t covers k in [t * chunk, (t + 1) * chunk) (the last ones may be short or empty).
  float* partials = static_cast<float*>(l.workspace);
  const int64_t splits = l.splitk;
  const int64_t chunk = (p.k + splits - 1) / splits;
  for (int64_t t = 0; t < splits; ++t) {
    float* part = partials + t * mn;
    std::fill(part, part + mn, 0.0f);
    AccumulateProduct(a, b, p.m, p.n, std::min(p.k, t * chunk), std::min(p.k, (t + 1) * chunk),
                      part);
  }
  WriteOutput(partials, static_cast<int>(splits), mn, p.m, p.n, l.alpha, l.beta, c, d);
}

const char* StatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* StatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "the library or handle is not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "a resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "an argument has an invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "the device lacks a required architectural feature";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "an access to device memory failed";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "the device program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "the requested operation is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "the requested functionality needs a license";
  }
  return "unknown cuBLAS status";
}

// Destroys a live descriptor of kind `magic`; its magic word is cleared first, so a
// use after destroy is refused rather than read.
template <typename State, typename Handle>
cublasStatus_t DestroyDescriptor(Handle handle, uint32_t magic) {
  State s;
  if (!Live(handle, magic, &s)) return CUBLAS_STATUS_INVALID_VALUE;
  handle->data[0] = 0;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

// Applies `set` (State& -> status) to a live descriptor of kind `magic`, storing the
// state back when it succeeds.
template <typename State, typename Handle, typename Set>
cublasStatus_t UpdateDescriptor(Handle handle, uint32_t magic, Set set) {
  State s;
  if (!Live(handle, magic, &s)) return CUBLAS_STATUS_INVALID_VALUE;
  const cublasStatus_t status = set(s);
  if (status == CUBLAS_STATUS_SUCCESS) StoreState(s, *handle);
  return status;
}

}  // namespace
}  // namespace lockstep::cuda_cpu::cublaslt

namespace lt = ::lockstep::cuda_cpu::cublaslt;

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t* lightHandle) {
  if (lightHandle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *lightHandle = new cublasLtContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle) {
  if (!lt::LiveHandle(lightHandle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  lightHandle->magic = 0;
  delete lightHandle;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasLtGetStatusName(cublasStatus_t status) { return lt::StatusName(status); }
const char* cublasLtGetStatusString(cublasStatus_t status) { return lt::StatusString(status); }
const char* cublasGetStatusName(cublasStatus_t status) { return lt::StatusName(status); }
const char* cublasGetStatusString(cublasStatus_t status) { return lt::StatusString(status); }

size_t cublasLtGetVersion(void) { return CUBLAS_VERSION; }
size_t cublasLtGetCudartVersion(void) { return lt::kCudartVersion; }
size_t cublasGetCudartVersion(void) { return lt::kCudartVersion; }

cublasStatus_t cublasLtGetProperty(libraryPropertyType type, int* value) {
  if (value == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  switch (type) {
    case MAJOR_VERSION:
      *value = CUBLAS_VER_MAJOR;
      return CUBLAS_STATUS_SUCCESS;
    case MINOR_VERSION:
      *value = CUBLAS_VER_MINOR;
      return CUBLAS_STATUS_SUCCESS;
    case PATCH_LEVEL:
      *value = CUBLAS_VER_PATCH;
      return CUBLAS_STATUS_SUCCESS;
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasGetProperty(libraryPropertyType type, int* value) {
  return cublasLtGetProperty(type, value);
}

// Layouts.

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  if (matLayout == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  lt::LayoutState s;
  s.type = static_cast<uint32_t>(type);
  s.rows = rows;
  s.cols = cols;
  s.ld = ld;
  *matLayout = new cublasLtMatrixLayoutOpaque_t;
  lt::StoreState(s, **matLayout);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
  return lt::DestroyDescriptor<lt::LayoutState>(matLayout, lt::kLayoutMagic);
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t sizeInBytes) {
  return lt::UpdateDescriptor<lt::LayoutState>(matLayout, lt::kLayoutMagic, [&](lt::LayoutState& s) {
    return lt::SetLayoutAttribute(s, attr, buf, sizeInBytes);
  });
}

cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t matLayout,
                                                cublasLtMatrixLayoutAttribute_t attr, void* buf,
                                                size_t sizeInBytes, size_t* sizeWritten) {
  lt::LayoutState s;
  if (!lt::Live(matLayout, lt::kLayoutMagic, &s)) return CUBLAS_STATUS_INVALID_VALUE;
  return lt::GetLayoutAttribute(s, attr, buf, sizeInBytes, sizeWritten);
}

// Matmul descriptors.

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc,
                                        cublasComputeType_t computeType, cudaDataType_t scaleType) {
  if (matmulDesc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  lt::DescState s;
  s.compute_type = computeType;
  s.scale_type = scaleType;
  *matmulDesc = new cublasLtMatmulDescOpaque_t;
  lt::StoreState(s, **matmulDesc);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  return lt::DestroyDescriptor<lt::DescState>(matmulDesc, lt::kDescMagic);
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                              cublasLtMatmulDescAttributes_t attr, const void* buf,
                                              size_t sizeInBytes) {
  return lt::UpdateDescriptor<lt::DescState>(matmulDesc, lt::kDescMagic, [&](lt::DescState& s) {
    return lt::SetDescAttribute(s, attr, buf, sizeInBytes);
  });
}

cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                              cublasLtMatmulDescAttributes_t attr, void* buf,
                                              size_t sizeInBytes, size_t* sizeWritten) {
  lt::DescState s;
  if (!lt::Live(matmulDesc, lt::kDescMagic, &s)) return CUBLAS_STATUS_INVALID_VALUE;
  return lt::GetDescAttribute(s, attr, buf, sizeInBytes, sizeWritten);
}

// Preferences.

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  if (pref == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *pref = new cublasLtMatmulPreferenceOpaque_t;
  lt::StoreState(lt::PrefState{}, **pref);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  return lt::DestroyDescriptor<lt::PrefState>(pref, lt::kPrefMagic);
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t sizeInBytes) {
  return lt::UpdateDescriptor<lt::PrefState>(pref, lt::kPrefMagic, [&](lt::PrefState& s) {
    return lt::SetPrefAttribute(s, attr, buf, sizeInBytes);
  });
}

cublasStatus_t cublasLtMatmulPreferenceGetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    void* buf, size_t sizeInBytes,
                                                    size_t* sizeWritten) {
  lt::PrefState s;
  if (!lt::Live(pref, lt::kPrefMagic, &s)) return CUBLAS_STATUS_INVALID_VALUE;
  return lt::GetPrefAttribute(s, attr, buf, sizeInBytes, sizeWritten);
}

// Algorithms.

cublasStatus_t cublasLtMatmulAlgoConfigSetAttribute(cublasLtMatmulAlgo_t* algo,
                                                    cublasLtMatmulAlgoConfigAttributes_t attr,
                                                    const void* buf, size_t sizeInBytes) {
  return lt::UpdateDescriptor<lt::AlgoState>(algo, lt::kAlgoMagic, [&](lt::AlgoState& s) {
    return lt::SetAlgoAttribute(s, attr, buf, sizeInBytes);
  });
}

cublasStatus_t cublasLtMatmulAlgoConfigGetAttribute(const cublasLtMatmulAlgo_t* algo,
                                                    cublasLtMatmulAlgoConfigAttributes_t attr,
                                                    void* buf, size_t sizeInBytes,
                                                    size_t* sizeWritten) {
  lt::AlgoState s;
  if (!lt::Live(algo, lt::kAlgoMagic, &s)) return CUBLAS_STATUS_INVALID_VALUE;
  return lt::GetAlgoAttribute(s, attr, buf, sizeInBytes, sizeWritten);
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int* returnAlgoCount) {
  constexpr const char* kCall = "cublasLtMatmulAlgoGetHeuristic";
  if (!lt::LiveHandle(lightHandle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (returnAlgoCount == nullptr || heuristicResultsArray == nullptr || requestedAlgoCount <= 0) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  *returnAlgoCount = 0;
  lt::DescState desc;
  lt::LayoutState a, b, c, d;
  lt::PrefState pref;
  if (!lt::Live(operationDesc, lt::kDescMagic, &desc) || !lt::Live(Adesc, lt::kLayoutMagic, &a) ||
      !lt::Live(Bdesc, lt::kLayoutMagic, &b) || !lt::Live(Cdesc, lt::kLayoutMagic, &c) ||
      !lt::Live(Ddesc, lt::kLayoutMagic, &d) || !lt::Live(preference, lt::kPrefMagic, &pref)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  lt::Problem problem;
  std::string why;
  if (const cublasStatus_t s = lt::DescribeProblem(desc, a, b, c, d, &problem, &why);
      s != CUBLAS_STATUS_SUCCESS) {
    return lt::Refuse(kCall, s, why);
  }
  if (pref.search_mode != CUBLASLT_SEARCH_BEST_FIT) {
    return lt::Refuse(kCall, CUBLAS_STATUS_NOT_SUPPORTED, "search mode other than BEST_FIT");
  }
  std::vector<lt::Candidate> found = lt::Heuristic(problem, pref, requestedAlgoCount);
  if (found.empty()) return CUBLAS_STATUS_NOT_SUPPORTED;  // as cuBLASLt: no algorithm fits
  if (lockstep::cuda_cpu::internal::NextHeuristicIsMDependent()) {
    lt::Candidate first = found.back();
    first.algo.id = lt::kMDependentAlgoId;
    first.algo.splitk = 1;
    first.algo.reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
    first.workspace = 0;
    first.algo.m_dependent = 1;
    found.insert(found.begin(), first);
    if (static_cast<int>(found.size()) > requestedAlgoCount) found.pop_back();
  }
  for (size_t i = 0; i < found.size(); ++i) {
    cublasLtMatmulHeuristicResult_t& r = heuristicResultsArray[i];
    r = {};
    lt::StoreState(found[i].algo, r.algo);
    r.workspaceSize = found[i].workspace;
    r.state = CUBLAS_STATUS_SUCCESS;
    r.wavesCount = found[i].waves;
  }
  *returnAlgoCount = static_cast<int>(found.size());
  return CUBLAS_STATUS_SUCCESS;
}

// The product.

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                              const void* alpha, const void* A, cublasLtMatrixLayout_t Adesc,
                              const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta,
                              const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo,
                              void* workspace, size_t workspaceSizeInBytes, cudaStream_t stream) {
  constexpr const char* kCall = "cublasLtMatmul";
  if (!lt::LiveHandle(lightHandle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (const cublasStatus_t fault = lockstep::cuda_cpu::internal::NextMatmulFault();
      fault != CUBLAS_STATUS_SUCCESS) {
    return fault;
  }
  lt::DescState desc;
  lt::LayoutState a, b, c, d;
  lt::AlgoState config;
  if (!lt::Live(computeDesc, lt::kDescMagic, &desc) || !lt::Live(Adesc, lt::kLayoutMagic, &a) ||
      !lt::Live(Bdesc, lt::kLayoutMagic, &b) || !lt::Live(Cdesc, lt::kLayoutMagic, &c) ||
      !lt::Live(Ddesc, lt::kLayoutMagic, &d)) {
    return lt::Refuse(kCall, CUBLAS_STATUS_INVALID_VALUE, "a descriptor is null or destroyed");
  }
  if (algo == nullptr) {
    return lt::Refuse(kCall, CUBLAS_STATUS_NOT_SUPPORTED,
                      "no algorithm (ask cublasLtMatmulAlgoGetHeuristic for one)");
  }
  if (!lt::Live(algo, lt::kAlgoMagic, &config)) {
    return lt::Refuse(kCall, CUBLAS_STATUS_INVALID_VALUE, "the algorithm is not initialized");
  }
  lt::Launch launch;
  std::string why;
  if (const cublasStatus_t s = lt::DescribeProblem(desc, a, b, c, d, &launch.p, &why);
      s != CUBLAS_STATUS_SUCCESS) {
    return lt::Refuse(kCall, s, why);
  }
  const lt::Problem& p = launch.p;
  if (config.splitk < 1 || config.splitk > static_cast<uint32_t>(lt::kMaxSplits)) {
    return lt::Refuse(kCall, CUBLAS_STATUS_INVALID_VALUE,
                      absl::StrCat("split-K ", config.splitk, " is not in [1, 16]"));
  }
  if (config.splitk > 1 && config.reduction != CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE) {
    return lt::Refuse(kCall, CUBLAS_STATUS_NOT_SUPPORTED,
                      absl::StrCat("split-K ", config.splitk, " with reduction scheme ",
                                   config.reduction, " (only COMPUTE_TYPE)"));
  }
  if (alpha == nullptr || beta == nullptr || A == nullptr || B == nullptr || D == nullptr) {
    return lt::Refuse(kCall, CUBLAS_STATUS_INVALID_VALUE, "alpha, beta, A, B or D is null");
  }
  launch.alpha = *static_cast<const float*>(alpha);
  launch.beta = *static_cast<const float*>(beta);
  if (launch.beta != 0 && C == nullptr) {
    return lt::Refuse(kCall, CUBLAS_STATUS_INVALID_VALUE, "beta != 0 and C is null");
  }
  if (C == D && (p.ldc != p.ldd || c.type != d.type || p.stride_c != p.stride_d)) {
    return lt::Refuse(kCall, CUBLAS_STATUS_INVALID_VALUE, "C is D with another layout");
  }
  const void* pointers[4] = {A, B, C, D};
  for (int op = lt::kA; op <= lt::kD; ++op) {
    const uint32_t need = config.required_alignment[op] == 0 ? 1 : config.required_alignment[op];
    if (pointers[op] != nullptr && reinterpret_cast<uintptr_t>(pointers[op]) % need != 0) {
      return lt::Refuse(kCall, CUBLAS_STATUS_NOT_SUPPORTED,
                        absl::StrFormat("operand %c at %p is not %u-byte aligned, as the "
                                        "algorithm requires (state the alignment in the "
                                        "preference's CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*)",
                                        "ABCD"[op], pointers[op], need));
    }
  }
  const size_t need = lt::WorkspaceBytes(config, p);
  if (need > workspaceSizeInBytes || (need > 0 && workspace == nullptr)) {
    return lt::Refuse(kCall, CUBLAS_STATUS_INVALID_VALUE,
                      absl::StrCat("the algorithm (split-K ", config.splitk, ") needs ", need,
                                   " bytes of workspace, given ", workspaceSizeInBytes));
  }
  if (need > 0 && reinterpret_cast<uintptr_t>(workspace) % lt::kWorkspaceAlignment != 0) {
    return lt::Refuse(kCall, CUBLAS_STATUS_NOT_SUPPORTED, "the workspace is not 16-byte aligned");
  }
  launch.splitk = config.splitk;
  launch.m_dependent = config.m_dependent != 0;
  launch.a = A;
  launch.b = B;
  launch.c = launch.beta != 0 ? C : nullptr;
  launch.d = D;
  launch.workspace = workspace;
  launch.workspace_bytes = need;
  const cudaError_t queued =
      lockstep::cuda_cpu::Enqueue(stream, "cublasLtMatmul", [launch] { return lt::Run(launch); });
  if (queued != cudaSuccess) {
    return lt::Refuse(kCall, CUBLAS_STATUS_EXECUTION_FAILED,
                      absl::StrCat("the stream refused the work: error ", queued));
  }
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
