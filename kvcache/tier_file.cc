#include "kvcache/tier_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "kvcache/block_hash.h"

namespace lockstep::kv {
namespace {

constexpr char kMagic[8] = {'L', 'S', 'K', 'V', 'B', 'L', 'K', '1'};

struct Header {
  char magic[8];
  uint64_t key;
  uint64_t parent_key;
  uint32_t num_tokens;
  uint32_t zero;
  uint64_t payload_bytes;
  uint64_t checksum;
};
static_assert(sizeof(Header) == 48);

uint64_t Checksum(uint64_t key, absl::Span<const int32_t> tokens,
                  absl::Span<const std::byte> payload) {
  const uint64_t h = Hash64(reinterpret_cast<const uint8_t*>(tokens.data()),
                            tokens.size() * sizeof(int32_t), key);
  return Hash64(reinterpret_cast<const uint8_t*>(payload.data()), payload.size(), h);
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

}  // namespace

size_t TierFileBytes(size_t num_tokens, size_t payload_bytes) {
  return sizeof(Header) + num_tokens * sizeof(int32_t) + payload_bytes;
}

absl::Status WriteTierFile(const std::string& path, const TierBlockMeta& meta,
                           absl::Span<const std::byte> payload) {
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.key = meta.key;
  h.parent_key = meta.parent_key;
  h.num_tokens = static_cast<uint32_t>(meta.tokens.size());
  h.payload_bytes = payload.size();
  h.checksum = Checksum(meta.key, meta.tokens, payload);
  const std::string tmp = path + ".tmp";
  {
    File f(std::fopen(tmp.c_str(), "wb"));
    if (f == nullptr) {
      return absl::UnavailableError(
          absl::StrCat("disk tier: cannot create ", tmp, ": ", std::strerror(errno)));
    }
    const bool ok =
        std::fwrite(&h, sizeof(h), 1, f.get()) == 1 &&
        std::fwrite(meta.tokens.data(), sizeof(int32_t), meta.tokens.size(), f.get()) ==
            meta.tokens.size() &&
        std::fwrite(payload.data(), 1, payload.size(), f.get()) == payload.size() &&
        std::fflush(f.get()) == 0;
    if (!ok) {
      const int err = errno;
      std::remove(tmp.c_str());
      return absl::UnavailableError(
          absl::StrCat("disk tier: cannot write ", tmp, ": ", std::strerror(err)));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return absl::UnavailableError(
        absl::StrCat("disk tier: cannot rename ", tmp, ": ", std::strerror(err)));
  }
  return absl::OkStatus();
}

absl::Status ReadTierFile(const std::string& path, const TierBlockMeta& expected,
                          absl::Span<std::byte> payload) {
  File f(std::fopen(path.c_str(), "rb"));
  if (f == nullptr) return absl::NotFoundError(absl::StrCat("disk tier: no file ", path));
  Header h{};
  if (std::fread(&h, sizeof(h), 1, f.get()) != 1) {
    return absl::DataLossError(absl::StrCat("disk tier: ", path, " is shorter than its header"));
  }
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0 || h.key != expected.key ||
      h.parent_key != expected.parent_key || h.num_tokens != expected.tokens.size() ||
      h.zero != 0 || h.payload_bytes != payload.size()) {
    return absl::DataLossError(
        absl::StrCat("disk tier: ", path, " does not hold block ", expected.key));
  }
  std::vector<int32_t> tokens(h.num_tokens);
  if (std::fread(tokens.data(), sizeof(int32_t), tokens.size(), f.get()) != tokens.size() ||
      std::fread(payload.data(), 1, payload.size(), f.get()) != payload.size()) {
    return absl::DataLossError(absl::StrCat("disk tier: ", path, " is truncated"));
  }
  if (tokens != expected.tokens) {
    return absl::DataLossError(absl::StrCat("disk tier: ", path, " holds other tokens"));
  }
  if (Checksum(h.key, tokens, payload) != h.checksum) {
    return absl::DataLossError(absl::StrCat("disk tier: checksum mismatch in ", path));
  }
  return absl::OkStatus();
}

}  // namespace lockstep::kv
