// ShmCall: one collective call of a ShmCommunicator, as rounds of its ShmGroup.
//
// Every operation is the same exchange: each rank publishes a header (the call's
// fingerprint, op, tag, arguments, up to 2 * world int64 fields, its payload size)
// and a payload (bytes that some or all peers read). Round 0 carries the header and
// the first chunk_bytes of every payload; if a payload is longer, rounds 1, 2, ...
// carry the next chunks (every rank derives the same round count from the headers).
// After round 0 every rank checks that all ranks called the same op with the same tag
// and arguments (Internal "collective desync: rank 0 called X, rank r called Y"), and
// that all arguments were valid (InvalidArgument, naming the rank); every rank sees
// the same headers, so all reach the same verdict. Later rounds check that no peer
// has moved on to another call.
//
// Direct calls (ShmOptions::direct_copy, for ops that read payloads through
// Transfer(reads) only): a rank whose payload is large publishes its address instead
// of its first chunk; if any rank did, every receiver reads every peer's bytes in
// place (shm_direct.h), and a second round keeps each sender in the call until every
// receiver is done with its buffer.
//
// Internal to ShmCommunicator. Thread safety: one call, one thread.
#ifndef LOCKSTEP_RUNTIME_COMM_SHM_CALL_H_
#define LOCKSTEP_RUNTIME_COMM_SHM_CALL_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "runtime/comm/collective_op.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/shm_group.h"

namespace lockstep::comm::internal {

class ShmCall {
 public:
  // `group` and `options.tag` must outlive the call.
  ShmCall(ShmGroup& group, CollectiveOp op, const CallOptions& options);

  // Round 0 of the call `spec` (collective_op.h; its op must be this call's): its
  // fingerprint and arguments, and `fields` (at most 2 * world), are published for
  // the peers; spec.local is this rank's argument error (then it publishes no payload
  // and returns spec.local after the round, so that the peers learn of it). `payload` must stay
  // valid until Transfer returns. Bytes [private_offset, private_offset + private_length) of it are
  // read by this rank only (its own block of an all-to-all): they never go through the segment.
  // `allow_direct`: the op reads payloads only through Transfer(reads).
  absl::Status Start(const CallSpec& spec, absl::Span<const int64_t> fields,
                     absl::string_view payload, bool allow_direct = false,
                     int64_t private_offset = 0, int64_t private_length = 0);

  // After Start: rank r's fields and payload size.
  int64_t field(int r, int i) const { return fields_[r][i]; }
  int64_t payload_bytes(int r) const { return sizes_[r]; }

  // Runs the payload rounds (round 0's is already published) and calls
  // consume(begin, chunks) once per round, where chunks[r] holds rank r's payload
  // bytes from `begin` on (up to chunk_bytes of them, fewer at the end).
  using ChunkFn = absl::FunctionRef<void(int64_t begin, absl::Span<const char* const> chunks)>;
  absl::Status Transfer(ChunkFn consume);

  // The common case: copies bytes [offset, offset + length) of rank `from`'s payload
  // to `dst`, for every read (this rank's own bytes straight from its payload).
  struct Read {
    int from = 0;
    int64_t offset = 0;
    int64_t length = 0;
    char* dst = nullptr;
  };
  absl::Status Transfer(absl::Span<const Read> reads);

  int64_t chunk_bytes() const { return chunk_; }

 private:
  // Writes this rank's round header for round `round` into buffer `parity`.
  void WriteHeader(uint64_t parity, int64_t round, absl::Span<const int64_t> args);
  // Copies this rank's payload bytes of the round starting at `begin` (except the
  // private range) into its buffer `parity`.
  void CopyIn(uint64_t parity, int64_t begin);
  // Publishes this rank's buffer and waits for the peers' (see ShmGroup::Wait).
  absl::Status PublishAndWait(ShmGroup::Wait wait = ShmGroup::Wait::kShort);
  absl::Status Desync(int a, int b, uint64_t parity) const;
  // Runs a later round: publishes this rank's header (and its chunk of the payload
  // starting at `begin`, unless direct), waits, checks that every peer is in this
  // round of this call. Sets *parity to the round's buffer.
  absl::Status NextRound(int64_t round, int64_t begin, uint64_t* parity,
                         ShmGroup::Wait wait = ShmGroup::Wait::kShort);
  absl::Status TransferDirect(absl::Span<const Read> reads);

  ShmGroup& group_;
  const ShmSegment& segment_;
  const CollectiveOp op_;
  const absl::string_view tag_;
  const absl::Duration timeout_;
  const absl::Time deadline_;
  const int64_t chunk_;
  int64_t fp_ = 0;
  int64_t info_ = 0;
  absl::string_view payload_;
  int64_t private_begin_ = 0;
  int64_t private_end_ = 0;
  bool direct_ = false;  // this call reads payloads in place (agreed after round 0)
  uint64_t round0_parity_ = 0;
  int64_t rounds_ = 1;
  std::vector<const int64_t*> fields_;
  std::vector<int64_t> sizes_;
  std::vector<const char*> chunks_;
};

}  // namespace lockstep::comm::internal

#endif  // LOCKSTEP_RUNTIME_COMM_SHM_CALL_H_
