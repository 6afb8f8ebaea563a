// FakePrimitives: CollectivePrimitives for ranks that are threads of one process, so
// that NcclCommunicator's protocol runs in CPU tests (no GPU, no NCCL).
//
//   std::vector<std::unique_ptr<FakePrimitives>> ranks = MakeFakePrimitivesGroup(4);
//   ranks[1]->HangAt(3);  // rank 1's 4th operation never completes
//   NcclCommunicator comm(std::move(ranks[r]));  // one per thread
//
// Like NCCL, every operation is collective and needs the same sizes on every rank;
// unlike NCCL (which hangs or corrupts memory), the fake checks them and fails with
// Internal("fake primitives ...: NCCL would hang or corrupt memory here"), so a
// protocol that ever hands mismatched sizes to its primitives fails its tests. Each
// operation posts a copy of what this rank sends, waits until every rank posted the
// same operation (or the deadline: DeadlineExceeded naming the missing ranks; or a
// missing rank aborted or left: Unavailable), then reads its part from the posts.
//
// Faults, for the fault table of NcclCommunicator: HangAt(k) (the k-th operation of
// this rank posts but never completes: DeadlineExceeded at its deadline) and FailAt(k,
// error) (it posts, then fails with `error`: an asynchronous NCCL error). aborts()
// counts Abort calls. Destroying a rank leaves the group (peers: Unavailable).
//
// Thread safety: each FakePrimitives is used by one thread at a time; HangAt, FailAt
// and aborts() may be called from any thread.
#ifndef LOCKSTEP_RUNTIME_COMM_TESTING_FAKE_PRIMITIVES_H_
#define LOCKSTEP_RUNTIME_COMM_TESTING_FAKE_PRIMITIVES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "runtime/comm/collective_primitives.h"

namespace lockstep::comm::testing {

class FakeFabric;

class FakePrimitives final : public CollectivePrimitives {
 public:
  FakePrimitives(std::shared_ptr<FakeFabric> fabric, int rank);
  FakePrimitives(const FakePrimitives&) = delete;
  FakePrimitives& operator=(const FakePrimitives&) = delete;
  ~FakePrimitives() override;

  int rank() const override { return rank_; }
  int world_size() const override;
  const std::string& name() const override;

  absl::Status AllGatherFixed(absl::string_view in, char* out, absl::Time deadline) override;
  absl::Status Broadcast(char* data, size_t size, int root, absl::Time deadline) override;
  absl::Status GroupedSendRecv(absl::Span<const PeerTransfer> transfers,
                               absl::Time deadline) override;
  void Abort() override;

  // Faults at this rank's operation number k (0-based, counting every operation).
  void HangAt(int64_t k);
  void FailAt(int64_t k, absl::Status error);
  // Abort calls so far, and operations started so far.
  int aborts() const;
  int64_t operations() const;

 private:
  std::shared_ptr<FakeFabric> fabric_;
  const int rank_;
};

// The `world` ranks of one group; rank r at index r.
std::vector<std::unique_ptr<FakePrimitives>> MakeFakePrimitivesGroup(
    int world, absl::string_view name = "fake");

}  // namespace lockstep::comm::testing

#endif  // LOCKSTEP_RUNTIME_COMM_TESTING_FAKE_PRIMITIVES_H_
