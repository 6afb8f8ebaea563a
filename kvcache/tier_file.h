// The disk tier's file: one preallocated file per rank, cut into fixed-size slots, each
// holding one KV block's record, written with a checksum and read back verified, so a
// damaged slot is a miss, never served (docs/design/kv_cache.md, the tier section).
//
// Slot i starts at i * slot_bytes(); a record (little-endian, this machine's byte order:
// the file never leaves the host):
//   magic "LSKVBLK1" | key u64 | parent key u64 | tokens u32 | 0 u32 | payload bytes u64 |
//   checksum u64 | tokens × i32 | payload
// then padding to the slot's end (TierFileBytes rounds a record up to whole 4 KiB pages,
// so two slots never share a page). checksum = Hash64 (block_hash.h) of the tokens' and
// payload's bytes, seeded with the key (64 bits of wyhash: a damaged record passes with
// probability about 2^-64). A slot is rewritten in place, no file is created or removed
// per block: which slot holds which block is the owner's in-memory index (kv_tiers.h),
// and every read checks the record names the block asked for, so a slot's old or
// half-written contents are DataLoss, never another block's bytes.
//
// Create truncates the file (stale contents of an earlier run are never read) and
// reserves its size. Thread safety: Write and Read use pwrite/pread on one descriptor,
// so any threads may call them for different slots at once; the owner keeps one slot's
// write apart from its reads and from another write.
#ifndef LOCKSTEP_KVCACHE_TIER_FILE_H_
#define LOCKSTEP_KVCACHE_TIER_FILE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace lockstep::kv {

// What names a block below the device: its prefix-hash key, its parent's key and its
// tokens (compared on every hit, as the radix tree does).
struct TierBlockMeta {
  uint64_t key = 0;
  uint64_t parent_key = 0;
  std::vector<int32_t> tokens;
};

// The bytes one block's slot takes for `num_tokens` tokens and `payload_bytes` of KV: its
// record rounded up to whole 4 KiB pages.
size_t TierFileBytes(size_t num_tokens, size_t payload_bytes);

class TierFile {
 public:
  // Creates (or truncates) `path` and reserves `slots` slots for blocks of `num_tokens`
  // tokens and `payload_bytes` bytes. InvalidArgument for no slots or an empty block;
  // Unavailable when the file cannot be made or its bytes reserved (naming the path).
  static absl::StatusOr<std::unique_ptr<TierFile>> Create(std::string path, int64_t slots,
                                                          size_t num_tokens, size_t payload_bytes);
  ~TierFile();  // closes the file (the owner removes it)
  TierFile(const TierFile&) = delete;
  TierFile& operator=(const TierFile&) = delete;

  // Writes `meta`'s record with `payload` into slot `slot`. OutOfRange for a slot
  // outside the file, InvalidArgument for a block of another size, Unavailable when the
  // write fails.
  absl::Status Write(int64_t slot, const TierBlockMeta& meta, absl::Span<const std::byte> payload);
  // Reads slot `slot` into `payload` (exactly its size). DataLoss when the slot is short
  // (the file was cut), names another block than `expected`, or its checksum does not
  // match (nothing usable is left in `payload` then); OutOfRange and InvalidArgument as
  // Write.
  absl::Status Read(int64_t slot, const TierBlockMeta& expected,
                    absl::Span<std::byte> payload) const;

  // For tests (a stalled file system): `hook` runs at the start of every Read, on the
  // reading thread. Set it before any Read may run.
  void set_read_hook_for_test(std::function<void(int64_t slot)> hook) {
    read_hook_ = std::move(hook);
  }

  const std::string& path() const { return path_; }
  int64_t slots() const { return slots_; }
  size_t slot_bytes() const { return slot_bytes_; }
  // Where slot `slot` starts in the file.
  int64_t OffsetOf(int64_t slot) const { return slot * static_cast<int64_t>(slot_bytes_); }

 private:
  TierFile(std::string path, int fd, int64_t slots, size_t num_tokens, size_t payload_bytes);
  absl::Status CheckFits(int64_t slot, size_t num_tokens, size_t payload_bytes) const;

  const std::string path_;
  const int fd_;
  const int64_t slots_;
  const size_t num_tokens_;
  const size_t payload_bytes_;
  const size_t slot_bytes_;
  std::function<void(int64_t slot)> read_hook_;  // tests only
};

}  // namespace lockstep::kv

#endif  // LOCKSTEP_KVCACHE_TIER_FILE_H_
