#include "runtime/engine/model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "runtime/engine/model/file_io.h"
#include "runtime/engine/model/fp8.h"

namespace lockstep::engine {
namespace {

using Json = nlohmann::json;

bool ParseDType(const std::string& name, DType* dtype) {
  if (name == "F32")
    *dtype = DType::kF32;
  else if (name == "F16")
    *dtype = DType::kF16;
  else if (name == "BF16")
    *dtype = DType::kBF16;
  else if (name == "F8_E4M3")
    *dtype = DType::kF8E4M3;
  else
    return false;
  return true;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::Status Corrupt(const std::string& path, absl::string_view what) {
  return absl::DataLossError(absl::StrCat(path, ": ", what));
}

// Checks one header entry against the data section; fills `view`.
absl::Status ParseEntry(const std::string& path, const std::string& name, const Json& entry,
                        const uint8_t* data, size_t data_size, TensorView* view,
                        std::string* unsupported_dtype) {
  const std::string where = absl::StrCat("tensor '", name, "'");
  if (!entry.is_object()) return Corrupt(path, absl::StrCat(where, " entry is not an object"));
  auto dtype = entry.find("dtype");
  auto shape = entry.find("shape");
  auto offsets = entry.find("data_offsets");
  if (dtype == entry.end() || !dtype->is_string() || shape == entry.end() || !shape->is_array() ||
      offsets == entry.end() || !offsets->is_array() || offsets->size() != 2) {
    return Corrupt(path, absl::StrCat(where, " needs dtype, shape and data_offsets[2]"));
  }
  view->name = name;
  view->file = path;
  int64_t elements = 1;
  for (const Json& dim : *shape) {
    if (!dim.is_number_integer() || dim.get<int64_t>() < 0 ||
        dim.get<int64_t>() > (int64_t{1} << 40)) {
      return Corrupt(path, absl::StrCat(where, " has a bad shape ", shape->dump()));
    }
    view->shape.push_back(dim.get<int64_t>());
    elements *= std::max<int64_t>(1, dim.get<int64_t>());
    if (elements > (int64_t{1} << 40)) return Corrupt(path, absl::StrCat(where, " is too big"));
  }
  for (int64_t dim : view->shape) {
    if (dim == 0) elements = 0;
  }
  const Json& begin = (*offsets)[0];
  const Json& end = (*offsets)[1];
  if (!begin.is_number_unsigned() || !end.is_number_unsigned() ||
      begin.get<uint64_t>() > end.get<uint64_t>() || end.get<uint64_t>() > data_size) {
    return Corrupt(path,
                   absl::StrCat(where, " data_offsets ", offsets->dump(), " fall outside the ",
                                data_size, "-byte data section (truncated file?)"));
  }
  view->bytes = end.get<uint64_t>() - begin.get<uint64_t>();
  view->data = data + begin.get<uint64_t>();
  if (!ParseDType(dtype->get<std::string>(), &view->dtype)) {
    *unsupported_dtype = dtype->get<std::string>();
    return absl::OkStatus();
  }
  if (static_cast<uint64_t>(elements) * DTypeSize(view->dtype) != view->bytes) {
    return Corrupt(path, absl::StrCat(where, " has ", view->bytes, " bytes but shape ",
                                      ShapeString(view->shape), " of ", DTypeName(view->dtype),
                                      " needs ", elements * DTypeSize(view->dtype)));
  }
  return absl::OkStatus();
}

}  // namespace

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
    case DType::kF8E4M3:
      return "F8_E4M3";
  }
  return "?";
}

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kF8E4M3:
      return 1;
  }
  return 0;
}

float Bf16ToFloat(uint16_t bits) {
  const uint32_t word = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &word, 4);
  return value;
}

uint16_t FloatToBf16(float value) {
  uint32_t word;
  std::memcpy(&word, &value, 4);
  if ((word & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((word >> 16) | 0x40);
  word += 0x7fffu + ((word >> 16) & 1u);
  return static_cast<uint16_t>(word >> 16);
}

float F16ToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  uint32_t word;
  if (exponent == 0x1f) {
    word = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent == 0) {
    if (mantissa == 0) {
      word = sign;
    } else {  // subnormal: normalise
      int shift = 0;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        ++shift;
      }
      mantissa &= 0x3ffu;
      word = sign | static_cast<uint32_t>(127 - 15 - shift + 1) << 23 | (mantissa << 13);
    }
  } else {
    word = sign | (exponent + 127 - 15) << 23 | (mantissa << 13);
  }
  float value;
  std::memcpy(&value, &word, 4);
  return value;
}

uint16_t FloatToF16(float value) {
  uint32_t word;
  std::memcpy(&word, &value, 4);
  const uint16_t sign = static_cast<uint16_t>((word >> 16) & 0x8000u);
  const uint32_t abs = word & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;              // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;             // overflow (and inf)
  if (abs < 0x38800000u) {                                   // subnormal or zero in f16
    const float magnitude = std::fabs(value) * 16777216.0f;  // 2^24
    return sign | static_cast<uint16_t>(std::nearbyint(magnitude));
  }
  const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return sign | static_cast<uint16_t>((rounded - (112u << 23)) >> 13);
}

int64_t TensorView::NumElements() const {
  int64_t n = 1;
  for (int64_t dim : shape) n *= dim;
  return n;
}

void TensorView::ToFloat(absl::Span<float> out) const {
  const size_t n = out.size();
  switch (dtype) {
    case DType::kF32:
      std::memcpy(out.data(), data, n * 4);
      break;
    case DType::kBF16:
    case DType::kF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t bits;
        std::memcpy(&bits, data + 2 * i, 2);
        out[i] = dtype == DType::kBF16 ? Bf16ToFloat(bits) : F16ToFloat(bits);
      }
      break;
    case DType::kF8E4M3:
      for (size_t i = 0; i < n; ++i) out[i] = Fp8E4m3ToFloat(data[i]);
      break;
  }
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return absl::DataLossError(absl::StrCat("cannot stat ", path));
  }
  auto file = std::unique_ptr<SafetensorsFile>(new SafetensorsFile());
  file->path_ = path;
  const size_t size = static_cast<size_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    return Corrupt(path, absl::StrCat("file of ", size, " bytes is too short for a header"));
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) {
    return absl::DataLossError(absl::StrCat("cannot mmap ", path, ": ", std::strerror(errno)));
  }
  file->map_ = map;
  file->map_size_ = size;
  const auto* bytes = static_cast<const uint8_t*>(map);
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | bytes[i];
  if (header_size > size - 8) {
    return Corrupt(path, absl::StrCat("header of ", header_size, " bytes exceeds the ", size,
                                      "-byte file (truncated file?)"));
  }
  const char* header = reinterpret_cast<const char*>(bytes + 8);
  const Json json = Json::parse(header, header + header_size, nullptr,
                                /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return Corrupt(path, "header is not a JSON object");
  }
  const uint8_t* data = bytes + 8 + header_size;
  const size_t data_size = size - 8 - header_size;
  for (auto it = json.begin(); it != json.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    TensorView view;
    std::string unsupported;
    RETURN_IF_ERROR(ParseEntry(path, it.key(), it.value(), data, data_size, &view, &unsupported));
    if (!unsupported.empty()) continue;  // not a float tensor; never a model weight here
    file->tensors_.emplace(it.key(), std::move(view));
  }
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
}

const TensorView* SafetensorsFile::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

std::vector<std::string> SafetensorsFile::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, view] : tensors_) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<std::unique_ptr<SafetensorsModel>> SafetensorsModel::Open(const std::string& dir) {
  auto model = std::unique_ptr<SafetensorsModel>(new SafetensorsModel());
  const std::string index_path = JoinPath(dir, "model.safetensors.index.json");
  absl::StatusOr<std::string> index_text = ReadFileToString(index_path);
  if (!index_text.ok()) {
    const std::string path = JoinPath(dir, "model.safetensors");
    ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::Open(path));
    for (const std::string& name : file->Names()) model->index_[name] = file->Find(name);
    model->description_ = path;
    model->files_.push_back(std::move(file));
    return model;
  }
  model->description_ = index_path;
  const Json index = Json::parse(*index_text, nullptr, /*allow_exceptions=*/false);
  if (index.is_discarded() || !index.is_object() || !index.contains("weight_map") ||
      !index["weight_map"].is_object()) {
    return Corrupt(index_path, "needs a \"weight_map\" object");
  }
  absl::flat_hash_map<std::string, SafetensorsFile*> shards;
  for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it) {
    if (!it.value().is_string()) {
      return Corrupt(index_path, absl::StrCat("tensor '", it.key(), "' maps to a non-string"));
    }
    const std::string shard = it.value().get<std::string>();
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "..") {
      return Corrupt(index_path,
                     absl::StrCat("tensor '", it.key(), "': bad shard name '", shard, "'"));
    }
    SafetensorsFile*& file = shards[shard];
    if (file == nullptr) {
      ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> opened,
                       SafetensorsFile::Open(JoinPath(dir, shard)));
      file = opened.get();
      model->files_.push_back(std::move(opened));
    }
    const TensorView* view = file->Find(it.key());
    if (view == nullptr) {
      return Corrupt(index_path, absl::StrCat("tensor '", it.key(), "' is listed in shard ",
                                              file->path(), " but not stored there"));
    }
    model->index_[it.key()] = view;
  }
  return model;
}

bool SafetensorsModel::Contains(const std::string& name) const { return index_.contains(name); }

absl::StatusOr<const TensorView*> SafetensorsModel::Find(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) {
    return absl::NotFoundError(
        absl::StrCat(description_, ": missing tensor '", name, "' (F32, F16, BF16 or F8_E4M3)"));
  }
  return it->second;
}

absl::StatusOr<std::vector<float>> SafetensorsModel::ReadFloat(
    const std::string& name, const std::vector<int64_t>& shape) const {
  ASSIGN_OR_RETURN(const TensorView* view, Find(name));
  if (view->shape != shape) {
    return absl::InvalidArgumentError(absl::StrCat(view->file, ": tensor '", name, "' has shape ",
                                                   ShapeString(view->shape), ", expected ",
                                                   ShapeString(shape)));
  }
  if (view->dtype == DType::kF8E4M3) return DequantizeFp8(*view);
  std::vector<float> values(view->NumElements());
  view->ToFloat(absl::MakeSpan(values));
  CountRead(*view);
  return values;
}

absl::StatusOr<std::vector<float>> SafetensorsModel::DequantizeFp8(const TensorView& view) const {
  const std::string scale_name = Fp8ScaleName(view.name);
  if (view.shape.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(view.file, ": F8_E4M3 tensor '", view.name, "' has shape ",
                     ShapeString(view.shape), "; only block-scaled matrices are supported"));
  }
  auto it = index_.find(scale_name);
  if (it == index_.end()) {
    return absl::NotFoundError(absl::StrCat(description_, ": F8_E4M3 tensor '", view.name,
                                            "' has no scale tensor '", scale_name, "'"));
  }
  const TensorView& scale = *it->second;
  const std::vector<int64_t> grid = Fp8ScaleShape(view.shape[0], view.shape[1]);
  if (scale.shape != grid) {
    return absl::InvalidArgumentError(absl::StrCat(
        scale.file, ": scale tensor '", scale_name, "' has shape ", ShapeString(scale.shape),
        ", expected ", ShapeString(grid), " (one per ", kFp8BlockSize, "x", kFp8BlockSize,
        " block of '", view.name, "' ", ShapeString(view.shape), ")"));
  }
  if (scale.dtype == DType::kF8E4M3) {
    return absl::InvalidArgumentError(
        absl::StrCat(scale.file, ": scale tensor '", scale_name, "' is F8_E4M3, expected F32"));
  }
  std::vector<float> scales(scale.NumElements());
  scale.ToFloat(absl::MakeSpan(scales));
  std::vector<float> values(view.NumElements());
  RETURN_IF_ERROR(DequantizeFp8Blocks(absl::MakeConstSpan(view.data, view.bytes), view.shape[0],
                                      view.shape[1], scales, absl::MakeSpan(values)));
  CountRead(view);
  CountRead(scale);
  return values;
}

void SafetensorsModel::CountRead(const TensorView& view) const {
  absl::MutexLock lock(&read_mu_);
  if (read_names_.insert(view.name).second) bytes_read_ += view.bytes;
}

std::vector<std::string> SafetensorsModel::ReadNames() const {
  absl::MutexLock lock(&read_mu_);
  std::vector<std::string> names(read_names_.begin(), read_names_.end());
  std::sort(names.begin(), names.end());
  return names;
}

uint64_t SafetensorsModel::BytesRead() const {
  absl::MutexLock lock(&read_mu_);
  return bytes_read_;
}

absl::Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors) {
  std::vector<const TensorToWrite*> sorted;
  for (const TensorToWrite& tensor : tensors) sorted.push_back(&tensor);
  std::sort(sorted.begin(), sorted.end(),
            [](const TensorToWrite* a, const TensorToWrite* b) { return a->name < b->name; });
  Json header = Json::object();
  std::string data;
  for (const TensorToWrite* tensor : sorted) {
    int64_t elements = 1;
    for (int64_t dim : tensor->shape) elements *= dim;
    if (elements != static_cast<int64_t>(tensor->values.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", tensor->name, "': ", tensor->values.size(), " values for shape ",
                       ShapeString(tensor->shape)));
    }
    const size_t begin = data.size();
    for (float value : tensor->values) {
      if (tensor->dtype == DType::kF32) {
        data.append(reinterpret_cast<const char*>(&value), 4);
      } else if (tensor->dtype == DType::kF8E4M3) {
        data.push_back(static_cast<char>(FloatToFp8E4m3(value)));
      } else {
        const uint16_t bits =
            tensor->dtype == DType::kBF16 ? FloatToBf16(value) : FloatToF16(value);
        data.append(reinterpret_cast<const char*>(&bits), 2);
      }
    }
    header[tensor->name] = {{"dtype", DTypeName(tensor->dtype)},
                            {"shape", tensor->shape},
                            {"data_offsets", {begin, data.size()}}};
  }
  header["__metadata__"] = {{"format", "pt"}};
  std::string header_text = header.dump();
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  std::string file;
  uint64_t header_size = header_text.size();
  for (int i = 0; i < 8; ++i) file.push_back(static_cast<char>((header_size >> (8 * i)) & 0xff));
  file += header_text;
  file += data;
  return WriteStringToFile(path, file);
}

}  // namespace lockstep::engine
