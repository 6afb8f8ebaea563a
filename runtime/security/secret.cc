#include "runtime/security/secret.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace lockstep::security {

bool ConstantTimeEquals(std::string_view presented, std::string_view secret) {
  if (secret.empty()) return presented.empty();
  // One pass over `presented`, whatever the secret's length: byte i is compared with
  // the secret's byte i, or (past its end) with its first byte, chosen by a mask rather
  // than a branch. A length mismatch makes the result false on its own.
  size_t diff = presented.size() ^ secret.size();
  for (size_t i = 0; i < presented.size(); ++i) {
    const size_t in_secret = static_cast<size_t>(0) - static_cast<size_t>(i < secret.size());
    diff |= static_cast<uint8_t>(presented[i]) ^ static_cast<uint8_t>(secret[i & in_secret]);
  }
  // volatile keeps the compiler from turning the loop into an early exit.
  volatile size_t result = diff;
  return result == 0;
}

namespace {

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    const std::string what = absl::StrCat("cannot read secret file ", path, ": ", strerror(err));
    return err == EACCES ? absl::PermissionDeniedError(what) : absl::NotFoundError(what);
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

}  // namespace

absl::StatusOr<std::string> ReadSecretFile(const std::string& path) {
  absl::StatusOr<std::string> contents = ReadWholeFile(path);
  if (!contents.ok()) return contents.status();
  std::string secret(absl::StripTrailingAsciiWhitespace(*contents));
  if (secret.empty()) return absl::InvalidArgumentError(absl::StrCat("secret file ", path, " is empty"));
  return secret;
}

absl::StatusOr<std::vector<std::string>> ReadSecretLines(const std::string& path) {
  absl::StatusOr<std::string> contents = ReadWholeFile(path);
  if (!contents.ok()) return contents.status();
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(*contents, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    lines.emplace_back(line);
  }
  if (lines.empty()) return absl::InvalidArgumentError(absl::StrCat("secret file ", path, " lists no key"));
  return lines;
}

absl::StatusOr<std::string> GenerateToken() {
  std::array<char, 32> bytes;
  size_t filled = 0;
  while (filled < bytes.size()) {
    const ssize_t n = getrandom(bytes.data() + filled, bytes.size() - filled, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::InternalError(absl::StrCat("getrandom: ", strerror(errno)));
    filled += static_cast<size_t>(n);
  }
  return absl::BytesToHexString(absl::string_view(bytes.data(), bytes.size()));
}

absl::Status WriteSecretFile(const std::string& path, std::string_view secret) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path, ": ", strerror(errno)));
  // An existing file keeps its mode through O_CREAT; make it owner-only either way.
  absl::Status status;
  if (fchmod(fd, 0600) != 0) status = absl::InternalError(absl::StrCat("chmod ", path, ": ", strerror(errno)));
  const std::string text = std::string(secret) + "\n";
  size_t written = 0;
  while (status.ok() && written < text.size()) {
    const ssize_t n = write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) status = absl::InternalError(absl::StrCat("write ", path, ": ", strerror(errno)));
    else written += static_cast<size_t>(n);
  }
  close(fd);
  return status;
}

}  // namespace lockstep::security
