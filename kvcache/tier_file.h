// The disk tier's file format: one KV block per file, written with a checksum and read
// back verified, so a damaged file is a miss, never served (docs/design.md §5.1).
//
// Layout (little-endian, this machine's byte order: the files never leave the host):
//   magic "LSKVBLK1" | key u64 | parent key u64 | tokens u32 | 0 u32 | payload bytes u64 |
//   checksum u64 | tokens × i32 | payload
// checksum = Hash64 (block_hash.h) of the tokens' and payload's bytes, seeded with the
// key (64 bits of wyhash: a damaged file passes with probability about 2^-64).
//
// Writes go to `path` + ".tmp" and are renamed into place, so a reader never sees half a
// file. Thread safety: functions of files only; callers keep two threads off one path.
#ifndef LOCKSTEP_KVCACHE_TIER_FILE_H_
#define LOCKSTEP_KVCACHE_TIER_FILE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace lockstep::kv {

// What names a block below the device: its prefix-hash key, its parent's key and its
// tokens (compared on every hit, as the radix tree does).
struct TierBlockMeta {
  uint64_t key = 0;
  uint64_t parent_key = 0;
  std::vector<int32_t> tokens;
};

absl::Status WriteTierFile(const std::string& path, const TierBlockMeta& meta,
                           absl::Span<const std::byte> payload);

// Reads the block at `path` into `payload` (exactly its size). NotFound when there is no
// file; DataLoss when the file is short, names another block than `expected`, or its
// checksum does not match (nothing usable is left in `payload` then).
absl::Status ReadTierFile(const std::string& path, const TierBlockMeta& expected,
                          absl::Span<std::byte> payload);

// The file's size for `num_tokens` tokens and `payload_bytes` of KV.
size_t TierFileBytes(size_t num_tokens, size_t payload_bytes);

}  // namespace lockstep::kv

#endif  // LOCKSTEP_KVCACHE_TIER_FILE_H_
