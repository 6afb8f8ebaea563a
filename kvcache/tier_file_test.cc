#include "kvcache/tier_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace lockstep::kv {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;

std::vector<std::byte> Payload(size_t n, int seed = 3) {
  std::vector<std::byte> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<std::byte>(i * 7 + seed);
  return p;
}

std::string TempPath(const char* name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

std::unique_ptr<TierFile> Make(const char* name, int64_t slots, size_t tokens, size_t bytes) {
  absl::StatusOr<std::unique_ptr<TierFile>> file =
      TierFile::Create(TempPath(name), slots, tokens, bytes);
  EXPECT_THAT(file.status(), IsOk());
  return file.ok() ? *std::move(file) : nullptr;
}

// The file's bytes from `offset` (`n` of them).
std::vector<char> ReadAt(const std::string& path, int64_t offset, size_t n) {
  std::vector<char> out(n);
  std::ifstream in(path, std::ios::binary);
  in.seekg(offset);
  in.read(out.data(), static_cast<std::streamsize>(n));
  return out;
}

void WriteAt(const std::string& path, int64_t offset, const std::vector<char>& bytes) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(offset);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST(TierFileTest, SlotsAreWholePagesAndTheFileIsReservedAtCreate) {
  EXPECT_EQ(TierFileBytes(4, 256), 4096u);
  EXPECT_EQ(TierFileBytes(16, 32768), 9u * 4096);  // 48 + 64 + 32768 bytes of record
  EXPECT_EQ(TierFileBytes(0, 4096 - 48), 4096u);
  EXPECT_EQ(TierFileBytes(0, 4096 - 47), 8192u);
  std::unique_ptr<TierFile> file = Make("reserved.kvt", 5, 4, 256);
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(file->slots(), 5);
  EXPECT_EQ(file->slot_bytes(), 4096u);
  EXPECT_EQ(file->OffsetOf(3), 3 * 4096);
  struct stat st {};
  ASSERT_EQ(stat(file->path().c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 5 * 4096);
  EXPECT_THAT(TierFile::Create(TempPath("none.kvt"), 0, 4, 256).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(TierFile::Create(TempPath("no-such-dir/x.kvt"), 1, 4, 256).status(),
              StatusIs(absl::StatusCode::kUnavailable));
}

TEST(TierFileTest, EachSlotRoundTripsItsOwnBlock) {
  std::unique_ptr<TierFile> file = Make("round.kvt", 3, 4, 256);
  ASSERT_NE(file, nullptr);
  std::vector<TierBlockMeta> metas;
  for (int s = 0; s < 3; ++s) {
    metas.push_back({.key = 40u + s, .parent_key = 7u + s, .tokens = {s, 2, 3, 4}});
    ASSERT_THAT(file->Write(s, metas[s], Payload(256, s)), IsOk());
  }
  for (int s : {2, 0, 1}) {
    std::vector<std::byte> back(256);
    ASSERT_THAT(file->Read(s, metas[s], absl::MakeSpan(back)), IsOk()) << "slot " << s;
    EXPECT_EQ(back, Payload(256, s)) << "slot " << s;
  }
  // Rewritten in place: the slot now holds the new block, and only it.
  const TierBlockMeta other{.key = 99, .parent_key = 41, .tokens = {9, 9, 9, 9}};
  ASSERT_THAT(file->Write(1, other, Payload(256, 9)), IsOk());
  std::vector<std::byte> back(256);
  ASSERT_THAT(file->Read(1, other, absl::MakeSpan(back)), IsOk());
  EXPECT_EQ(back, Payload(256, 9));
  EXPECT_THAT(file->Read(1, metas[1], absl::MakeSpan(back)), StatusIs(absl::StatusCode::kDataLoss));
  ASSERT_THAT(file->Read(0, metas[0], absl::MakeSpan(back)), IsOk());
  EXPECT_EQ(back, Payload(256, 0));
}

TEST(TierFileTest, OutOfRangeSlotsAndOtherSizesAreRefused) {
  std::unique_ptr<TierFile> file = Make("range.kvt", 2, 2, 64);
  ASSERT_NE(file, nullptr);
  const TierBlockMeta meta{.key = 1, .parent_key = 0, .tokens = {1, 2}};
  std::vector<std::byte> back(64);
  EXPECT_THAT(file->Write(2, meta, Payload(64)), StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_THAT(file->Write(-1, meta, Payload(64)), StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_THAT(file->Read(2, meta, absl::MakeSpan(back)), StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_THAT(file->Write(0, meta, Payload(65)), StatusIs(absl::StatusCode::kInvalidArgument));
  const TierBlockMeta three{.key = 1, .parent_key = 0, .tokens = {1, 2, 3}};
  EXPECT_THAT(file->Write(0, three, Payload(64)), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(TierFileTest, EveryFlippedByteIsDataLoss) {
  const TierBlockMeta meta{.key = 9, .parent_key = 8, .tokens = {5, 6}};
  const std::vector<std::byte> payload = Payload(64);
  std::unique_ptr<TierFile> file = Make("flip.kvt", 3, 2, 64);
  ASSERT_NE(file, nullptr);
  constexpr int kSlot = 1;
  ASSERT_THAT(file->Write(kSlot, meta, payload), IsOk());
  const size_t record = 48 + 2 * sizeof(int32_t) + payload.size();
  const std::vector<char> good = ReadAt(file->path(), file->OffsetOf(kSlot), record);
  for (size_t at = 0; at < record; ++at) {
    std::vector<char> bad = good;
    bad[at] ^= 0x10;
    WriteAt(file->path(), file->OffsetOf(kSlot), bad);
    std::vector<std::byte> back(payload.size());
    EXPECT_THAT(file->Read(kSlot, meta, absl::MakeSpan(back)),
                StatusIs(absl::StatusCode::kDataLoss))
        << "byte " << at << " flipped";
  }
  WriteAt(file->path(), file->OffsetOf(kSlot), good);
  std::vector<std::byte> back(payload.size());
  EXPECT_THAT(file->Read(kSlot, meta, absl::MakeSpan(back)), IsOk());
}

TEST(TierFileTest, ACutFileAnUnwrittenSlotAndAnotherBlockAreDataLoss) {
  const TierBlockMeta meta{.key = 1, .parent_key = 2, .tokens = {3}};
  const std::vector<std::byte> payload = Payload(32);
  std::unique_ptr<TierFile> file = Make("short.kvt", 2, 1, 32);
  ASSERT_NE(file, nullptr);
  ASSERT_THAT(file->Write(1, meta, payload), IsOk());
  std::vector<std::byte> back(payload.size());
  EXPECT_THAT(file->Read(0, meta, absl::MakeSpan(back)), StatusIs(absl::StatusCode::kDataLoss))
      << "slot 0 was never written";
  TierBlockMeta other = meta;
  other.key = 5;
  EXPECT_THAT(file->Read(1, other, absl::MakeSpan(back)), StatusIs(absl::StatusCode::kDataLoss));
  other = meta;
  other.tokens = {4};
  EXPECT_THAT(file->Read(1, other, absl::MakeSpan(back)), StatusIs(absl::StatusCode::kDataLoss));
  other = meta;
  other.parent_key = 3;
  EXPECT_THAT(file->Read(1, other, absl::MakeSpan(back)), StatusIs(absl::StatusCode::kDataLoss));
  // Cut inside the payload, then inside the header.
  ASSERT_EQ(truncate(file->path().c_str(), file->OffsetOf(1) + 48 + 4 + 16), 0);
  EXPECT_THAT(file->Read(1, meta, absl::MakeSpan(back)), StatusIs(absl::StatusCode::kDataLoss));
  ASSERT_EQ(truncate(file->path().c_str(), file->OffsetOf(1) + 4), 0);
  EXPECT_THAT(file->Read(1, meta, absl::MakeSpan(back)), StatusIs(absl::StatusCode::kDataLoss));
  // Written again after the cut: whole again.
  ASSERT_THAT(file->Write(1, meta, payload), IsOk());
  ASSERT_THAT(file->Read(1, meta, absl::MakeSpan(back)), IsOk());
  EXPECT_EQ(back, payload);
}

TEST(TierFileTest, CreateEmptiesAnEarlierRunsFile) {
  const TierBlockMeta meta{.key = 1, .parent_key = 2, .tokens = {3}};
  {
    std::unique_ptr<TierFile> file = Make("again.kvt", 2, 1, 32);
    ASSERT_NE(file, nullptr);
    ASSERT_THAT(file->Write(0, meta, Payload(32)), IsOk());
  }
  std::unique_ptr<TierFile> file = Make("again.kvt", 2, 1, 32);
  ASSERT_NE(file, nullptr);
  std::vector<std::byte> back(32);
  EXPECT_THAT(file->Read(0, meta, absl::MakeSpan(back)), StatusIs(absl::StatusCode::kDataLoss));
}

}  // namespace
}  // namespace lockstep::kv
