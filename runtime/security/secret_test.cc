#include "runtime/security/secret.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::security {
namespace {

using ::lockstep::testing::StatusIs;

using ::testing::ElementsAre;

std::string WriteFile(const std::string& name, const std::string& contents) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << contents;
  return path;
}

TEST(ConstantTimeEqualsTest, ComparesBytesAndLengths) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("secret", "secret"));
  EXPECT_FALSE(ConstantTimeEquals("secret", "secreT"));
  EXPECT_FALSE(ConstantTimeEquals("secret", "secret2"));
  EXPECT_FALSE(ConstantTimeEquals("secret2", "secret"));
  EXPECT_FALSE(ConstantTimeEquals("", "secret"));
  EXPECT_FALSE(ConstantTimeEquals("secret", ""));
  EXPECT_FALSE(ConstantTimeEquals(std::string("a\0b", 3), std::string("a\0c", 3)));
  EXPECT_FALSE(ConstantTimeEquals("ab", std::string("ab\0", 3)));
}

// The time a comparison takes does not reveal the secret's length: only the presented
// value's bytes are walked, so no byte of the secret past the presented length is read.
// Here the secret's bytes past its first 8 lie on a page that cannot be read: comparing
// with shorter values must not touch them (walking the longer of the two would crash).
TEST(ConstantTimeEqualsTest, NeverReadsTheSecretPastThePresentedLength) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* pages = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(pages, MAP_FAILED);
  char* const secret = static_cast<char*>(pages) + page - 8;
  std::memset(secret, 's', 64);
  ASSERT_EQ(mprotect(static_cast<char*>(pages) + page, page, PROT_NONE), 0);
  const std::string_view long_secret(secret, 64);
  EXPECT_FALSE(ConstantTimeEquals("", long_secret));
  EXPECT_FALSE(ConstantTimeEquals("s", long_secret));
  EXPECT_FALSE(ConstantTimeEquals("ssssssss", long_secret));
  EXPECT_FALSE(ConstantTimeEquals("sssssssX", long_secret));
  EXPECT_TRUE(ConstantTimeEquals("ssssssss", std::string_view(secret, 8)));
  munmap(pages, 2 * page);
}

TEST(ReadSecretFileTest, StripsTrailingWhitespace) {
  absl::StatusOr<std::string> token_or = ReadSecretFile(WriteFile("token", "abc123\n"));
  LOCKSTEP_ASSERT_OK(token_or.status());
  std::string token = *token_or;
  EXPECT_EQ(token, "abc123");
}

TEST(ReadSecretFileTest, ErrorsNameTheFile) {
  EXPECT_THAT(ReadSecretFile("/nonexistent/token"),
              StatusIs(absl::StatusCode::kNotFound, ::testing::HasSubstr("/nonexistent/token")));
  EXPECT_THAT(ReadSecretFile(WriteFile("empty", " \n")),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("empty")));
}

TEST(ReadSecretLinesTest, SkipsBlankAndCommentLines) {
  absl::StatusOr<std::vector<std::string>> keys_or = ReadSecretLines(WriteFile("keys", "# team a\nkey-1\n\n  key-2  \n"));
  LOCKSTEP_ASSERT_OK(keys_or.status());
  std::vector<std::string> keys = *keys_or;
  EXPECT_THAT(keys, ElementsAre("key-1", "key-2"));
  EXPECT_THAT(ReadSecretLines(WriteFile("nokeys", "# none\n")),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(GenerateTokenTest, IsLongHexAndFresh) {
  absl::StatusOr<std::string> a_or = GenerateToken();
  LOCKSTEP_ASSERT_OK(a_or.status());
  std::string a = *a_or;
  absl::StatusOr<std::string> b_or = GenerateToken();
  LOCKSTEP_ASSERT_OK(b_or.status());
  std::string b = *b_or;
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a, b);
}

TEST(WriteSecretFileTest, OwnerOnlyAndReadsBack) {
  const std::string path = WriteFile("written", "old contents, world readable");
  ASSERT_EQ(chmod(path.c_str(), 0644), 0);
  LOCKSTEP_ASSERT_OK(WriteSecretFile(path, "new-token"));
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  absl::StatusOr<std::string> token_or = ReadSecretFile(path);
  LOCKSTEP_ASSERT_OK(token_or.status());
  std::string token = *token_or;
  EXPECT_EQ(token, "new-token");
}

}  // namespace
}  // namespace lockstep::security
