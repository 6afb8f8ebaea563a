#include "runtime/cuda/cpu/nccl/transfer.h"

#include <signal.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <thread>

#include "absl/strings/str_cat.h"
#include "runtime/cuda/cpu/nccl/reduce.h"

namespace lockstep::cuda_cpu::nccl {
namespace {

// Passes over the rings without progress before sleeping on the doorbell.
constexpr int kSpinPasses = 32;
// A sleeper re-checks its peers' liveness (pidfds) this often.
constexpr absl::Duration kLivenessInterval = absl::Milliseconds(20);

const char* CallName(Call call, bool sender) {
  switch (call) {
    case Call::kSendRecv:
      return sender ? "ncclSend" : "ncclRecv";
    case Call::kAllReduce:
      return "ncclAllReduce";
    case Call::kAllGather:
      return "ncclAllGather";
    case Call::kReduceScatter:
      return "ncclReduceScatter";
    case Call::kBroadcast:
      return "ncclBroadcast";
  }
  return "an unknown call";
}

bool Matches(const CallInfo& sent, const CallInfo& expected) {
  if (sent.call != expected.call || sent.type != expected.type || sent.count != expected.count) {
    return false;
  }
  if (sent.call == Call::kSendRecv) return true;  // the ring says who
  return sent.root == expected.root && sent.redop == expected.redop;
}

// One transfer in progress.
struct Progress {
  Transfer* transfer;
  uint64_t seq;     // its message number on the pair
  size_t done = 0;  // bytes moved
  bool started = false;
  bool finished() const { return started && done == transfer->bytes; }
};

}  // namespace

std::string DescribeCall(const CallInfo& info, bool sender) {
  std::string out =
      absl::StrCat(CallName(info.call, sender), "(", info.count, " x ", TypeName(info.type));
  switch (info.call) {
    case Call::kSendRecv:
      absl::StrAppend(&out, sender ? " to rank " : " from rank ", info.root);
      break;
    case Call::kAllReduce:
    case Call::kReduceScatter:
      absl::StrAppend(&out, ", ", RedOpName(info.redop));
      break;
    case Call::kBroadcast:
      absl::StrAppend(&out, ", root ", info.root);
      break;
    case Call::kAllGather:
      break;
  }
  return out + ")";
}

absl::Status RunTransfers(CommState& comm, uint64_t ordinal, std::vector<Transfer>& transfers,
                          bool kill_after_first_chunk) {
  Segment& segment = *comm.segment;
  const int me = comm.rank;
  const size_t chunk = segment.chunk_bytes();
  const uint64_t slots = segment.slots();
  std::vector<std::deque<Progress>> sends(comm.world);
  std::vector<std::deque<Progress>> recvs(comm.world);
  for (Transfer& t : transfers) {
    if (t.send) {
      sends[t.peer].push_back({&t, comm.send_seq[t.peer]++});
    } else {
      recvs[t.peer].push_back({&t, comm.recv_seq[t.peer]++});
    }
  }

  int idle_passes = 0;
  for (;;) {
    bool progressed = false;
    bool pending = false;
    for (int p = 0; p < comm.world; ++p) {
      // Sends: fill the free slots of the ring to p.
      RingControl& out = segment.ring(me, p);
      while (!sends[p].empty()) {
        Progress& s = sends[p].front();
        const uint64_t head = out.head.load(std::memory_order_relaxed);
        if (head - out.tail.load(std::memory_order_acquire) >= slots) break;
        const size_t length = std::min(chunk, s.transfer->bytes - s.done);
        ChunkHeader& h = segment.chunk_header(me, p, head);
        h.call = static_cast<uint32_t>(s.transfer->info.call);
        h.type = s.transfer->info.type;
        h.seq = s.seq;
        h.ordinal = ordinal;
        h.count = s.transfer->info.count;
        h.bytes = s.transfer->bytes;
        h.root = s.transfer->info.root;
        h.redop = s.transfer->info.redop;
        h.length = static_cast<uint32_t>(length);
        h.offset = s.done;
        if (length > 0)
          std::memcpy(segment.chunk_data(me, p, head), s.transfer->data + s.done, length);
        out.head.store(head + 1, std::memory_order_release);
        RingDoorbell(segment.control(p));
        s.done += length;
        s.started = true;
        progressed = true;
        if (kill_after_first_chunk) raise(SIGKILL);  // injected: killed mid-operation
        if (s.finished()) sends[p].pop_front();
      }
      // Receives: drain the ring from p.
      RingControl& in = segment.ring(p, me);
      while (!recvs[p].empty()) {
        Progress& r = recvs[p].front();
        const uint64_t tail = in.tail.load(std::memory_order_relaxed);
        if (tail == in.head.load(std::memory_order_acquire)) break;
        const ChunkHeader h = segment.chunk_header(p, me, tail);
        CallInfo sent;
        sent.call = static_cast<Call>(h.call);
        sent.type = static_cast<int>(h.type);
        sent.count = h.count;
        sent.root = h.root;
        sent.redop = h.redop;
        if (!Matches(sent, r.transfer->info) || h.bytes != r.transfer->bytes) {
          return absl::InvalidArgumentError(absl::StrCat(
              "mismatched calls: rank ", p, " called ", DescribeCall(sent, /*sender=*/true),
              " as its operation #", h.ordinal, " while rank ", me, " called ",
              DescribeCall(r.transfer->info, /*sender=*/false), " as its operation #", ordinal,
              " (every rank must make the same calls in the same order)"));
        }
        if (h.seq != r.seq || h.offset != r.done || h.length > r.transfer->bytes - r.done) {
          return absl::InternalError(absl::StrCat("rank ", p, " sent message ", h.seq, " at ",
                                                  h.offset, " (", h.length, " bytes) where ", me,
                                                  " expected message ", r.seq, " at ", r.done));
        }
        if (h.length > 0) {
          std::memcpy(r.transfer->data + r.done, segment.chunk_data(p, me, tail), h.length);
        }
        in.tail.store(tail + 1, std::memory_order_release);
        RingDoorbell(segment.control(p));
        r.done += h.length;
        r.started = true;
        progressed = true;
        if (r.finished()) recvs[p].pop_front();
      }
      pending = pending || !sends[p].empty() || !recvs[p].empty();
    }
    if (!pending) return absl::OkStatus();
    if (comm.aborted.load()) return absl::CancelledError("aborted");
    if (progressed) {
      idle_passes = 0;
      continue;
    }
    if (++idle_passes < kSpinPasses) {
      std::this_thread::yield();
      continue;
    }
    // Nothing moved: look for a departed peer among those this rank waits for, then
    // sleep until a peer rings or the liveness interval passes.
    const uint32_t seen = PrepareToSleep(comm.me());
    bool ready = false;
    for (int p = 0; p < comm.world && !ready; ++p) {
      if (!sends[p].empty()) {
        const RingControl& out = segment.ring(me, p);
        if (out.head.load() - out.tail.load() < slots) {
          ready = true;
          break;
        }
        if (absl::Status gone = comm.CheckPeer(p); !gone.ok()) return gone;
      }
      if (!recvs[p].empty()) {
        const RingControl& in = segment.ring(p, me);
        if (in.tail.load() != in.head.load()) {
          ready = true;
          break;
        }
        if (absl::Status gone = comm.CheckPeer(p); !gone.ok()) return gone;
      }
    }
    if (comm.aborted.load()) return absl::CancelledError("aborted");
    if (!ready) SleepOnDoorbell(comm.me(), seen, kLivenessInterval);
    idle_passes = 0;
  }
}

}  // namespace lockstep::cuda_cpu::nccl
