#include "runtime/comm/testing/conformance.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/hash.h"
#include "common/status_macros.h"

namespace lockstep::comm::testing {
namespace {

// A value generator keyed by (seed, round, op, rank, peer): every rank can replay any
// other rank's inputs.
class Gen {
 public:
  Gen(uint64_t seed, int round, int op, int rank, int peer = 0)
      : state_(SplitMix64(SplitMix64(SplitMix64(SplitMix64(SplitMix64(seed) ^ round) ^ op) ^ rank) ^
                          peer)) {}

  uint64_t Next() { return state_ = SplitMix64(state_); }
  // Uniform in [lo, hi].
  int64_t Int(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(Next() % static_cast<uint64_t>(hi - lo + 1));
  }
  // Values that never overflow when up to 1024 ranks are summed.
  int64_t Value() { return Int(-(int64_t{1} << 50), int64_t{1} << 50); }
  float Float() { return static_cast<float>(Int(-1000000, 1000000)) / 1024.0f; }
  std::string Bytes(int64_t n) {
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>(Next() & 0xff);
    return s;
  }

 private:
  uint64_t state_;
};

enum OpSalt {
  kReduce = 1,
  kGather,
  kGatherBytes,
  kBroadcast,
  kGatherRoot,
  kToAll,
  kToAllV,
  kToAllBytes
};

absl::Status Mismatch(absl::string_view what, int round, int rank, absl::string_view detail) {
  return absl::InternalError(
      absl::StrCat("conformance: ", what, " round ", round, " on rank ", rank, ": ", detail));
}

template <typename T>
absl::Status CompareSpans(absl::string_view what, int round, int rank, absl::Span<const T> got,
                          absl::Span<const T> want) {
  if (got.size() != want.size()) {
    return Mismatch(what, round, rank,
                    absl::StrCat("size ", got.size(), ", expected ", want.size()));
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(got[i] == want[i])) {
      return Mismatch(what, round, rank,
                      absl::StrCat("element ", i, " is ", got[i], ", expected ", want[i]));
    }
  }
  return absl::OkStatus();
}

absl::Status CompareBytes(absl::string_view what, int round, int rank,
                          const std::vector<std::string>& got,
                          const std::vector<std::string>& want) {
  if (got.size() != want.size()) {
    return Mismatch(what, round, rank,
                    absl::StrCat(got.size(), " entries, expected ", want.size()));
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      return Mismatch(
          what, round, rank,
          absl::StrCat("entry ", i, " has ", got[i].size(), " bytes, expected ", want[i].size(),
                       (got[i].size() == want[i].size() ? " (same size, other content)" : "")));
    }
  }
  return absl::OkStatus();
}

class Checker {
 public:
  Checker(Communicator& comm, uint64_t seed, int round, absl::Duration timeout)
      : comm_(comm), seed_(seed), round_(round), world_(comm.world_size()), rank_(comm.rank()) {
    options_.timeout = timeout;
  }

  absl::Status AllReduce(ReduceOp op) {
    options_.tag = "conformance.allreduce";
    const int64_t n = Gen(seed_, round_, kReduce, 0).Int(1, 16);
    auto input = [&](int r) {
      Gen g(seed_, round_, kReduce + 100 * static_cast<int>(op), r);
      std::vector<int64_t> v(n);
      for (int64_t& x : v) x = g.Value();
      return v;
    };
    std::vector<int64_t> want = input(0);
    for (int r = 1; r < world_; ++r) {
      const std::vector<int64_t> in = input(r);
      for (int64_t i = 0; i < n; ++i) {
        want[i] = op == ReduceOp::kSum   ? want[i] + in[i]
                  : op == ReduceOp::kMin ? std::min(want[i], in[i])
                                         : std::max(want[i], in[i]);
      }
    }
    std::vector<int64_t> data = input(rank_);
    RETURN_IF_ERROR(comm_.AllReduce(absl::MakeSpan(data), op, options_));
    return CompareSpans<int64_t>("AllReduce", round_, rank_, data, want);
  }

  absl::Status AllGather() {
    options_.tag = "conformance.allgather";
    const int64_t n = Gen(seed_, round_, kGather, 0).Int(1, 8);
    std::vector<int64_t> want;
    std::vector<int64_t> mine;
    for (int r = 0; r < world_; ++r) {
      Gen g(seed_, round_, kGather, r + 1);
      for (int64_t i = 0; i < n; ++i) {
        want.push_back(g.Value());
        if (r == rank_) mine.push_back(want.back());
      }
    }
    std::vector<int64_t> out(n * world_, -1);
    RETURN_IF_ERROR(comm_.AllGather(mine, absl::MakeSpan(out), options_));
    return CompareSpans<int64_t>("AllGather", round_, rank_, out, want);
  }

  // Rank r's variable-size payload for `op`: empty for about one rank in five, else
  // small (up to 200 bytes), except that in odd rounds one rank sends more than 256
  // bytes (transports may carry small payloads in a different way than large ones).
  std::string Payload(int op, int r, int peer = 0) {
    Gen g(seed_, round_, op, r, peer);
    int64_t size = g.Int(0, 4) == 0 ? 0 : g.Int(1, 200);
    if (round_ % 2 == 1 && r == (round_ / 2) % world_) size = 257 + g.Int(0, 700);
    return g.Bytes(size);
  }

  absl::Status AllGatherBytes() {
    options_.tag = "conformance.allgather_bytes";
    std::vector<std::string> want;
    for (int r = 0; r < world_; ++r) want.push_back(Payload(kGatherBytes, r));
    ASSIGN_OR_RETURN(std::vector<std::string> got, comm_.AllGatherBytes(want[rank_], options_));
    return CompareBytes("AllGatherBytes", round_, rank_, got, want);
  }

  absl::Status Broadcast() {
    options_.tag = "conformance.broadcast";
    const int root = round_ % world_;
    // Non-roots start with their own (differently sized) value, which must be replaced.
    std::string data = Payload(kBroadcast, rank_);
    const std::string want = Payload(kBroadcast, root);
    RETURN_IF_ERROR(comm_.Broadcast(&data, root, options_));
    return CompareBytes("Broadcast", round_, rank_, {data}, {want});
  }

  absl::Status Gather() {
    options_.tag = "conformance.gather";
    const int root = (round_ + 1) % world_;
    std::vector<std::string> want;
    if (rank_ == root) {
      for (int r = 0; r < world_; ++r) want.push_back(Payload(kGatherRoot, r));
    }
    ASSIGN_OR_RETURN(std::vector<std::string> got,
                     comm_.Gather(Payload(kGatherRoot, rank_), root, options_));
    return CompareBytes("Gather", round_, rank_, got, want);
  }

  absl::Status AllToAll() {
    options_.tag = "conformance.alltoall";
    const int64_t n = Gen(seed_, round_, kToAll, 0).Int(1, 4);
    // Block of rank s destined to rank r.
    auto block = [&](int s, int r) {
      Gen g(seed_, round_, kToAll, s + 1, r);
      std::vector<int64_t> v(n);
      for (int64_t& x : v) x = g.Value();
      return v;
    };
    std::vector<int64_t> send;
    std::vector<int64_t> want;
    for (int r = 0; r < world_; ++r) {
      const std::vector<int64_t> out = block(rank_, r);
      const std::vector<int64_t> in = block(r, rank_);
      send.insert(send.end(), out.begin(), out.end());
      want.insert(want.end(), in.begin(), in.end());
    }
    std::vector<int64_t> recv(send.size(), -1);
    RETURN_IF_ERROR(comm_.AllToAll(send, absl::MakeSpan(recv), options_));
    return CompareSpans<int64_t>("AllToAll", round_, rank_, recv, want);
  }

  absl::Status AllToAllV() {
    options_.tag = "conformance.alltoallv";
    // Floats rank s sends to rank r: a count in [0, 40], zero for about one pair in five.
    auto block = [&](int s, int r) {
      Gen g(seed_, round_, kToAllV, s + 1, r);
      const int64_t count = g.Int(0, 4) == 0 ? 0 : g.Int(1, 40);
      std::vector<float> v(count);
      for (float& x : v) x = g.Float();
      return v;
    };
    std::vector<float> send;
    std::vector<float> want;
    std::vector<int64_t> send_counts;
    std::vector<int64_t> recv_counts;
    for (int r = 0; r < world_; ++r) {
      const std::vector<float> out = block(rank_, r);
      const std::vector<float> in = block(r, rank_);
      send.insert(send.end(), out.begin(), out.end());
      want.insert(want.end(), in.begin(), in.end());
      send_counts.push_back(out.size());
      recv_counts.push_back(in.size());
    }
    std::vector<float> recv(want.size(), -1.0f);
    RETURN_IF_ERROR(
        comm_.AllToAllV(send, send_counts, absl::MakeSpan(recv), recv_counts, options_));
    return CompareSpans<float>("AllToAllV", round_, rank_, recv, want);
  }

  absl::Status AllToAllBytes() {
    options_.tag = "conformance.alltoall_bytes";
    std::vector<std::string> send;
    std::vector<std::string> want;
    for (int r = 0; r < world_; ++r) {
      send.push_back(Payload(kToAllBytes, rank_, r));
      want.push_back(Payload(kToAllBytes, r, rank_));
    }
    ASSIGN_OR_RETURN(std::vector<std::string> got, comm_.AllToAllBytes(send, options_));
    return CompareBytes("AllToAllBytes", round_, rank_, got, want);
  }

  absl::Status Barrier() {
    options_.tag = "conformance.barrier";
    return comm_.Barrier(options_);
  }

 private:
  Communicator& comm_;
  const uint64_t seed_;
  const int round_;
  const int world_;
  const int rank_;
  CallOptions options_;
};

}  // namespace

absl::Status RunConformance(Communicator& comm, uint64_t seed, int rounds, absl::Duration timeout) {
  for (int round = 0; round < rounds; ++round) {
    Checker check(comm, seed, round, timeout);
    RETURN_IF_ERROR(check.AllReduce(ReduceOp::kSum));
    RETURN_IF_ERROR(check.AllReduce(ReduceOp::kMin));
    RETURN_IF_ERROR(check.AllReduce(ReduceOp::kMax));
    RETURN_IF_ERROR(check.AllGather());
    RETURN_IF_ERROR(check.AllGatherBytes());
    RETURN_IF_ERROR(check.Broadcast());
    RETURN_IF_ERROR(check.Gather());
    RETURN_IF_ERROR(check.AllToAll());
    RETURN_IF_ERROR(check.AllToAllV());
    RETURN_IF_ERROR(check.AllToAllBytes());
    RETURN_IF_ERROR(check.Barrier());
  }
  return absl::OkStatus();
}

}  // namespace lockstep::comm::testing
