#include "runtime/cuda/kernels/kernel_ops.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "runtime/cuda/cuda_status.h"
#include "runtime/cuda/kernels/kv_write_kernel.h"
#include "runtime/cuda/kernels/moe_kernels.h"

namespace lockstep::cuda::kernels {

absl::Status CheckAttentionShape(const PagedKvDesc& kv, int num_heads, bool decode) {
  const int max_head_dim = decode ? kMaxDecodeHeadDim : kMaxPrefillHeadDim;
  if (kv.head_dim < 1 || kv.head_dim > max_head_dim) {
    return absl::InvalidArgumentError(
        absl::StrCat("head_dim ", kv.head_dim, " is not in [1, ", max_head_dim, "]"));
  }
  if (kv.num_kv_heads < 1 || num_heads < 1 || num_heads % kv.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        num_heads, " query heads are not a positive multiple of ", kv.num_kv_heads, " KV heads"));
  }
  if (decode && num_heads / kv.num_kv_heads > kMaxDecodeGroup) {
    return absl::InvalidArgumentError(
        absl::StrCat("GQA group ", num_heads / kv.num_kv_heads, " exceeds ", kMaxDecodeGroup));
  }
  if (kv.element_bytes != 2 && kv.element_bytes != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV elements of ", kv.element_bytes, " bytes (bf16: 2, f32: 4)"));
  }
  if (reinterpret_cast<uintptr_t>(kv.storage) % 16 != 0) {
    return absl::InvalidArgumentError("the KV storage is not 16-byte aligned");
  }
  if (kv.tokens_per_block < 1 || kv.num_layers < 1 || kv.table_stride < 0) {
    return absl::InvalidArgumentError(absl::StrCat("tokens_per_block ", kv.tokens_per_block,
                                                   ", num_layers ", kv.num_layers,
                                                   ", table_stride ", kv.table_stride));
  }
  return absl::OkStatus();
}

absl::Status DecodeAttention(const DecodeAttentionArgs& args, cudaStream_t stream) {
  if (absl::Status s = CheckAttentionShape(args.kv, args.num_heads, true); !s.ok()) return s;
  if (args.layer < 0 || args.layer >= args.kv.num_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer ", args.layer, " of ", args.kv.num_layers));
  }
  return CudaStatus(LaunchDecodeAttention(args, stream), "decode attention launch");
}

absl::Status PrefillAttention(const PrefillAttentionArgs& args, cudaStream_t stream) {
  if (absl::Status s = CheckAttentionShape(args.kv, args.num_heads, false); !s.ok()) return s;
  if (args.layer < 0 || args.layer >= args.kv.num_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer ", args.layer, " of ", args.kv.num_layers));
  }
  return CudaStatus(LaunchPrefillAttention(args, stream), "prefill attention launch");
}

namespace {

template <typename T>
absl::Status WriteKvRows(const PagedKvDesc& kv, int layer, const T* k, const T* v,
                         int64_t row_stride, const int32_t* seqs, const int32_t* positions,
                         int tokens, cudaStream_t stream) {
  if (layer < 0 || layer >= kv.num_layers) {
    return absl::InvalidArgumentError(absl::StrCat("layer ", layer, " of ", kv.num_layers));
  }
  if (row_stride < static_cast<int64_t>(kv.num_kv_heads) * kv.head_dim) {
    return absl::InvalidArgumentError(
        absl::StrCat("row stride ", row_stride, " < ", kv.num_kv_heads, " x ", kv.head_dim));
  }
  if (kv.element_bytes != static_cast<int32_t>(sizeof(T))) {
    return absl::InvalidArgumentError(absl::StrCat("K/V rows of ", sizeof(T),
                                                   "-byte elements into a pool of ",
                                                   kv.element_bytes, "-byte elements"));
  }
  return CudaStatus(LaunchWriteKv(kv, layer, k, v, row_stride, seqs, positions, tokens, stream),
                    "KV write launch");
}

}  // namespace

absl::Status WriteKv(const PagedKvDesc& kv, int layer, const Bf16* k, const Bf16* v,
                     int64_t row_stride, const int32_t* seqs, const int32_t* positions, int tokens,
                     cudaStream_t stream) {
  return WriteKvRows(kv, layer, k, v, row_stride, seqs, positions, tokens, stream);
}

absl::Status WriteKv(const PagedKvDesc& kv, int layer, const float* k, const float* v,
                     int64_t row_stride, const int32_t* seqs, const int32_t* positions, int tokens,
                     cudaStream_t stream) {
  return WriteKvRows(kv, layer, k, v, row_stride, seqs, positions, tokens, stream);
}

absl::Status MoeRoute(const float* logits, int rows, int num_experts, int k, bool renormalize,
                      int32_t* experts, float* weights, cudaStream_t stream) {
  if (num_experts < 1 || num_experts > kMaxMoeExperts || k < 1 || k > kMaxMoeTopK ||
      k > num_experts) {
    return absl::InvalidArgumentError(absl::StrCat("top-", k, " of ", num_experts,
                                                   " experts (limits: ", kMaxMoeExperts,
                                                   " experts, top-", kMaxMoeTopK, ")"));
  }
  return CudaStatus(
      LaunchMoeRoute(logits, rows, num_experts, k, renormalize, experts, weights, stream),
      "MoE route launch");
}

}  // namespace lockstep::cuda::kernels
