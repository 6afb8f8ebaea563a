// FakeTransceiver: a Transceiver that moves no bytes but keeps the timing and failure
// behaviour of a real one, on an injected clock with a seeded latency distribution and
// failure rate, so the generation-side states (waiting for KV, receiving, received) and
// the context-side claims are exercised deterministically.
//
// A receive completes `latency` after it starts (uniform in [min, max]), or fails with
// probability `failure_rate`, or expires at its deadline; a send (claim) completes when
// the fake pull does, or expires at its lease. StartSend itself may refuse a send (as a
// real transceiver does at shutdown or on a duplicate claim), with probability
// `send_refusal_rate` or when `refuse_send` says so. Events come out of Poll in time
// order. Every injected failure and refusal is recorded, so a test can tell injected
// faults from real ones.
//
// With `transport` kUcx an injected failure is one of the UCX data plane's faults
// (docs/transfer-ucx.md), drawn evenly, each ending as the real transport ends it and
// never after the receive's deadline: the context rank gone mid-get (Unavailable, part
// way through the transfer), an endpoint error (Unavailable, at once), a registration
// failure (the offer is refused and the pull falls back to TCP: it succeeds, taking a
// second latency; recorded as a fallback, not a failure) and a get that never completes
// (DeadlineExceeded at the deadline).
//
// Thread safety: single-threaded (the executor thread).
#ifndef LOCKSTEP_RUNTIME_TRANSFER_FAKE_TRANSCEIVER_H_
#define LOCKSTEP_RUNTIME_TRANSFER_FAKE_TRANSCEIVER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "runtime/testing/block_write_tracker.h"
#include "runtime/transfer/transceiver.h"

namespace lockstep::transfer {

// Which data plane's faults an injected transfer failure models.
enum class FakeTransport { kTcp, kUcx };

struct FakeTransceiverOptions {
  uint64_t seed = 0;
  absl::Duration min_latency = absl::Milliseconds(1);
  absl::Duration max_latency = absl::Milliseconds(20);
  double failure_rate = 0.0;
  FakeTransport transport = FakeTransport::kTcp;
  // StartSend refuses (Unavailable) with this probability, or when the predicate says
  // so (checked first; for scripted tests).
  double send_refusal_rate = 0.0;
  std::function<bool(RequestId)> refuse_send;
  // When set, a receive into a block that an uncollected engine batch holds is refused
  // (Internal): the executor must never hand such blocks to a receive.
  const engine::BlockWriteTracker* tracker = nullptr;
};

// The UCX fault an injected failure models (FakeTransport::kUcx).
enum class UcxFault { kNone, kPeerGoneMidGet, kEndpointError, kRegistrationFailure, kGetStuck };

// A failure the fake injected: a transfer that will fail, a refused send, or (UCX) a
// transfer that falls back to another transport and succeeds.
struct InjectedFault {
  enum class Kind { kTransferFailure, kSendRefusal, kTransferFallback };
  Kind kind;
  RequestId id;
  UcxFault ucx = UcxFault::kNone;
};

class FakeTransceiver : public Transceiver {
 public:
  FakeTransceiver(const FakeTransceiverOptions& options, Clock* clock);

  absl::Status StartSend(const SendSpec& spec) override;
  absl::Status StartReceive(const ReceiveSpec& spec) override;
  std::vector<TransferEvent> Poll() override;
  void Cancel(RequestId id) override;
  int64_t InFlight() const override { return static_cast<int64_t>(pending_.size()); }

  int64_t started() const { return started_; }
  // Every injected fault so far, in order.
  const std::vector<InjectedFault>& injected() const { return injected_; }

 private:
  struct Pending {
    TransferKind kind;
    uint64_t generation;
    absl::Time at;
    absl::Status status;
  };
  absl::Duration Latency();
  double Uniform();
  absl::Status Start(TransferKind kind, RequestId id, uint64_t generation, absl::Time limit,
                     absl::Status expiry);
  // A UCX fault for the transfer `p` of `id` started at `start`, ending by `limit`.
  void InjectUcxFault(RequestId id, absl::Time start, absl::Time limit, Pending& p);

  const FakeTransceiverOptions options_;
  Clock* clock_;
  std::mt19937_64 rng_;
  // By id; at most one transfer per id.
  std::map<RequestId, Pending> pending_;
  std::vector<TransferEvent> cancelled_;
  int64_t started_ = 0;
  std::vector<InjectedFault> injected_;
};

}  // namespace lockstep::transfer

#endif  // LOCKSTEP_RUNTIME_TRANSFER_FAKE_TRANSCEIVER_H_
