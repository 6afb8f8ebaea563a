#include "runtime/engine/model/safetensors.h"

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/engine/model/file_io.h"
#include "runtime/engine/model/fp8.h"

namespace lockstep::engine {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string TempDir(const std::string& name) {
  const std::string dir = JoinPath(std::getenv("TEST_TMPDIR"), name);
  EXPECT_THAT(MakeDirectories(dir), IsOk());
  return dir;
}

std::vector<TensorToWrite> TwoTensors(DType dtype) {
  return {{"a.weight", {2, 3}, {1.0f, -2.5f, 3.25f, 0.0f, 65504.0f, -0.125f}, dtype},
          {"b.bias", {3}, {0.5f, 1.5f, -7.0f}, dtype}};
}

TEST(SafetensorsTest, RoundTripsEveryDType) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    const std::string dir = TempDir(std::string("rt_") + DTypeName(dtype));
    ASSERT_THAT(WriteSafetensors(JoinPath(dir, "model.safetensors"), TwoTensors(dtype)), IsOk());
    absl::StatusOr<std::unique_ptr<SafetensorsModel>> model = SafetensorsModel::Open(dir);
    ASSERT_THAT(model, IsOk());
    absl::StatusOr<std::vector<float>> a = (*model)->ReadFloat("a.weight", {2, 3});
    ASSERT_THAT(a, IsOk());
    // All these values are exact in f16 and bf16 except 65504 (bf16: 65536) and 3.25.
    const std::vector<float> expected = TwoTensors(DType::kF32)[0].values;
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_NEAR((*a)[i], expected[i], std::fabs(expected[i]) * 0.01f) << DTypeName(dtype);
    }
    EXPECT_EQ((*(*model)->Find("b.bias"))->dtype, dtype);
  }
}

TEST(SafetensorsTest, HalfConversionsAreExactWhereRepresentable) {
  for (float v : {0.0f, 1.0f, -2.0f, 0.5f, 1024.0f, 6.103515625e-05f /* min normal */,
                  5.960464477539063e-08f /* min subnormal */, -65504.0f}) {
    EXPECT_EQ(F16ToFloat(FloatToF16(v)), v) << v;
  }
  for (float v : {0.0f, 1.0f, -3.0f, 0.15625f, std::ldexp(1.0f, 100), -std::ldexp(1.0f, -100)}) {
    EXPECT_EQ(Bf16ToFloat(FloatToBf16(v)), v) << v;
  }
  EXPECT_TRUE(std::isinf(F16ToFloat(FloatToF16(1e6f))));
  EXPECT_TRUE(std::isnan(F16ToFloat(FloatToF16(std::nanf("")))));
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::nanf("")))));
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.00390625f)), 1.0f);  // ties to even
}

TEST(SafetensorsTest, MissingTensorAndWrongShapeNameFileAndTensor) {
  const std::string dir = TempDir("shape");
  ASSERT_THAT(WriteSafetensors(JoinPath(dir, "model.safetensors"), TwoTensors(DType::kF32)),
              IsOk());
  auto model = SafetensorsModel::Open(dir);
  ASSERT_THAT(model, IsOk());
  EXPECT_THAT((*model)->ReadFloat("c.weight", {3}),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr("c.weight"), HasSubstr("model.safetensors"))));
  EXPECT_THAT(
      (*model)->ReadFloat("a.weight", {3, 2}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("a.weight"), HasSubstr("model.safetensors"), HasSubstr("[2, 3]"))));
}

// Every prefix of a valid file fails to open with an error naming the file; none
// crashes.
TEST(SafetensorsTest, TruncatedFilesFailCleanly) {
  const std::string dir = TempDir("trunc");
  const std::string path = JoinPath(dir, "model.safetensors");
  ASSERT_THAT(WriteSafetensors(path, TwoTensors(DType::kF32)), IsOk());
  absl::StatusOr<std::string> bytes = ReadFileToString(path);
  ASSERT_THAT(bytes, IsOk());
  for (size_t size = 0; size < bytes->size(); ++size) {
    ASSERT_THAT(WriteStringToFile(path, bytes->substr(0, size)), IsOk());
    absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
    ASSERT_FALSE(file.ok()) << "prefix of " << size << " bytes opened";
    EXPECT_THAT(file.status().message(), HasSubstr("model.safetensors"));
  }
  // Truncated inside the data: the error names the tensor.
  ASSERT_THAT(WriteStringToFile(path, bytes->substr(0, bytes->size() - 1)), IsOk());
  EXPECT_THAT(
      SafetensorsFile::Open(path),
      StatusIs(absl::StatusCode::kDataLoss, AllOf(HasSubstr("b.bias"), HasSubstr("truncated"))));
}

TEST(SafetensorsTest, InconsistentHeadersAreErrors) {
  const std::string dir = TempDir("bad_header");
  const std::string path = JoinPath(dir, "model.safetensors");
  auto write_header = [&](const std::string& header, size_t data_bytes) {
    std::string file;
    const uint64_t size = header.size();
    for (int i = 0; i < 8; ++i) file.push_back(static_cast<char>((size >> (8 * i)) & 0xff));
    file += header + std::string(data_bytes, '\0');
    ASSERT_THAT(WriteStringToFile(path, file), IsOk());
  };
  struct Case {
    std::string header;
    std::string expect;
  };
  const Case cases[] = {
      {R"({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12]}})", "w"},
      {R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 16]}})", "bad shape"},
      {R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [8, 4]}})", "data_offsets"},
      {R"({"w": {"dtype": "F32", "shape": [4]}})", "data_offsets"},
      {R"({"w": 3})", "not an object"},
      {R"(not json)", "JSON"},
  };
  for (const Case& c : cases) {
    write_header(c.header, 16);
    EXPECT_THAT(SafetensorsFile::Open(path),
                StatusIs(absl::StatusCode::kDataLoss, HasSubstr(c.expect)))
        << c.header;
  }
  // Header length larger than the file.
  ASSERT_THAT(WriteStringToFile(path, std::string("\xff\xff\xff\xff\x00\x00\x00\x00{}", 10)),
              IsOk());
  EXPECT_THAT(SafetensorsFile::Open(path),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("header")));
}

TEST(SafetensorsTest, ShardedModelWithIndex) {
  const std::string dir = TempDir("sharded");
  std::vector<TensorToWrite> tensors = TwoTensors(DType::kBF16);
  ASSERT_THAT(WriteSafetensors(JoinPath(dir, "model-00001-of-00002.safetensors"), {tensors[0]}),
              IsOk());
  ASSERT_THAT(WriteSafetensors(JoinPath(dir, "model-00002-of-00002.safetensors"), {tensors[1]}),
              IsOk());
  const std::string index = R"({"metadata": {}, "weight_map": {
      "a.weight": "model-00001-of-00002.safetensors",
      "b.bias": "model-00002-of-00002.safetensors"}})";
  ASSERT_THAT(WriteStringToFile(JoinPath(dir, "model.safetensors.index.json"), index), IsOk());
  auto model = SafetensorsModel::Open(dir);
  ASSERT_THAT(model, IsOk());
  absl::StatusOr<std::vector<float>> b = (*model)->ReadFloat("b.bias", {3});
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ(*b, (std::vector<float>{0.5f, 1.5f, -7.0f}));

  // The index names a tensor its shard does not hold.
  const std::string wrong = R"({"weight_map": {"b.bias": "model-00001-of-00002.safetensors"}})";
  ASSERT_THAT(WriteStringToFile(JoinPath(dir, "model.safetensors.index.json"), wrong), IsOk());
  EXPECT_THAT(SafetensorsModel::Open(dir),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("b.bias"), HasSubstr("model-00001-of-00002"))));
  // The index names a missing shard.
  const std::string missing = R"({"weight_map": {"b.bias": "model-00009.safetensors"}})";
  ASSERT_THAT(WriteStringToFile(JoinPath(dir, "model.safetensors.index.json"), missing), IsOk());
  EXPECT_THAT(SafetensorsModel::Open(dir),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("model-00009.safetensors")));
}

// A [130, 257] FP8 weight with its [2, 3] scale grid, each in its own shard (checkpoints
// may place a weight and its scale in different files).
TEST(SafetensorsTest, Fp8WeightIsDequantizedWithItsBlockScales) {
  const std::string dir = TempDir("fp8");
  const int64_t rows = 130;
  const int64_t cols = 257;
  std::vector<float> values(rows * cols);
  for (int64_t i = 0; i < rows * cols; ++i) values[i] = static_cast<float>((i * 37) % 101 - 50);
  const Fp8Blocks blocks = QuantizeFp8Blocks(values, rows, cols);
  TensorToWrite weight{"w.weight", {rows, cols}, {}, DType::kF8E4M3};
  for (uint8_t code : blocks.codes) weight.values.push_back(Fp8E4m3ToFloat(code));
  const TensorToWrite scale{"w.weight_scale_inv", {2, 3}, blocks.scale_inv, DType::kF32};
  ASSERT_THAT(WriteSafetensors(JoinPath(dir, "model-00001-of-00002.safetensors"), {weight}),
              IsOk());
  ASSERT_THAT(WriteSafetensors(JoinPath(dir, "model-00002-of-00002.safetensors"), {scale}),
              IsOk());
  ASSERT_THAT(WriteStringToFile(JoinPath(dir, "model.safetensors.index.json"),
                                R"({"weight_map": {
      "w.weight": "model-00001-of-00002.safetensors",
      "w.weight_scale_inv": "model-00002-of-00002.safetensors"}})"),
              IsOk());
  auto model = SafetensorsModel::Open(dir);
  ASSERT_THAT(model, IsOk());
  const TensorView* view = *(*model)->Find("w.weight");
  EXPECT_EQ(view->dtype, DType::kF8E4M3);
  EXPECT_EQ(view->bytes, static_cast<size_t>(rows * cols));
  absl::StatusOr<std::vector<float>> read = (*model)->ReadFloat("w.weight", {rows, cols});
  ASSERT_THAT(read, IsOk());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const float scale_inv = blocks.scale_inv[(r / 128) * 3 + c / 128];
      ASSERT_EQ((*read)[r * cols + c], Fp8E4m3ToFloat(blocks.codes[r * cols + c]) * scale_inv)
          << r << ", " << c;
    }
  }
  EXPECT_EQ((*model)->ReadNames(), (std::vector<std::string>{"w.weight", "w.weight_scale_inv"}));
  EXPECT_EQ((*model)->BytesRead(), static_cast<uint64_t>(rows * cols + 6 * 4));
}

TEST(SafetensorsTest, Fp8WithoutItsScaleOrWithAMisshapedOneIsAnError) {
  const std::string dir = TempDir("fp8_bad");
  const std::string path = JoinPath(dir, "model.safetensors");
  const TensorToWrite weight{"w.weight", {130, 257}, std::vector<float>(130 * 257, 1.0f),
                             DType::kF8E4M3};
  ASSERT_THAT(WriteSafetensors(path, {weight}), IsOk());
  auto model = SafetensorsModel::Open(dir);
  ASSERT_THAT(model, IsOk());
  EXPECT_THAT((*model)->ReadFloat("w.weight", {130, 257}),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr("'w.weight'"), HasSubstr("w.weight_scale_inv"))));
  // [2, 2] misses the last column block.
  ASSERT_THAT(WriteSafetensors(path, {weight, {"w.weight_scale_inv", {2, 2}, {1, 1, 1, 1}}}),
              IsOk());
  model = SafetensorsModel::Open(dir);
  ASSERT_THAT(model, IsOk());
  EXPECT_THAT((*model)->ReadFloat("w.weight", {130, 257}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("w.weight_scale_inv"), HasSubstr("[2, 2]"),
                             HasSubstr("expected [2, 3]"), HasSubstr("[130, 257]"))));
  // A vector stored in FP8 has no block scale.
  ASSERT_THAT(WriteSafetensors(path, {{"v", {4}, {1, 2, 3, 4}, DType::kF8E4M3}}), IsOk());
  model = SafetensorsModel::Open(dir);
  ASSERT_THAT(model, IsOk());
  EXPECT_THAT((*model)->ReadFloat("v", {4}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("F8_E4M3 tensor 'v'")));
  // A wrong byte count for the F8_E4M3 shape is refused at open.
  const std::string header =
      R"({"w": {"dtype": "F8_E4M3", "shape": [2, 3], "data_offsets": [0, 12]}})";
  std::string file;
  for (int i = 0; i < 8; ++i) file.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  ASSERT_THAT(WriteStringToFile(path, file + header + std::string(12, '\0')), IsOk());
  EXPECT_THAT(SafetensorsFile::Open(path),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("needs 6")));
}

TEST(SafetensorsTest, CountsOnlyTheTensorsRead) {
  const std::string dir = TempDir("count");
  ASSERT_THAT(WriteSafetensors(JoinPath(dir, "model.safetensors"), TwoTensors(DType::kBF16)),
              IsOk());
  auto model = SafetensorsModel::Open(dir);
  ASSERT_THAT(model, IsOk());
  EXPECT_EQ((*model)->BytesRead(), 0u);
  ASSERT_THAT((*model)->ReadFloat("b.bias", {3}), IsOk());
  ASSERT_THAT((*model)->ReadFloat("b.bias", {3}), IsOk());  // counted once
  EXPECT_EQ((*model)->ReadNames(), std::vector<std::string>{"b.bias"});
  EXPECT_EQ((*model)->BytesRead(), 6u);
}

TEST(SafetensorsTest, MissingModelFileIsNotFound) {
  EXPECT_THAT(SafetensorsModel::Open(TempDir("empty")),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("model.safetensors")));
}

}  // namespace
}  // namespace lockstep::engine
