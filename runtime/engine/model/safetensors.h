// Reading and writing `.safetensors` files: an 8-byte little-endian header length, a
// JSON header {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__"},
// then the tensor bytes. Files are memory-mapped read-only; every header entry is
// checked against the file size before any byte is read, so a truncated or
// inconsistent file is an error naming the file and the tensor, never a crash.
//
// A model is one `model.safetensors` or several shards listed by
// `model.safetensors.index.json` ({"weight_map": {tensor: shard file}}). Opening maps
// the files and parses their headers only; a tensor's bytes are touched when it is read,
// so a loader that reads only some tensors (an expert-parallel rank's experts) never
// reads the others' pages. The model counts what it read (ReadNames, BytesRead).
//
// F8_E4M3 tensors are read with their `<name>_scale_inv` block scales (fp8.h).
//
// Thread safety: immutable after Open except the read counters (mutex); concurrent reads
// are safe.
#ifndef LOCKSTEP_RUNTIME_ENGINE_MODEL_SAFETENSORS_H_
#define LOCKSTEP_RUNTIME_ENGINE_MODEL_SAFETENSORS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

namespace lockstep::engine {

enum class DType { kF32, kF16, kBF16, kF8E4M3 };

const char* DTypeName(DType dtype);
size_t DTypeSize(DType dtype);

// A tensor inside a mapped file (valid while its SafetensorsFile lives).
struct TensorView {
  std::string name;
  std::string file;  // path of the file holding it (for error messages)
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t bytes = 0;

  int64_t NumElements() const;
  // Converts to f32 into `out` (size NumElements()); F8_E4M3 codes without their scale.
  void ToFloat(absl::Span<float> out) const;
};

// One memory-mapped file. Move-only.
class SafetensorsFile {
 public:
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const TensorView* Find(const std::string& name) const;
  std::vector<std::string> Names() const;

 private:
  SafetensorsFile() = default;

  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  absl::flat_hash_map<std::string, TensorView> tensors_;
};

// All tensors of a model directory (single file or sharded).
class SafetensorsModel {
 public:
  static absl::StatusOr<std::unique_ptr<SafetensorsModel>> Open(const std::string& dir);

  // NotFound naming the tensor and the model files when absent.
  absl::StatusOr<const TensorView*> Find(const std::string& name) const;
  // Find + shape check + conversion to f32, the one way loaders read any tensor: an
  // F8_E4M3 [rows, cols] tensor is dequantized with `<name>_scale_inv` (fp8.h). Errors
  // name the file and the tensor (and the scale tensor when it is missing or misshaped).
  absl::StatusOr<std::vector<float>> ReadFloat(const std::string& name,
                                               const std::vector<int64_t>& shape) const;
  bool Contains(const std::string& name) const;

  // The tensors ReadFloat has read (sorted; scales included) and their stored bytes.
  std::vector<std::string> ReadNames() const;
  uint64_t BytesRead() const;

 private:
  absl::StatusOr<std::vector<float>> DequantizeFp8(const TensorView& view) const;
  void CountRead(const TensorView& view) const;

  std::string description_;  // for errors: the model file or index
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  absl::flat_hash_map<std::string, const TensorView*> index_;
  mutable absl::Mutex read_mu_;
  mutable absl::flat_hash_set<std::string> read_names_ ABSL_GUARDED_BY(read_mu_);
  mutable uint64_t bytes_read_ ABSL_GUARDED_BY(read_mu_) = 0;
};

// A tensor to write, given as f32 and stored as `dtype` (F8_E4M3: each value encoded
// with FloatToFp8E4m3; the writer of a scaled weight passes the values already divided
// by their block scale and writes the scale tensor itself).
struct TensorToWrite {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
  DType dtype = DType::kF32;
};

// Writes `tensors` (in name order, 8-byte-aligned header) to `path`; deterministic.
absl::Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors);

// Conversions used for storage (round to nearest even).
uint16_t FloatToBf16(float value);
uint16_t FloatToF16(float value);
float Bf16ToFloat(uint16_t bits);
float F16ToFloat(uint16_t bits);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_MODEL_SAFETENSORS_H_
