// The shared-memory segment the ranks of one NCCL communicator meet in, and the
// futex waits on its words.
//
//   page 0        SegmentHeader: magic (set last by the creator), layout, the id's
//                 nonce, and `arrived` (a futex word: ranks attached so far)
//   controls      RankControl per rank: pid, state, doorbell (a futex word peers bump
//                 when this rank may progress) and the rank's failure, if any
//   rings         one single-producer single-consumer ring per ordered rank pair
//                 (s -> r, s != r): head (chunks written by s), tail (chunks read by
//                 r), then `slots` slots of a ChunkHeader and `chunk_bytes` of payload
//
// The segment is created by whichever rank comes first (O_CREAT | O_EXCL, mode 0600,
// pages reserved with posix_fallocate so a full /dev/shm is an error, not a SIGBUS);
// the others open it and wait until the creator has set the magic. An opener refuses
// a segment of another user, one readable by others, or one made for another id or
// world size. The name is unlinked once every rank has attached (comm.h).
//
// Ownership: a Segment owns its mapping. Thread safety: the mapping is immutable;
// ranks synchronize on the atomics in it.
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_NCCL_SEGMENT_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_NCCL_SEGMENT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace lockstep::cuda_cpu::nccl {

inline constexpr uint64_t kSegmentMagic = 0x31434e4350534cULL;  // "LSPCNC1"
inline constexpr uint32_t kSegmentVersion = 1;
inline constexpr int kMaxRanks = 64;

// A rank's state; only the rank itself writes it. kEmpty -> kAttached -> one of the
// others, for good.
enum class RankState : uint32_t { kEmpty = 0, kAttached = 1, kLeft = 2, kAborted = 3, kFailed = 4 };

struct SegmentHeader {
  std::atomic<uint64_t> magic;  // kSegmentMagic once the rest is written
  uint32_t version;
  uint32_t world;
  uint64_t nonce[2];
  uint64_t chunk_bytes;
  uint64_t slots;
  uint64_t total_bytes;
  alignas(64) std::atomic<uint32_t> arrived;  // futex word: ranks attached
};

inline constexpr size_t kErrorTextBytes = 224;

struct alignas(64) RankControl {
  std::atomic<int32_t> pid;          // written before state becomes kAttached
  std::atomic<uint32_t> state;       // RankState
  std::atomic<uint32_t> doorbell;    // futex word, see Doorbell below
  std::atomic<uint32_t> sleeping;    // the rank is (about to be) asleep on doorbell
  std::atomic<uint32_t> error_code;  // ncclResult_t, written before state kFailed
  char error[kErrorTextBytes];       // what failed, written before state kFailed
};

struct alignas(64) RingControl {
  std::atomic<uint64_t> head;              // chunks the sender has written
  alignas(64) std::atomic<uint64_t> tail;  // chunks the receiver has consumed
};

// What each chunk of a message carries, so that the receiver can tell that the
// sender is in the call it expects (transfer.h fills and checks it).
struct ChunkHeader {
  uint32_t call;     // transfer.h's Call
  uint32_t type;     // ncclDataType_t
  uint64_t seq;      // message number on this ordered pair
  uint64_t ordinal;  // the sender's op number on the communicator (for messages)
  uint64_t count;    // elements of the call (its count argument)
  uint64_t bytes;    // bytes of the whole message
  int32_t root;      // root or peer of the call
  int32_t redop;     // ncclRedOp_t, or -1
  uint32_t length;   // payload bytes in this chunk
  uint32_t reserved;
  uint64_t offset;  // of this chunk in the message
};
static_assert(sizeof(ChunkHeader) <= 64);

class Segment {
 public:
  // Creates the segment `name` or opens the one another rank created, and waits
  // (polling `cancelled`, until `deadline`) until it is initialized. `chunk_bytes` and
  // `slots` are the creator's choice; an opener uses what the header says.
  static absl::StatusOr<std::unique_ptr<Segment>> CreateOrOpen(
      const std::string& name, int world, const uint64_t nonce[2], size_t chunk_bytes, size_t slots,
      absl::Time deadline, const std::function<bool()>& cancelled);

  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment();  // Unmaps.

  const std::string& name() const { return name_; }
  bool created() const { return created_; }
  int world() const { return world_; }
  size_t chunk_bytes() const { return chunk_bytes_; }
  size_t slots() const { return slots_; }

  SegmentHeader& header() const { return *reinterpret_cast<SegmentHeader*>(base_); }
  RankControl& control(int rank) const {
    return reinterpret_cast<RankControl*>(base_ + kControlsOffset)[rank];
  }
  RingControl& ring(int from, int to) const {
    return *reinterpret_cast<RingControl*>(Ring(from, to));
  }
  ChunkHeader& chunk_header(int from, int to, uint64_t index) const {
    return *reinterpret_cast<ChunkHeader*>(Slot(from, to, index));
  }
  char* chunk_data(int from, int to, uint64_t index) const {
    return Slot(from, to, index) + kChunkHeaderBytes;
  }

  static size_t TotalBytes(int world, size_t chunk_bytes, size_t slots);

 private:
  static constexpr size_t kControlsOffset = 4096;
  static constexpr size_t kChunkHeaderBytes = 64;

  Segment(std::string name, bool created, int world, size_t chunk_bytes, size_t slots, char* base,
          size_t bytes);
  char* Ring(int from, int to) const {
    return base_ + rings_offset_ + (from * world_ + to) * ring_bytes_;
  }
  char* Slot(int from, int to, uint64_t index) const {
    return Ring(from, to) + sizeof(RingControl) +
           (index % slots_) * (kChunkHeaderBytes + chunk_bytes_);
  }

  const std::string name_;
  const bool created_;
  const int world_;
  const size_t chunk_bytes_;
  const size_t slots_;
  char* const base_;
  const size_t bytes_;
  size_t rings_offset_ = 0;
  size_t ring_bytes_ = 0;
};

// Removes the name (the memory goes with the last mapping). Absent is fine.
void UnlinkSegment(const std::string& name);

// Futex waits on a word of the segment (shared between processes).
// Waits while `word` == `expected`, at most `timeout` (it may also wake early).
void FutexWait(std::atomic<uint32_t>& word, uint32_t expected, absl::Duration timeout);
void FutexWakeAll(std::atomic<uint32_t>& word);

// A rank's doorbell: peers Ring it after they change something the rank may wait for
// (data or space in a ring, their state); the rank Waits on it after finding nothing
// to do. A ring wakes the rank only if it announced that it sleeps.
void RingDoorbell(RankControl& control);
// Returns the doorbell value to pass to SleepOnDoorbell; call it before checking
// whether there is work, so that a ring after the check is not missed.
uint32_t PrepareToSleep(RankControl& control);
void SleepOnDoorbell(RankControl& control, uint32_t seen, absl::Duration timeout);

}  // namespace lockstep::cuda_cpu::nccl

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_NCCL_SEGMENT_H_
