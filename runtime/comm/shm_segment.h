// ShmSegment: the POSIX shared-memory segment of one ShmCommunicator group, mapped
// into this process, and its layout.
//
//   page 0      ShmGroupHeader: magic (set last by the creator), world size, chunk
//               size, and the group's futex word and sleeper count
//   slot r      (one per rank, page-aligned) ShmSlotControl: the rank's published
//               round count `seq`, its pid, its state and whether it can read its
//               peers' memory directly (shm_direct.h); then two round buffers
//               (round k uses buffer k % 2), each a ShmRoundHeader, 2 * world int64
//               header fields, and `chunk_bytes` of payload
//
// Safety: the segment is created by rank 0 with O_EXCL and mode 0600 (an existing name
// is an error, never reused), its pages are reserved with posix_fallocate (a full
// /dev/shm is an error at creation, not a SIGBUS later), and an opener refuses a
// segment owned by another user or readable by others. Names carry the group's epoch
// (ShmSegmentName), so a relaunched instance never attaches to a stale segment.
//
// Ownership: the ShmSegment owns the mapping; it does not unlink the name
// (UnlinkShmSegment does, see ShmGroup for when). Thread safety: the mapping is
// immutable; the atomics in it are what ranks synchronize on (see shm_group.h).
#ifndef LOCKSTEP_RUNTIME_COMM_SHM_SEGMENT_H_
#define LOCKSTEP_RUNTIME_COMM_SHM_SEGMENT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace lockstep::comm {

// "lockstep-<instance>-<epoch>-<group>": the shm_open name (without the leading '/')
// of one group of one launch. Characters outside [A-Za-z0-9._-] become '_'.
std::string ShmSegmentName(absl::string_view instance, absl::string_view epoch,
                           absl::string_view group);

// Removes the name (the memory goes once the last mapping goes). OK if it is absent.
absl::Status UnlinkShmSegment(const std::string& name);

namespace internal {

inline constexpr uint64_t kShmMagic = 0x314d48535054534cULL;  // "LSTPSHM1"
inline constexpr uint32_t kShmLayoutVersion = 1;
inline constexpr size_t kShmPageBytes = 4096;
inline constexpr size_t kShmTagBytes = 52;
inline constexpr int kShmMaxWorld = 1024;

// A rank's slot state. Only its owner writes it; kEmpty -> kAttached -> kLeft|kBroken.
enum class ShmRankState : uint32_t { kEmpty = 0, kAttached = 1, kLeft = 2, kBroken = 3 };

struct ShmGroupHeader {
  std::atomic<uint64_t> magic;  // kShmMagic once every other field is initialized
  uint32_t version;
  uint32_t world_size;
  uint64_t chunk_bytes;
  uint64_t slot_bytes;
  uint64_t total_bytes;
  // Futex word: bumped (and waiters woken) when a sleeping rank may have to re-check.
  alignas(64) std::atomic<uint32_t> futex;
  std::atomic<uint32_t> sleepers;  // ranks between announcing a sleep and waking
};

struct alignas(64) ShmSlotControl {
  std::atomic<uint64_t> seq;            // rounds this rank has published
  std::atomic<int32_t> pid;             // set before state becomes kAttached
  std::atomic<uint32_t> state;          // ShmRankState
  std::atomic<uint32_t> broken_code;    // absl::StatusCode, set before state kBroken
  std::atomic<int32_t> broken_cause;    // 1 + the rank whose departure broke it, or 0
  std::atomic<uint32_t> direct_state;   // 0 probing, 1 reads every peer, 2 cannot
  std::atomic<uint64_t> probe_address;  // a word of this rank's memory peers probe
};

// What a rank writes at the start of a round buffer. Round 0 of a call carries the
// whole call description; later rounds repeat fp, info, round and the tag so that a
// peer that has moved on to another call is seen as a desync.
struct ShmRoundHeader {
  int64_t fp;             // CallFingerprint of the call
  int64_t info;           // op | kShmInvalidFlag when the rank's own arguments are bad
  int64_t round;          // round index within the call
  int64_t payload_bytes;  // round 0: this rank's payload size
  int64_t args[3];        // round 0: the arguments the fingerprint covers
  int64_t num_args;
  int64_t payload_address;  // round 0 of a direct call: where peers read the payload
  uint32_t tag_length;
  char tag[kShmTagBytes];  // truncated copy of the call's tag (for messages)
};
static_assert(sizeof(ShmRoundHeader) == 128);

// Bits of ShmRoundHeader::info above the op.
inline constexpr int64_t kShmInvalidFlag = 1 << 8;  // the rank's own arguments are bad
inline constexpr int64_t kShmDirectFlag = 1 << 9;   // its payload is read in place

// Byte sizes and offsets of a segment for (world, chunk).
struct ShmLayout {
  int world = 0;
  size_t chunk_bytes = 0;
  size_t fields_bytes = 0;  // 2 * world int64, rounded up to 64
  size_t round_bytes = 0;   // header + fields + chunk
  size_t slot_bytes = 0;    // control line + 2 round buffers, page-aligned
  size_t total_bytes = 0;

  static ShmLayout For(int world, size_t chunk_bytes);
};

class ShmSegment {
 public:
  // Rank 0: creates and initializes `name` (see the file comment). `chunk_bytes` is
  // rounded up to a multiple of 64.
  static absl::StatusOr<std::unique_ptr<ShmSegment>> Create(const std::string& name, int world,
                                                            size_t chunk_bytes);
  // Other ranks: opens `name` once its creator has initialized it, retrying until
  // `deadline` while it does not exist yet. The layout is the creator's.
  static absl::StatusOr<std::unique_ptr<ShmSegment>> Open(const std::string& name, int world,
                                                          absl::Time deadline);

  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  ~ShmSegment();  // Unmaps.

  const std::string& name() const { return name_; }
  const ShmLayout& layout() const { return layout_; }
  ShmGroupHeader& header() const { return *reinterpret_cast<ShmGroupHeader*>(base_); }
  ShmSlotControl& control(int rank) const { return *reinterpret_cast<ShmSlotControl*>(Slot(rank)); }
  ShmRoundHeader& round_header(int rank, uint64_t parity) const {
    return *reinterpret_cast<ShmRoundHeader*>(Round(rank, parity));
  }
  int64_t* fields(int rank, uint64_t parity) const {
    return reinterpret_cast<int64_t*>(Round(rank, parity) + sizeof(ShmRoundHeader));
  }
  char* data(int rank, uint64_t parity) const {
    return Round(rank, parity) + sizeof(ShmRoundHeader) + layout_.fields_bytes;
  }

 private:
  ShmSegment(std::string name, ShmLayout layout, char* base);
  char* Slot(int rank) const { return base_ + kShmPageBytes + rank * layout_.slot_bytes; }
  char* Round(int rank, uint64_t parity) const {
    return Slot(rank) + sizeof(ShmSlotControl) + (parity & 1) * layout_.round_bytes;
  }

  const std::string name_;
  const ShmLayout layout_;
  char* const base_;  // mapping of layout_.total_bytes
};

// Whether `name` is a valid segment name: 1..200 characters of [A-Za-z0-9._-].
absl::Status ValidateShmName(absl::string_view name);

}  // namespace internal
}  // namespace lockstep::comm

#endif  // LOCKSTEP_RUNTIME_COMM_SHM_SEGMENT_H_
