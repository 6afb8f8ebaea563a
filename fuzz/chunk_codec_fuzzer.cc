// The KV chunk codec on arbitrary bytes, split over one to three gRPC slices as the
// transport may deliver them: DecodeChunk returns a chunk or DataLoss, never reads past
// its input, and a decoded payload can be walked whole.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "runtime/transfer/chunk_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  // The first byte picks the slice boundaries.
  const uint8_t split = data[0];
  ++data;
  --size;
  std::vector<grpc::Slice> slices;
  const size_t a = size == 0 ? 0 : (split & 0x0f) % (size + 1);
  const size_t b = a + (size == a ? 0 : (split >> 4) % (size - a + 1));
  for (auto [begin, end] : {std::pair{size_t{0}, a}, std::pair{a, b}, std::pair{b, size}}) {
    if (end > begin) slices.emplace_back(data + begin, end - begin);
  }
  grpc::ByteBuffer buffer(slices.data(), slices.size());
  absl::StatusOr<lockstep::transfer::DecodedChunk> chunk = lockstep::transfer::DecodeChunk(buffer);
  if (chunk.ok()) {
    size_t walked = 0;
    chunk->payload.ForEachRun(0, chunk->payload.size(), [&](const uint8_t* run, size_t n) {
      volatile uint8_t sink = n > 0 ? run[n - 1] : 0;
      (void)sink;
      walked += n;
    });
    if (walked != chunk->payload.size() || chunk->payload.size() > size) std::abort();
  } else if (chunk.status().code() != absl::StatusCode::kDataLoss) {
    std::abort();
  }
  return 0;
}
