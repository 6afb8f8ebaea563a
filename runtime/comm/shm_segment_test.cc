#include "runtime/comm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/comm/shm_host_id.h"

namespace lockstep::comm {
namespace {

using internal::ShmSegment;
using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

// A name no other test or run uses (random: parallel sandboxed runs share /dev/shm
// but may have the same pids).
std::string UniqueName(absl::string_view what) {
  static const std::string token =
      absl::StrCat(absl::Hex((uint64_t{std::random_device()()} << 32) ^ std::random_device()()));
  static int counter = 0;
  return ShmSegmentName("segtest", absl::StrCat(token, "x", ++counter), what);
}

bool Exists(const std::string& name) {
  struct stat st;
  return stat(absl::StrCat("/dev/shm/", name).c_str(), &st) == 0;
}

TEST(ShmSegmentTest, NameCarriesInstanceEpochAndGroupAndIsSanitized) {
  EXPECT_EQ(ShmSegmentName("gen0", "00ff", "exec"), "lockstep-gen0-00ff-exec");
  EXPECT_EQ(ShmSegmentName("a/b c", "e", "g"), "lockstep-a_b_c-e-g");
  EXPECT_THAT(internal::ValidateShmName("a/b"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(internal::ValidateShmName(""), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(internal::ValidateShmName("lockstep-x.y_z-1"), IsOk());
}

TEST(ShmSegmentTest, CreatedWithMode0600AndNeverReused) {
  const std::string name = UniqueName("mode");
  auto segment = ShmSegment::Create(name, 4, 4096);
  ASSERT_THAT(segment, IsOk());
  struct stat st;
  ASSERT_EQ(stat(absl::StrCat("/dev/shm/", name).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  EXPECT_EQ(st.st_uid, geteuid());
  EXPECT_EQ(static_cast<size_t>(st.st_size), (*segment)->layout().total_bytes);
  EXPECT_THAT(ShmSegment::Create(name, 4, 4096), StatusIs(absl::StatusCode::kAlreadyExists));
  // The failed second Create did not remove the first one's name.
  EXPECT_TRUE(Exists(name));
  EXPECT_THAT(UnlinkShmSegment(name), IsOk());
  EXPECT_FALSE(Exists(name));
  EXPECT_THAT(UnlinkShmSegment(name), IsOk());  // Absent is fine.
}

TEST(ShmSegmentTest, LayoutKeepsEveryBufferAligned) {
  const std::string name = UniqueName("layout");
  auto segment = ShmSegment::Create(name, 3, 1000);  // Rounded up to 1024.
  ASSERT_THAT(segment, IsOk());
  EXPECT_EQ((*segment)->layout().chunk_bytes, 1024u);
  for (int r = 0; r < 3; ++r) {
    for (uint64_t parity : {0, 1}) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>((*segment)->data(r, parity)) % 64, 0u);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(&(*segment)->round_header(r, parity)) % 64, 0u);
    }
  }
  EXPECT_THAT(UnlinkShmSegment(name), IsOk());
}

TEST(ShmSegmentTest, OpenAdoptsTheCreatorsLayoutAndChecksTheWorld) {
  const std::string name = UniqueName("open");
  auto created = ShmSegment::Create(name, 2, 8192);
  ASSERT_THAT(created, IsOk());
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  auto opened = ShmSegment::Open(name, 2, deadline);
  ASSERT_THAT(opened, IsOk());
  EXPECT_EQ((*opened)->layout().chunk_bytes, 8192u);
  // Both mappings see the same memory.
  (*created)->control(1).seq.store(7);
  EXPECT_EQ((*opened)->control(1).seq.load(), 7u);
  EXPECT_THAT(ShmSegment::Open(name, 3, deadline),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("for 2 ranks")));
  EXPECT_THAT(UnlinkShmSegment(name), IsOk());
}

TEST(ShmSegmentTest, OpenOfAMissingSegmentEndsAtTheDeadline) {
  EXPECT_THAT(ShmSegment::Open(UniqueName("missing"), 2, absl::Now() + absl::Milliseconds(30)),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("does not exist")));
}

TEST(ShmSegmentTest, OpenRefusesASegmentOthersCanRead) {
  const std::string name = UniqueName("open_mode");
  const int fd = shm_open(absl::StrCat("/", name).c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(fchmod(fd, 0644), 0);
  ASSERT_EQ(ftruncate(fd, 8192), 0);
  close(fd);
  EXPECT_THAT(ShmSegment::Open(name, 2, absl::Now() + absl::Seconds(5)),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("mode 600")));
  EXPECT_THAT(UnlinkShmSegment(name), IsOk());
}

TEST(ShmHostIdTest, StableAndNamesBootHostAndShmMount) {
  const std::string id = ShmHostId();
  EXPECT_EQ(id, ShmHostId());
  EXPECT_THAT(id, HasSubstr("/shm-dev:"));
  EXPECT_EQ(std::count(id.begin(), id.end(), '/'), 2) << id;
}

}  // namespace
}  // namespace lockstep::comm
