#include "runtime/comm/testing/fake_primitives.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace lockstep::comm::testing {

// One rank's side of one operation: a copy of everything it sends.
struct FakePost {
  enum class Kind { kAllGather, kBroadcast, kSendRecv };
  Kind kind = Kind::kAllGather;
  size_t size = 0;  // all-gather: bytes per rank; broadcast: bytes
  int root = -1;
  std::string data;                 // all-gather: the input; broadcast: the root's data
  std::vector<std::string> to;      // send/recv: bytes for each peer
  std::vector<int64_t> recv_bytes;  // send/recv: bytes expected from each peer
};

// The state shared by the ranks of one fake group, under one mutex.
class FakeFabric {
 public:
  FakeFabric(int world, std::string name)
      : world_(world),
        name_(std::move(name)),
        ops_(world, 0),
        gone_(world),
        aborts_(world, 0),
        hangs_(world),
        fails_(world) {}

  int world() const { return world_; }
  const std::string& name() const { return name_; }

  // Posts rank's side of its next operation, waits for every rank's, and calls
  // read(posts) (posts[r]: rank r's side).
  absl::Status Run(int rank, FakePost post, absl::Time deadline,
                   absl::FunctionRef<void(absl::Span<const FakePost* const>)> read) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!gone_[rank].empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("fake primitives of group '", name_, "': rank ", rank, " ", gone_[rank]));
    }
    const int64_t k = ops_[rank]++;
    Round& round = rounds_[k];
    round.posts.resize(world_);
    round.posts[rank] = std::move(post);
    cv_.notify_all();
    auto leave = [&] {
      if (++round.done == world_) rounds_.erase(k);
    };
    if (auto it = fails_[rank].find(k); it != fails_[rank].end()) {
      leave();
      return it->second;
    }
    const auto until = absl::ToChronoTime(deadline);
    if (hangs_[rank].count(k) > 0) {
      cv_.wait_until(lock, until, [&] { return aborts_[rank] > 0; });
      leave();
      return absl::DeadlineExceededError(
          absl::StrCat("operation ", k, " of fake group '", name_, "' never completed"));
    }
    auto missing = [&] {
      std::vector<int> out;
      for (int r = 0; r < world_; ++r) {
        if (!round.posts[r].has_value()) out.push_back(r);
      }
      return out;
    };
    auto settled = [&] {
      for (int r : missing()) {
        if (gone_[r].empty()) return false;
      }
      return true;
    };
    cv_.wait_until(lock, until, settled);
    if (const std::vector<int> late = missing(); !late.empty()) {
      leave();
      for (int r : late) {
        if (!gone_[r].empty()) {
          return absl::UnavailableError(
              absl::StrCat("peer rank ", r, " of fake group '", name_, "' ", gone_[r]));
        }
      }
      return absl::DeadlineExceededError(absl::StrCat(
          "rank(s) ", absl::StrJoin(late, ","), " of fake group '", name_, "' did not arrive"));
    }
    std::vector<const FakePost*> posts(world_);
    for (int r = 0; r < world_; ++r) posts[r] = &*round.posts[r];
    absl::Status agreed = Agree(k, posts);
    if (agreed.ok()) read(posts);
    leave();
    return agreed;
  }

  void Abort(int rank) {
    std::lock_guard<std::mutex> lock(mu_);
    ++aborts_[rank];
    gone_[rank] = "aborted";
    cv_.notify_all();
  }
  void Leave(int rank) {
    std::lock_guard<std::mutex> lock(mu_);
    if (gone_[rank].empty()) gone_[rank] = "left the group";
    cv_.notify_all();
  }
  void HangAt(int rank, int64_t k) {
    std::lock_guard<std::mutex> lock(mu_);
    hangs_[rank].insert(k);
  }
  void FailAt(int rank, int64_t k, absl::Status error) {
    std::lock_guard<std::mutex> lock(mu_);
    fails_[rank][k] = std::move(error);
  }
  int aborts(int rank) {
    std::lock_guard<std::mutex> lock(mu_);
    return aborts_[rank];
  }
  int64_t operations(int rank) {
    std::lock_guard<std::mutex> lock(mu_);
    return ops_[rank];
  }

 private:
  struct Round {
    std::vector<std::optional<FakePost>> posts;
    int done = 0;
  };

  // What NCCL needs and cannot check: the same operation and sizes on every rank.
  absl::Status Agree(int64_t k, absl::Span<const FakePost* const> posts) const {
    auto bad = [&](const std::string& what) {
      return absl::InternalError(absl::StrCat("fake primitives of group '", name_, "', operation ",
                                              k, ": ", what,
                                              ": NCCL would hang or corrupt memory here"));
    };
    const FakePost& p0 = *posts[0];
    for (int r = 1; r < world_; ++r) {
      const FakePost& p = *posts[r];
      if (p.kind != p0.kind) return bad(absl::StrCat("rank ", r, " runs another operation"));
      if (p.kind != FakePost::Kind::kSendRecv && (p.size != p0.size || p.root != p0.root)) {
        return bad(absl::StrCat("rank 0 passes ", p0.size, " bytes (root ", p0.root, "), rank ", r,
                                " ", p.size, " bytes (root ", p.root, ")"));
      }
    }
    if (p0.kind != FakePost::Kind::kSendRecv) return absl::OkStatus();
    for (int s = 0; s < world_; ++s) {
      for (int r = 0; r < world_; ++r) {
        if (s == r) continue;
        const int64_t sent = posts[s]->to[r].size();
        if (sent != posts[r]->recv_bytes[s]) {
          return bad(absl::StrCat("rank ", s, " sends ", sent, " bytes to rank ", r,
                                  ", which receives ", posts[r]->recv_bytes[s]));
        }
      }
    }
    return absl::OkStatus();
  }

  const int world_;
  const std::string name_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int64_t, Round> rounds_;
  std::vector<int64_t> ops_;
  std::vector<std::string> gone_;  // per rank: "" while a member, else why not
  std::vector<int> aborts_;
  std::vector<std::set<int64_t>> hangs_;
  std::vector<std::map<int64_t, absl::Status>> fails_;
};

FakePrimitives::FakePrimitives(std::shared_ptr<FakeFabric> fabric, int rank)
    : fabric_(std::move(fabric)), rank_(rank) {}

FakePrimitives::~FakePrimitives() { fabric_->Leave(rank_); }

int FakePrimitives::world_size() const { return fabric_->world(); }
const std::string& FakePrimitives::name() const { return fabric_->name(); }

absl::Status FakePrimitives::AllGatherFixed(absl::string_view in, char* out, absl::Time deadline) {
  FakePost post;
  post.kind = FakePost::Kind::kAllGather;
  post.size = in.size();
  post.data = std::string(in);
  return fabric_->Run(rank_, std::move(post), deadline, [&](absl::Span<const FakePost* const> all) {
    for (size_t r = 0; r < all.size(); ++r) {
      if (!in.empty()) std::memcpy(out + r * in.size(), all[r]->data.data(), in.size());
    }
  });
}

absl::Status FakePrimitives::Broadcast(char* data, size_t size, int root, absl::Time deadline) {
  FakePost post;
  post.kind = FakePost::Kind::kBroadcast;
  post.size = size;
  post.root = root;
  if (rank_ == root) post.data = std::string(data, size);
  return fabric_->Run(rank_, std::move(post), deadline, [&](absl::Span<const FakePost* const> all) {
    if (rank_ != root && size > 0) std::memcpy(data, all[root]->data.data(), size);
  });
}

absl::Status FakePrimitives::GroupedSendRecv(absl::Span<const PeerTransfer> transfers,
                                             absl::Time deadline) {
  const int world = fabric_->world();
  FakePost post;
  post.kind = FakePost::Kind::kSendRecv;
  post.to.resize(world);
  post.recv_bytes.assign(world, 0);
  for (const PeerTransfer& t : transfers) {
    if (t.peer < 0 || t.peer >= world || t.peer == rank_) {
      return absl::InvalidArgumentError(absl::StrCat("fake send/recv to peer ", t.peer));
    }
    post.to[t.peer] = std::string(t.send);
    post.recv_bytes[t.peer] = static_cast<int64_t>(t.recv_bytes);
  }
  return fabric_->Run(rank_, std::move(post), deadline, [&](absl::Span<const FakePost* const> all) {
    for (const PeerTransfer& t : transfers) {
      if (t.recv_bytes > 0) std::memcpy(t.recv, all[t.peer]->to[rank_].data(), t.recv_bytes);
    }
  });
}

void FakePrimitives::Abort() { fabric_->Abort(rank_); }
void FakePrimitives::HangAt(int64_t k) { fabric_->HangAt(rank_, k); }
void FakePrimitives::FailAt(int64_t k, absl::Status error) {
  fabric_->FailAt(rank_, k, std::move(error));
}
int FakePrimitives::aborts() const { return fabric_->aborts(rank_); }
int64_t FakePrimitives::operations() const { return fabric_->operations(rank_); }

std::vector<std::unique_ptr<FakePrimitives>> MakeFakePrimitivesGroup(int world,
                                                                     absl::string_view name) {
  auto fabric = std::make_shared<FakeFabric>(world, std::string(name));
  std::vector<std::unique_ptr<FakePrimitives>> ranks;
  for (int r = 0; r < world; ++r) ranks.push_back(std::make_unique<FakePrimitives>(fabric, r));
  return ranks;
}

}  // namespace lockstep::comm::testing
