// UcxWorker between two workers of this process, over the transports UCX_TLS names
// (the BUILD file runs this test once with shm and once with tcp): gets, reads in
// place, and their faults; the calls are in ucx_worker_call_test.cc.
#include "runtime/transfer/ucx_worker.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/transfer/testing/ucx_workers.h"

namespace lockstep::transfer {
namespace {

using ::lockstep::testing::StatusIs;
using ::lockstep::testing::TestSeed;
using ::lockstep::transfer::testing::HeldOwner;
using ::lockstep::transfer::testing::MakeHeldOwner;
using ::lockstep::transfer::testing::MakeWorker;
using ::lockstep::transfer::testing::OverShm;
using ::lockstep::transfer::testing::RandomBytes;
using ::testing::HasSubstr;

#define ASSERT_OK(expr) LOCKSTEP_ASSERT_OK(expr)

// An owner ("context") and a reader ("generation") worker of this process; the seed is
// printed with any failure.
class UcxWorkerPairTest : public ::testing::Test {
 protected:
  void SetUp() override {
    owner_ = MakeWorker("context");
    reader_ = MakeWorker("generation");
    ASSERT_NE(owner_, nullptr);
    ASSERT_NE(reader_, nullptr);
  }

  const uint64_t seed_ = TestSeed();
  ::testing::ScopedTrace trace_{__FILE__, __LINE__, ::testing::Message() << "seed " << seed_};
  std::shared_ptr<UcxWorker> owner_;
  std::shared_ptr<UcxWorker> reader_;
};

// The tcp receive-segment default is set only where UCX may load tcp (elsewhere UCX
// warns that the setting is invalid).
TEST(UcxTlsTest, SaysWhetherTheListMayLoadTcp) {
  EXPECT_TRUE(UcxTlsMayUseTcp(nullptr));
  EXPECT_TRUE(UcxTlsMayUseTcp(""));
  EXPECT_TRUE(UcxTlsMayUseTcp("tcp,self"));
  EXPECT_TRUE(UcxTlsMayUseTcp("self,tcp:aux"));
  EXPECT_TRUE(UcxTlsMayUseTcp("all"));
  EXPECT_TRUE(UcxTlsMayUseTcp("^shm"));
  EXPECT_FALSE(UcxTlsMayUseTcp("shm,self"));
  EXPECT_FALSE(UcxTlsMayUseTcp("rc,sm,self"));
  EXPECT_FALSE(UcxTlsMayUseTcp("^tcp"));
  EXPECT_FALSE(UcxTlsMayUseTcp("^shm,tcp"));
  EXPECT_FALSE(UcxTlsMayUseTcp("tcpx"));
}

TEST_F(UcxWorkerPairTest, GetReadsARegisteredRegion) {
  for (size_t size : {size_t{1}, size_t{4096}, size_t{3} << 20}) {
    auto source = RandomBytes(size, seed_ + size);
    absl::StatusOr<std::unique_ptr<UcxRegion>> registered = owner_->Register(*source);
    ASSERT_OK(registered);
    std::unique_ptr<UcxRegion> region = std::move(*registered);
    EXPECT_EQ(region->size(), size);
    auto dest = std::make_shared<std::vector<std::byte>>(size);
    ASSERT_OK(reader_->Get(owner_->address(), region->rkey(), region->address(),
                           absl::MakeSpan(*dest), dest, absl::Now() + absl::Seconds(30), nullptr));
    EXPECT_TRUE(*dest == *source) << size << " bytes";
    // A part of the region, from an offset.
    auto part = std::make_shared<std::vector<std::byte>>(size / 2);
    ASSERT_OK(reader_->Get(owner_->address(), region->rkey(), region->address() + size / 4,
                           absl::MakeSpan(*part), part, absl::Now() + absl::Seconds(30), nullptr));
    EXPECT_TRUE(std::equal(part->begin(), part->end(), source->begin() + size / 4));
  }
  EXPECT_EQ(reader_->endpoints(), 1);  // reused
  // Over tcp UCX has no native get: the reads were sent by the owner instead of being
  // answered piecewise by an emulated get.
  if (!OverShm()) EXPECT_GT(reader_->fetches(), 0);
}

// A fetch names a range by its key: once the owner no longer serves the region (freed
// and unregistered), it sends nothing and the read fails as out of range instead of
// returning whatever the memory now holds.
TEST_F(UcxWorkerPairTest, AFetchOfARegionNoLongerServedIsRefused) {
  auto source = RandomBytes(1 << 16, 7);
  auto kept = RandomBytes(1 << 16, 8);
  absl::StatusOr<std::unique_ptr<UcxRegion>> gone = owner_->Register(*source);
  absl::StatusOr<std::unique_ptr<UcxRegion>> stays = owner_->Register(*kept);
  ASSERT_OK(gone);
  ASSERT_OK(stays);
  auto dest = std::make_shared<std::vector<std::byte>>(1 << 16);
  ASSERT_OK(reader_->Get(owner_->address(), (*gone)->rkey(), (*gone)->address(),
                         absl::MakeSpan(*dest), dest, absl::Now() + absl::Seconds(30), nullptr));
  if (reader_->fetches() == 0) GTEST_SKIP() << "UCX reads this peer with native gets";
  const std::string rkey = (*gone)->rkey();
  const uint64_t address = (*gone)->address();
  gone->reset();
  EXPECT_THAT(reader_->Get(owner_->address(), rkey, address, absl::MakeSpan(*dest), dest,
                           absl::Now() + absl::Seconds(30), nullptr),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("serves no UCX range")));
  // The refusal ends only that read: the endpoint still serves the kept region.
  ASSERT_OK(reader_->Get(owner_->address(), (*stays)->rkey(), (*stays)->address(),
                         absl::MakeSpan(*dest), dest, absl::Now() + absl::Seconds(30), nullptr));
  EXPECT_TRUE(*dest == *kept);
}

// Reads from several threads of one reader all complete: one of them progresses the
// worker on its own thread (the progress thread standing aside), and the others' reads
// complete through its progress or the progress thread's once it gives progress back.
TEST_F(UcxWorkerPairTest, ConcurrentReadsOfOneReaderAllComplete) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 5;
  constexpr size_t kSize = size_t{1} << 20;
  std::vector<std::shared_ptr<std::vector<std::byte>>> sources;
  std::vector<std::unique_ptr<UcxRegion>> regions;
  for (int i = 0; i < kThreads; ++i) {
    sources.push_back(RandomBytes(kSize, seed_ + i));
    absl::StatusOr<std::unique_ptr<UcxRegion>> region = owner_->Register(*sources.back());
    ASSERT_OK(region);
    regions.push_back(std::move(*region));
  }
  std::vector<absl::Status> failures(kThreads);
  std::vector<int> matched(kThreads, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      for (int round = 0; round < kRounds; ++round) {
        auto dest = std::make_shared<std::vector<std::byte>>(kSize);
        absl::Status got =
            reader_->Get(owner_->address(), regions[i]->rkey(), regions[i]->address(),
                         absl::MakeSpan(*dest), dest, absl::Now() + absl::Seconds(30), nullptr);
        if (!got.ok()) {
          failures[i] = got;
          return;
        }
        if (*dest == *sources[i]) ++matched[i];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int i = 0; i < kThreads; ++i) {
    EXPECT_THAT(failures[i], ::lockstep::testing::IsOk()) << "thread " << i;
    EXPECT_EQ(matched[i], kRounds) << "thread " << i;
  }
}

// A read in pieces hands every piece over once, in order, with its own bytes, and at
// most `in_flight` of them are asked for at once (over tcp each piece is a fetch).
TEST_F(UcxWorkerPairTest, GetInPiecesHandsEveryPieceOverInOrder) {
  std::mt19937_64 rng(seed_);
  std::vector<size_t> sizes;
  size_t total = 0;
  for (int i = 0; i < 9; ++i) {
    sizes.push_back(1 + rng() % (size_t{300} << 10));
    total += sizes.back();
  }
  auto source = RandomBytes(total, seed_);
  absl::StatusOr<std::unique_ptr<UcxRegion>> region = owner_->Register(*source);
  ASSERT_OK(region);
  for (int in_flight : {1, 3, 16}) {
    auto dest = std::make_shared<std::vector<std::byte>>(total);
    std::vector<size_t> handed;
    size_t at = 0;
    const int64_t fetches_before = reader_->fetches();
    UcxWorker::Pieces pieces{
        .sizes = sizes,
        .done = [&](size_t i, absl::Span<const std::byte> bytes) -> absl::Status {
          handed.push_back(i);
          EXPECT_EQ(bytes.size(), sizes[i]);
          EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), source->begin() + at)) << i;
          at += bytes.size();
          return absl::OkStatus();
        },
        .in_flight = in_flight};
    ASSERT_OK(reader_->GetInPieces(owner_->address(), (*region)->rkey(), (*region)->address(),
                                   absl::MakeSpan(*dest), pieces, dest,
                                   absl::Now() + absl::Seconds(30), nullptr));
    EXPECT_EQ(handed, std::vector<size_t>({0, 1, 2, 3, 4, 5, 6, 7, 8})) << in_flight;
    EXPECT_TRUE(*dest == *source) << in_flight;
    if (!OverShm()) EXPECT_EQ(reader_->fetches() - fetches_before, 9) << in_flight;
  }
  // Pieces that do not cover the read are refused before anything is asked for.
  auto dest = std::make_shared<std::vector<std::byte>>(total);
  EXPECT_THAT(reader_->GetInPieces(owner_->address(), (*region)->rkey(), (*region)->address(),
                                   absl::MakeSpan(*dest), {.sizes = {total - 1}}, dest,
                                   absl::Now() + absl::Seconds(30), nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("pieces")));
}

// The caller's error on a piece (a checksum that failed) ends the read with that error:
// no later piece is handed over, and none is left landing after the read returned (its
// buffer let go); the endpoint stays and serves the next read.
TEST_F(UcxWorkerPairTest, AnErrorOnAPieceEndsTheReadWithNothingLeftInFlight) {
  constexpr size_t kPiece = size_t{128} << 10;
  constexpr int kPieces = 8;
  auto source = RandomBytes(kPiece * kPieces, seed_);
  absl::StatusOr<std::unique_ptr<UcxRegion>> region = owner_->Register(*source);
  ASSERT_OK(region);
  auto warm = std::make_shared<std::vector<std::byte>>(16);  // connects the reader
  ASSERT_OK(reader_->Get(owner_->address(), (*region)->rkey(), (*region)->address(),
                         absl::MakeSpan(*warm), warm, absl::Now() + absl::Seconds(30), nullptr));
  for (size_t failing : {size_t{0}, size_t{1}, size_t{kPieces - 1}}) {
    auto dest = std::make_shared<std::vector<std::byte>>(source->size());
    std::weak_ptr<std::vector<std::byte>> buffer = dest;
    int handed = 0;
    UcxWorker::Pieces pieces{.sizes = std::vector<size_t>(kPieces, kPiece),
                             .done = [&](size_t i, absl::Span<const std::byte>) -> absl::Status {
                               ++handed;
                               if (i == failing) return absl::DataLossError("piece failed");
                               return absl::OkStatus();
                             },
                             .in_flight = 4};
    const absl::Status status = reader_->GetInPieces(
        owner_->address(), (*region)->rkey(), (*region)->address(), absl::MakeSpan(*dest), pieces,
        dest, absl::Now() + absl::Seconds(30), nullptr);
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kDataLoss, HasSubstr("piece failed")));
    EXPECT_EQ(handed, static_cast<int>(failing) + 1);
    dest.reset();
    EXPECT_TRUE(buffer.expired()) << "a piece still lands in the buffer, failing " << failing;
  }
  EXPECT_EQ(reader_->endpoints(), 1);
  auto dest = std::make_shared<std::vector<std::byte>>(source->size());
  ASSERT_OK(reader_->Get(owner_->address(), (*region)->rkey(), (*region)->address(),
                         absl::MakeSpan(*dest), dest, absl::Now() + absl::Seconds(30), nullptr));
  EXPECT_TRUE(*dest == *source);
}

// Over shared memory a peer's UCX-allocated region is read in place; where no transport
// maps it (tcp, user memory, mapping turned off) MapRemote says so and Get reads it.
TEST_F(UcxWorkerPairTest, MapRemoteReadsAnAllocatedRegionInPlaceOverSharedMemory) {
  constexpr size_t kSize = size_t{1} << 20;
  absl::StatusOr<std::unique_ptr<UcxRegion>> allocated = owner_->Allocate(kSize);
  ASSERT_OK(allocated);
  const UcxRegion& region = **allocated;
  auto source = RandomBytes(kSize, seed_);
  std::copy(source->begin(), source->end(), region.data());
  const size_t offset = kSize / 4;
  auto head = std::make_shared<std::vector<std::byte>>(64);
  ASSERT_OK(reader_->Get(owner_->address(), region.rkey(), region.address(), absl::MakeSpan(*head),
                         head, absl::Now() + absl::Seconds(30), nullptr));
  EXPECT_TRUE(std::equal(head->begin(), head->end(), source->begin()));
  // A read that leaves the region is refused before UCX sees it (on every transport).
  auto dest = std::make_shared<std::vector<std::byte>>(2);
  EXPECT_THAT(reader_->Get(owner_->address(), region.rkey(), region.address() + kSize - 1,
                           absl::MakeSpan(*dest), dest, absl::Now() + absl::Seconds(30), nullptr),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("outside")));
  absl::StatusOr<UcxWorker::Mapped> mapped =
      reader_->MapRemote(owner_->address(), region.rkey(), region.address() + offset, kSize / 2);
  if (!OverShm()) {
    EXPECT_THAT(mapped, StatusIs(absl::StatusCode::kUnimplemented));
    return;
  }
  ASSERT_OK(mapped);
  ASSERT_NE(mapped->data, nullptr);
  EXPECT_TRUE(std::equal(mapped->data, mapped->data + kSize / 2, source->begin() + offset));
  // In place: the owner's later writes show through.
  region.data()[offset + 7] = ~region.data()[offset + 7];
  EXPECT_EQ(mapped->data[7], region.data()[offset + 7]);
  // A range that leaves the region is refused.
  EXPECT_THAT(
      reader_->MapRemote(owner_->address(), region.rkey(), region.address() + offset, kSize),
      StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_THAT(reader_->MapRemote(owner_->address(), region.rkey(), region.address() + 2 * kSize, 1),
              StatusIs(absl::StatusCode::kOutOfRange));
  // Memory the owner only registered is not mapped; nor anything with mapping off.
  absl::StatusOr<std::unique_ptr<UcxRegion>> registered = owner_->Register(*source);
  ASSERT_OK(registered);
  EXPECT_THAT(
      reader_->MapRemote(owner_->address(), (*registered)->rkey(), (*registered)->address(), kSize),
      StatusIs(absl::StatusCode::kUnimplemented));
  std::shared_ptr<UcxWorker> unmapping = MakeWorker("generation", {.no_mapping = true});
  ASSERT_NE(unmapping, nullptr);
  EXPECT_THAT(unmapping->MapRemote(owner_->address(), region.rkey(), region.address(), kSize),
              StatusIs(absl::StatusCode::kUnimplemented));
}

TEST(UcxWorkerTest, RegistrationFailureIsReported) {
  std::shared_ptr<UcxWorker> owner = MakeWorker(
      "context", {.fail_registration = [] { return absl::UnavailableError("no memory to pin"); }});
  ASSERT_NE(owner, nullptr);
  std::vector<std::byte> bytes(64);
  EXPECT_THAT(owner->Register(bytes),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("no memory to pin")));
}

TEST(UcxWorkerTest, MissingPeerAddressFails) {
  std::shared_ptr<UcxWorker> reader = MakeWorker("generation");
  ASSERT_NE(reader, nullptr);
  auto dest = std::make_shared<std::vector<std::byte>>(16);
  EXPECT_THAT(reader->Get("", "key", 0, absl::MakeSpan(*dest), dest, absl::Now() + absl::Seconds(5),
                          nullptr),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("no UCX worker address")));
  // Malformed non-empty addresses and keys are not tested: UCX asserts on a bad
  // address and does not check the keys of transports that emulate RMA, which is why
  // both travel only over the token-checked control channel (docs/transfer-ucx.md).
}

TEST(UcxWorkerTest, CancelEndsAWaitingGet) {
  std::unique_ptr<HeldOwner> held = MakeHeldOwner(1);
  ASSERT_NE(held, nullptr);
  std::atomic<int> checks{0};
  const absl::Status status = held->reader->Get(
      held->owner->address(), held->region->rkey(), held->region->address(),
      absl::MakeSpan(*held->dest), held->dest, absl::InfiniteFuture(),
      [&checks] { return ++checks > 2; });
  if (!status.ok()) EXPECT_THAT(status, StatusIs(absl::StatusCode::kCancelled));
  held->hold = false;
}

TEST(UcxWorkerTest, GetThatNeverCompletesEndsAtItsDeadline) {
  std::unique_ptr<HeldOwner> held = MakeHeldOwner(2);
  ASSERT_NE(held, nullptr);
  const UcxRegion& region = *held->region;
  const absl::Time deadline = absl::Now() + absl::Milliseconds(300);
  const absl::Status status =
      held->reader->Get(held->owner->address(), region.rkey(), region.address(),
                        absl::MakeSpan(*held->dest), held->dest, deadline, nullptr);
  EXPECT_LT(absl::Now() - deadline, absl::Seconds(2));
  if (!status.ok()) {
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("deadline")));
  }
  held->hold = false;
  // The endpoint was closed; the next get connects anew and completes.
  ASSERT_OK(held->reader->Get(held->owner->address(), region.rkey(), region.address(),
                              absl::MakeSpan(*held->dest), held->dest,
                              absl::Now() + absl::Seconds(30), nullptr));
  EXPECT_TRUE(*held->dest == *held->source);
}

// A worker serving `source` (registered) and what a reader needs to read it; the region
// goes before its worker. `owner` is null (with a test failure) when either step fails.
struct Served {
  std::shared_ptr<UcxWorker> owner;
  std::unique_ptr<UcxRegion> region;
  std::string address;
  std::string rkey;
  uint64_t remote = 0;
};

Served Serve(const std::vector<std::byte>& source) {
  Served served;
  served.owner = MakeWorker("context");
  if (served.owner == nullptr) return served;
  absl::StatusOr<std::unique_ptr<UcxRegion>> registered = served.owner->Register(source);
  if (!registered.ok()) {
    ADD_FAILURE() << "Register: " << registered.status();
    served.owner = nullptr;
    return served;
  }
  served.region = std::move(*registered);
  served.address = served.owner->address();
  served.rkey = served.region->rkey();
  served.remote = served.region->address();
  return served;
}

// Reads 16 bytes of `served`, so that `reader` is connected to its owner.
absl::Status ConnectTo(UcxWorker& reader, const Served& served) {
  auto warm = std::make_shared<std::vector<std::byte>>(16);
  return reader.Get(served.address, served.rkey, served.remote, absl::MakeSpan(*warm), warm,
                    absl::Now() + absl::Seconds(30), nullptr);
}

TEST(UcxWorkerTest, PeerGoneEndsTheGetWithinItsDeadline) {
  std::shared_ptr<UcxWorker> reader = MakeWorker("generation");
  ASSERT_NE(reader, nullptr);
  std::string address, rkey;
  uint64_t remote = 0;
  auto source = RandomBytes(1 << 20, 3);
  {
    Served served = Serve(*source);
    ASSERT_NE(served.owner, nullptr);
    address = served.address;
    rkey = served.rkey;
    remote = served.remote;
    // Connect while the peer lives, so that the get below meets a dead peer.
    ASSERT_OK(ConnectTo(*reader, served));
  }
  source.reset();
  auto dest = std::make_shared<std::vector<std::byte>>(1 << 20);
  const absl::Time deadline = absl::Now() + absl::Seconds(3);
  const absl::Status status =
      reader->Get(address, rkey, remote, absl::MakeSpan(*dest), dest, deadline, nullptr);
  EXPECT_LT(absl::Now() - deadline, absl::Seconds(2));
  // Over shm the memory may still be readable (same process); over tcp the endpoint
  // fails or the deadline passes.
  if (!status.ok()) {
    EXPECT_TRUE(absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status)) << status;
  }
}

// The owner goes away after the reader connected, just before the read is sent. Over tcp
// (where the owner answers a read by sending the range) the read ends as an endpoint
// error instead of waiting out its deadline for bytes that will never come.
TEST(UcxWorkerTest, OwnerGoneJustBeforeAReadEndsItWithoutWaitingForTheDeadline) {
  auto source = RandomBytes(1 << 20, 4);
  Served served = Serve(*source);
  ASSERT_NE(served.owner, nullptr);
  bool armed = false;  // touched on this thread only (before_get runs in Get's caller)
  std::shared_ptr<UcxWorker> reader = MakeWorker("generation", {.before_get = [&] {
                                                   if (!armed) return;
                                                   served.region.reset();
                                                   served.owner.reset();
                                                 }});
  ASSERT_NE(reader, nullptr);
  ASSERT_OK(ConnectTo(*reader, served));
  armed = true;
  auto dest = std::make_shared<std::vector<std::byte>>(1 << 20);
  // Over shm a get has no peer failure to see: it may read this process's bytes or wait
  // out a short deadline (PeerGoneEndsTheGetWithinItsDeadline).
  const absl::Time deadline = absl::Now() + (OverShm() ? absl::Seconds(3) : absl::Seconds(60));
  const absl::Status status = reader->Get(served.address, served.rkey, served.remote,
                                          absl::MakeSpan(*dest), dest, deadline, nullptr);
  EXPECT_EQ(served.owner, nullptr);
  if (!OverShm()) {
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kUnavailable))
        << "deadline in " << deadline - absl::Now();
  } else if (!status.ok()) {
    EXPECT_TRUE(absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status)) << status;
  }
}

// The owner goes away while a read in pieces is under way (after the first piece was
// handed over, before the next is asked for): over tcp the read ends as an endpoint
// error, not at its deadline, and no piece is handed over after it.
TEST(UcxWorkerTest, OwnerGoneMidPiecesEndsTheReadUnavailable) {
  if (OverShm()) GTEST_SKIP() << "over shared memory the whole read lands before any piece";
  auto source = RandomBytes(size_t{1} << 20, 5);
  Served served = Serve(*source);
  ASSERT_NE(served.owner, nullptr);
  std::shared_ptr<UcxWorker> reader = MakeWorker("generation");
  ASSERT_NE(reader, nullptr);
  ASSERT_OK(ConnectTo(*reader, served));
  int handed = 0;
  UcxWorker::Pieces pieces{.sizes = std::vector<size_t>(4, size_t{256} << 10),
                           .done = [&](size_t, absl::Span<const std::byte>) -> absl::Status {
                             if (++handed == 1) {
                               served.region.reset();
                               served.owner.reset();
                             }
                             return absl::OkStatus();
                           },
                           .in_flight = 1};
  auto dest = std::make_shared<std::vector<std::byte>>(source->size());
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  const absl::Status status =
      reader->GetInPieces(served.address, served.rkey, served.remote, absl::MakeSpan(*dest), pieces,
                          dest, deadline, nullptr);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kUnavailable))
      << "deadline in " << deadline - absl::Now();
  EXPECT_EQ(handed, 1);
}

// A worker address or remote key that is not what a peer's UCX made (corrupted, cut
// short, unframed, another UCX version) is a clear error before UCX sees it: UCX itself
// parses these bytes without a length and aborts the process on what it does not expect.
TEST_F(UcxWorkerPairTest, MalformedPeerAddressOrKeyIsAClearErrorNotAnAbort) {
  auto source = RandomBytes(4096, seed_);
  absl::StatusOr<std::unique_ptr<UcxRegion>> registered = owner_->Register(*source);
  ASSERT_OK(registered);
  const UcxRegion& region = **registered;
  const std::string good = owner_->address();
  constexpr size_t kHeader = 15;  // the frame: magic, kind, version, CRC32C, length
  ASSERT_GT(good.size(), kHeader);
  std::mt19937_64 rng(seed_);
  std::string random(good.size(), '\0');
  for (char& c : random) c = static_cast<char>(rng());
  std::string flipped = good;
  flipped[kHeader + rng() % (good.size() - kHeader)] ^= 0x5a;
  std::string first_byte = good;
  first_byte[kHeader] ^= static_cast<char>(0xff);  // UCX asserts on this byte's version
  std::string other_version = good;
  other_version[6] = static_cast<char>(other_version[6] + 1);
  std::string address_as_key = region.rkey();  // a frame of the other kind
  struct Case {
    const char* name;
    std::string peer;
    absl::StatusCode code;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"unframed", good.substr(kHeader), absl::StatusCode::kInvalidArgument,
       "not framed by this data plane"},
      {"random", random, absl::StatusCode::kInvalidArgument, "not framed by this data plane"},
      {"cut short", good.substr(0, good.size() - 9), absl::StatusCode::kInvalidArgument,
       "carries"},
      {"longer", good + "xyz", absl::StatusCode::kInvalidArgument, "carries"},
      {"header only", good.substr(0, kHeader), absl::StatusCode::kInvalidArgument, "carries 0"},
      {"flipped", flipped, absl::StatusCode::kInvalidArgument, "checksum mismatch"},
      {"first byte", first_byte, absl::StatusCode::kInvalidArgument, "checksum mismatch"},
      {"other version", other_version, absl::StatusCode::kFailedPrecondition,
       "UCX versions must match"},
      {"a key", address_as_key, absl::StatusCode::kInvalidArgument, "of another kind"},
  };
  for (const Case& c : cases) {
    auto dest = std::make_shared<std::vector<std::byte>>(64);
    const absl::Status status =
        reader_->Get(c.peer, region.rkey(), region.address(), absl::MakeSpan(*dest), dest,
                     absl::Now() + absl::Seconds(30), nullptr);
    EXPECT_THAT(status, StatusIs(c.code, HasSubstr(c.says))) << c.name;
    EXPECT_THAT(status.message(), HasSubstr("UCX worker address")) << c.name;
  }
  EXPECT_EQ(reader_->endpoints(), 0);
  // The remote key is checked the same way, on a good endpoint.
  std::string bad_key = region.rkey();
  bad_key.back() ^= 0x01;
  auto dest = std::make_shared<std::vector<std::byte>>(64);
  EXPECT_THAT(
      reader_->Get(good, bad_key, region.address(), absl::MakeSpan(*dest), dest,
                   absl::Now() + absl::Seconds(30), nullptr),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("UCX remote key is malformed")));
  // And the good ones still read.
  ASSERT_OK(reader_->Get(good, region.rkey(), region.address(), absl::MakeSpan(*dest), dest,
                         absl::Now() + absl::Seconds(30), nullptr));
  EXPECT_TRUE(std::equal(dest->begin(), dest->end(), source->begin()));
}

// Workers stopped while their endpoints are still connecting (a rank shutting down
// mid-connect) stop cleanly: UCX 1.13 aborts the process when a worker is destroyed
// with an endpoint still wiring up, so the worker closes and progresses every endpoint
// before destroying itself. Each round connects without waiting for the connection
// (MapRemote over tcp, a get whose deadline has passed) and then stops the workers in
// a seeded order; which step each round takes is seeded too, not timed.
TEST(UcxWorkerTest, StoppingWhileConnectsAreInFlightIsSafe) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  // Over shm a worker stopped first leaves its peer waiting out the stop deadline (no
  // failure detection there): fewer rounds. Over tcp (where UCX aborted: its wire-up
  // reply waits for a connection back to the peer) many.
  const int rounds = OverShm() ? 6 : 48;
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE(::testing::Message() << "round " << round);
    std::shared_ptr<UcxWorker> owner = MakeWorker("context");
    std::shared_ptr<UcxWorker> reader = MakeWorker("generation");
    ASSERT_NE(owner, nullptr);
    ASSERT_NE(reader, nullptr);
    absl::StatusOr<std::unique_ptr<UcxRegion>> allocated = owner->Allocate(4096);
    ASSERT_OK(allocated);
    std::unique_ptr<UcxRegion> region = std::move(*allocated);
    const int connects = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < connects; ++i) {
      if (rng() % 2 == 0) {
        // Connects and returns at once (mapped over shm, refused over tcp).
        absl::StatusOr<UcxWorker::Mapped> mapped =
            reader->MapRemote(owner->address(), region->rkey(), region->address(), 64);
        if (!mapped.ok()) EXPECT_THAT(mapped, StatusIs(absl::StatusCode::kUnimplemented));
      } else {
        // Connects and gives up at once (its deadline is now): the endpoint is left
        // mid-connect.
        auto dest = std::make_shared<std::vector<std::byte>>(64);
        const absl::Status got = reader->Get(owner->address(), region->rkey(), region->address(),
                                             absl::MakeSpan(*dest), dest, absl::Now(), nullptr);
        if (!got.ok()) EXPECT_THAT(got, StatusIs(absl::StatusCode::kDeadlineExceeded));
      }
    }
    // The region holds the owner; drop it first, then stop the workers in either order.
    region.reset();
    if (rng() % 2 == 0) {
      reader.reset();
      owner.reset();
    } else {
      owner.reset();
      reader.reset();
    }
  }
}

// The same for a read waiting for its owner (held: its endpoint's handshake, or over
// tcp the read itself): a failing check ends it with the check's error; while the check
// passes it waits, and completes once the owner progresses again.
TEST(UcxWorkerTest, APeerCheckEndsAWaitingGetOnlyWhenItFails) {
  std::unique_ptr<HeldOwner> held = MakeHeldOwner(8);
  ASSERT_NE(held, nullptr);
  const UcxRegion& region = *held->region;
  std::atomic<int> checks{0};
  const auto gone_on_third = [&checks]() -> absl::Status {
    if (++checks < 3) return absl::OkStatus();
    return absl::UnavailableError("the peer is gone (test)");
  };
  EXPECT_THAT(held->reader->Get(held->owner->address(), region.rkey(), region.address(),
                                absl::MakeSpan(*held->dest), held->dest,
                                absl::Now() + absl::Seconds(60), nullptr, gone_on_third),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("the peer is gone (test)")));
  EXPECT_EQ(checks.load(), 3);
  checks = 0;
  const auto alive = [&]() -> absl::Status {
    if (++checks == 3) held->hold = false;
    return absl::OkStatus();
  };
  ASSERT_OK(held->reader->Get(held->owner->address(), region.rkey(), region.address(),
                              absl::MakeSpan(*held->dest), held->dest,
                              absl::Now() + absl::Seconds(60), nullptr, alive));
  EXPECT_TRUE(*held->dest == *held->source);
  EXPECT_GE(checks.load(), 3);
}

}  // namespace
}  // namespace lockstep::transfer
