#include "runtime/transfer/ucx_published.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace lockstep::transfer {
namespace {

// The header's layout (ucx_published.h).
constexpr size_t kBlocksWord = 0;
constexpr size_t kStateWord = 8;
constexpr size_t kTrailerLength = 16;
constexpr size_t kMessageLength = 20;
constexpr size_t kTrailerAt = 64;
constexpr size_t kMaxTrailer = 192;
constexpr size_t kMessageAt = 256;
constexpr size_t kMaxMessage = 256;
constexpr size_t kCrcsAt = 512;

constexpr uint64_t kStaging = 0;
constexpr uint64_t kDone = 1;
constexpr uint64_t kFailed = 2;  // + the absl::StatusCode

// Polls between checks of the deadline, cancel and liveness.
constexpr int kPollsPerCheck = 64;
// A wait that lasts longer (the context rank slow to stage: a device copy, a busy core)
// sleeps this long between checks instead of yielding, so that it does not hold a core.
constexpr absl::Duration kSpinFor = absl::Microseconds(200);
constexpr absl::Duration kSleepBetweenChecks = absl::Microseconds(20);

std::atomic_ref<uint64_t> Word(const std::byte* header, size_t at) {
  return std::atomic_ref<uint64_t>(
      *reinterpret_cast<uint64_t*>(const_cast<std::byte*>(header) + at));
}

uint32_t Load32(const std::byte* at) {
  uint32_t v = 0;
  std::memcpy(&v, at, sizeof(v));
  return v;
}

void Store32(std::byte* at, uint32_t v) { std::memcpy(at, &v, sizeof(v)); }

}  // namespace

size_t PublishedHeaderAt(int64_t bytes) { return (static_cast<size_t>(bytes) + 63) & ~size_t{63}; }

size_t PublishedRangeBytes(int64_t bytes, int64_t blocks) {
  return PublishedHeaderAt(bytes) + kCrcsAt + 4 * static_cast<size_t>(blocks);
}

PublishingSink::PublishingSink(std::byte* range, int64_t bytes, int64_t blocks,
                               std::function<void()> on_first_write)
    : bytes_(range, bytes),
      header_(range + PublishedHeaderAt(bytes)),
      staged_bytes_(bytes),
      blocks_(blocks),
      on_first_write_(std::move(on_first_write)) {
  Store32(header_ + kTrailerLength, 0);
  Store32(header_ + kMessageLength, 0);
  Word(header_, kBlocksWord).store(0, std::memory_order_relaxed);
  Word(header_, kStateWord).store(kStaging, std::memory_order_release);
}

void PublishingSink::Start() {
  if (started_) return;
  started_ = true;
  if (on_first_write_) on_first_write_();
}

absl::Span<std::byte> PublishingSink::NextChunkMemory(size_t bytes) {
  Start();
  return bytes_.Next(bytes);
}

bool PublishingSink::Write(const ChunkHeader& /*header*/, absl::Span<const ByteRange> pieces,
                           absl::Span<const uint32_t> crcs,
                           const std::shared_ptr<const void>& /*keep_alive*/,
                           const absl::Notification& abort) {
  Start();
  if (abort.HasBeenNotified()) return false;
  if (static_cast<int64_t>(crcs.size()) > blocks_ - published_) return false;
  if (!bytes_.Append(pieces)) return false;
  if (crcs.empty()) return true;  // part of a block: published with the block's end
  std::memcpy(header_ + kCrcsAt + 4 * static_cast<size_t>(published_), crcs.data(),
              4 * crcs.size());
  published_ += static_cast<int64_t>(crcs.size());
  Word(header_, kBlocksWord).store(static_cast<uint64_t>(published_), std::memory_order_release);
  return true;
}

bool PublishingSink::WriteTrailer(const lockstep::v1::PullTrailer& trailer) {
  Start();
  const std::string bytes = trailer.SerializeAsString();
  if (bytes.size() > kMaxTrailer) return false;
  std::memcpy(header_ + kTrailerAt, bytes.data(), bytes.size());
  Store32(header_ + kTrailerLength, static_cast<uint32_t>(bytes.size()));
  trailer_written_ = true;
  return true;
}

void PublishingSink::Finish(const absl::Status& served) {
  absl::Status outcome = served;
  if (outcome.ok() &&
      (!trailer_written_ || published_ != blocks_ || bytes_.used() != staged_bytes_)) {
    outcome = absl::InternalError(absl::StrCat("staging ended with ", published_, " of ", blocks_,
                                               " blocks and ", bytes_.used(), " of ", staged_bytes_,
                                               " bytes"));
  }
  if (outcome.ok()) {
    Word(header_, kStateWord).store(kDone, std::memory_order_release);
    return;
  }
  const size_t length = std::min(outcome.message().size(), kMaxMessage);
  std::memcpy(header_ + kMessageAt, outcome.message().data(), length);
  Store32(header_ + kMessageLength, static_cast<uint32_t>(length));
  Word(header_, kStateWord)
      .store(kFailed + static_cast<uint64_t>(outcome.code()), std::memory_order_release);
}

PublishedReader::PublishedReader(const std::byte* range, int64_t bytes, int64_t blocks)
    : header_(range + PublishedHeaderAt(bytes)), blocks_(blocks) {}

const uint32_t* PublishedReader::crcs() const {
  return reinterpret_cast<const uint32_t*>(header_ + kCrcsAt);
}

absl::Status PublishedReader::Await(const std::function<bool(uint64_t state)>& ready,
                                    const Bounds& bounds) const {
  absl::Time first_check = absl::InfinitePast();
  for (int polls = 1;; ++polls) {
    const uint64_t state = Word(header_, kStateWord).load(std::memory_order_acquire);
    if (state >= kFailed) {
      const uint64_t code = state - kFailed;
      const size_t length = std::min<size_t>(Load32(header_ + kMessageLength), kMaxMessage);
      const std::string message(reinterpret_cast<const char*>(header_ + kMessageAt), length);
      return absl::Status(
          code > 0 && code <= 16 ? static_cast<absl::StatusCode>(code) : absl::StatusCode::kUnknown,
          absl::StrCat("the context rank failed to stage the offer it had answered: ", message));
    }
    if (ready(state)) return absl::OkStatus();
    if (polls % kPollsPerCheck != 0) continue;
    if (bounds.cancelled && bounds.cancelled()) {
      return absl::CancelledError("cancelled while waiting for published blocks");
    }
    const absl::Time now = absl::Now();
    if (now >= bounds.deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("the context rank had published ",
                       Word(header_, kBlocksWord).load(std::memory_order_relaxed), " of ", blocks_,
                       " blocks of its answered offer by the pull's deadline"));
    }
    if (bounds.check) {
      if (absl::Status alive = bounds.check(); !alive.ok()) return alive;
    }
    if (first_check == absl::InfinitePast()) first_check = now;
    if (now - first_check < kSpinFor) {
      std::this_thread::yield();
    } else {
      absl::SleepFor(kSleepBetweenChecks);
    }
  }
}

absl::Status PublishedReader::AwaitBlocks(int64_t blocks, const Bounds& bounds) const {
  return Await(
      [&](uint64_t state) {
        return state == kDone || Word(header_, kBlocksWord).load(std::memory_order_acquire) >=
                                     static_cast<uint64_t>(blocks);
      },
      bounds);
}

absl::StatusOr<lockstep::v1::PullTrailer> PublishedReader::AwaitTrailer(
    const Bounds& bounds) const {
  if (absl::Status ended = Await([](uint64_t state) { return state == kDone; }, bounds);
      !ended.ok()) {
    return ended;
  }
  const uint32_t length = Load32(header_ + kTrailerLength);
  lockstep::v1::PullTrailer trailer;
  if (length > kMaxTrailer ||
      !trailer.ParseFromArray(header_ + kTrailerAt, static_cast<int>(length))) {
    return absl::DataLossError(absl::StrCat("a malformed published trailer (", length, " bytes)"));
  }
  return trailer;
}

}  // namespace lockstep::transfer
