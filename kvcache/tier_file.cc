#include "kvcache/tier_file.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kvcache/block_hash.h"

namespace lockstep::kv {
namespace {

constexpr char kMagic[8] = {'L', 'S', 'K', 'V', 'B', 'L', 'K', '1'};
constexpr size_t kPage = 4096;

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
  const uint64_t h =
      Hash64(reinterpret_cast<const uint8_t*>(tokens.data()), tokens.size() * sizeof(int32_t), key);
  return Hash64(reinterpret_cast<const uint8_t*>(payload.data()), payload.size(), h);
}

// Moves `iov` (n entries, from *first) past `done` bytes already transferred.
void Advance(iovec* iov, int n, int* first, size_t done) {
  while (*first < n && done >= iov[*first].iov_len) {
    done -= iov[*first].iov_len;
    ++*first;
  }
  if (*first < n) {
    iov[*first].iov_base = static_cast<char*>(iov[*first].iov_base) + done;
    iov[*first].iov_len -= done;
  }
}

// Writes all of `iov` at `offset`, resuming after short writes; errno's text on failure.
absl::Status WriteAll(int fd, iovec* iov, int n, off_t offset, const std::string& path) {
  int first = 0;
  while (first < n) {
    const ssize_t wrote = pwritev(fd, iov + first, n - first, offset);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) {
      return absl::UnavailableError(absl::StrCat("disk tier: cannot write ", path, " at ", offset,
                                                 ": ",
                                                 wrote < 0 ? std::strerror(errno) : "no progress"));
    }
    offset += wrote;
    Advance(iov, n, &first, static_cast<size_t>(wrote));
  }
  return absl::OkStatus();
}

// Reads `iov` from `offset` until it is full or the file ends; returns the bytes read,
// or -1 with errno set.
ssize_t ReadAll(int fd, iovec* iov, int n, off_t offset) {
  ssize_t total = 0;
  int first = 0;
  while (first < n) {
    const ssize_t got = preadv(fd, iov + first, n - first, offset);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return -1;
    if (got == 0) break;  // end of file
    total += got;
    offset += got;
    Advance(iov, n, &first, static_cast<size_t>(got));
  }
  return total;
}

}  // namespace

size_t TierFileBytes(size_t num_tokens, size_t payload_bytes) {
  const size_t record = sizeof(Header) + num_tokens * sizeof(int32_t) + payload_bytes;
  return (record + kPage - 1) / kPage * kPage;
}

absl::StatusOr<std::unique_ptr<TierFile>> TierFile::Create(std::string path, int64_t slots,
                                                           size_t num_tokens,
                                                           size_t payload_bytes) {
  if (slots <= 0 || num_tokens == 0 || payload_bytes == 0) {
    return absl::InvalidArgumentError(absl::StrCat("disk tier: ", path, " needs slots (", slots,
                                                   ") for blocks of tokens (", num_tokens,
                                                   ") and bytes (", payload_bytes, ")"));
  }
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("disk tier: cannot create ", path, ": ", std::strerror(errno)));
  }
  // Ours from here: the destructor closes it.
  std::unique_ptr<TierFile> file(
      new TierFile(std::move(path), fd, slots, num_tokens, payload_bytes));
  const off_t size = static_cast<off_t>(slots) * static_cast<off_t>(file->slot_bytes_);
  // Reserved, so a write never finds the disk full; a file system that cannot reserve
  // gets a sparse file of the full size instead.
  int err = fallocate(fd, 0, 0, size) == 0 ? 0 : errno;
  if (err == EOPNOTSUPP) err = ftruncate(fd, size) == 0 ? 0 : errno;
  if (err != 0) {
    return absl::UnavailableError(absl::StrCat("disk tier: cannot reserve ", size, " bytes for ",
                                               file->path_, ": ", std::strerror(err)));
  }
  return file;
}

TierFile::TierFile(std::string path, int fd, int64_t slots, size_t num_tokens, size_t payload_bytes)
    : path_(std::move(path)),
      fd_(fd),
      slots_(slots),
      num_tokens_(num_tokens),
      payload_bytes_(payload_bytes),
      slot_bytes_(TierFileBytes(num_tokens, payload_bytes)) {}

TierFile::~TierFile() { close(fd_); }

absl::Status TierFile::CheckFits(int64_t slot, size_t num_tokens, size_t payload_bytes) const {
  if (slot < 0 || slot >= slots_) {
    return absl::OutOfRangeError(
        absl::StrCat("disk tier: slot ", slot, " is outside ", path_, " (", slots_, " slots)"));
  }
  if (num_tokens != num_tokens_ || payload_bytes != payload_bytes_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "disk tier: a block of ", num_tokens, " tokens and ", payload_bytes, " bytes in ", path_,
        ", whose slots hold ", num_tokens_, " tokens and ", payload_bytes_, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status TierFile::Write(int64_t slot, const TierBlockMeta& meta,
                             absl::Span<const std::byte> payload) {
  if (absl::Status s = CheckFits(slot, meta.tokens.size(), payload.size()); !s.ok()) return s;
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.key = meta.key;
  h.parent_key = meta.parent_key;
  h.num_tokens = static_cast<uint32_t>(meta.tokens.size());
  h.payload_bytes = payload.size();
  h.checksum = Checksum(meta.key, meta.tokens, payload);
  iovec iov[3] = {
      {&h, sizeof(h)},
      {const_cast<int32_t*>(meta.tokens.data()), meta.tokens.size() * sizeof(int32_t)},
      {const_cast<std::byte*>(payload.data()), payload.size()},
  };
  return WriteAll(fd_, iov, 3, OffsetOf(slot), path_);
}

absl::Status TierFile::Read(int64_t slot, const TierBlockMeta& expected,
                            absl::Span<std::byte> payload) const {
  if (absl::Status s = CheckFits(slot, expected.tokens.size(), payload.size()); !s.ok()) return s;
  if (read_hook_) read_hook_(slot);
  Header h{};
  std::vector<int32_t> tokens(num_tokens_);
  iovec iov[3] = {
      {&h, sizeof(h)},
      {tokens.data(), tokens.size() * sizeof(int32_t)},
      {payload.data(), payload.size()},
  };
  const ssize_t got = ReadAll(fd_, iov, 3, OffsetOf(slot));
  const std::string where = absl::StrCat(path_, " slot ", slot);
  if (got < 0) {
    return absl::DataLossError(
        absl::StrCat("disk tier: cannot read ", where, ": ", std::strerror(errno)));
  }
  if (static_cast<size_t>(got) < sizeof(h)) {
    return absl::DataLossError(absl::StrCat("disk tier: ", where, " is shorter than its header"));
  }
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0 || h.key != expected.key ||
      h.parent_key != expected.parent_key || h.num_tokens != expected.tokens.size() ||
      h.zero != 0 || h.payload_bytes != payload.size()) {
    return absl::DataLossError(
        absl::StrCat("disk tier: ", where, " does not hold block ", expected.key));
  }
  if (static_cast<size_t>(got) < sizeof(h) + tokens.size() * sizeof(int32_t) + payload.size()) {
    return absl::DataLossError(absl::StrCat("disk tier: ", where, " is truncated"));
  }
  if (tokens != expected.tokens) {
    return absl::DataLossError(absl::StrCat("disk tier: ", where, " holds other tokens"));
  }
  if (Checksum(h.key, tokens, payload) != h.checksum) {
    return absl::DataLossError(absl::StrCat("disk tier: checksum mismatch in ", where));
  }
  return absl::OkStatus();
}

}  // namespace lockstep::kv
