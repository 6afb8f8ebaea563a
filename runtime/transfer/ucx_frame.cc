// UcxWorker's framing of the UCX bytes that travel to peers (worker addresses, packed
// remote keys): ucx_internal::Frame and UcxWorker::Unframe.
#include <cstring>
#include <string>

#include "absl/base/internal/endian.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "runtime/transfer/crc32c.h"
#include "runtime/transfer/ucx_worker.h"
#include "runtime/transfer/ucx_worker_internal.h"

namespace lockstep::transfer {
namespace {

// Framed UCX bytes (a worker address or a packed remote key) as they travel to peers:
// magic, kind, UCX major and minor version, CRC32C of the bytes and their length (both
// little-endian), then the bytes. UCX parses these bytes without a length and asserts
// (aborts the process) on what it does not expect, so a peer's bytes reach UCX only
// once the frame shows they are whole and made by the same UCX version.
constexpr char kFrameMagic[4] = {'L', 'S', 'U', 'X'};
constexpr size_t kFrameHeader = 4 + 1 + 2 + 4 + 4;
constexpr size_t kMaxFramed = size_t{1} << 20;

struct UcxVersion {
  unsigned major = 0, minor = 0;
};

UcxVersion LocalVersion() {
  unsigned major = 0, minor = 0, release = 0;
  ucp_get_version(&major, &minor, &release);
  return {major, minor};
}

}  // namespace

namespace ucx_internal {

std::string Frame(char kind, absl::string_view bytes) {
  const UcxVersion version = LocalVersion();
  std::string framed(kFrameHeader, '\0');
  std::memcpy(framed.data(), kFrameMagic, 4);
  framed[4] = kind;
  framed[5] = static_cast<char>(version.major);
  framed[6] = static_cast<char>(version.minor);
  absl::little_endian::Store32(framed.data() + 7, Crc32c(bytes.data(), bytes.size()));
  absl::little_endian::Store32(framed.data() + 11, static_cast<uint32_t>(bytes.size()));
  framed.append(bytes.data(), bytes.size());
  return framed;
}

}  // namespace ucx_internal

absl::StatusOr<absl::string_view> UcxWorker::Unframe(char kind, absl::string_view framed) {
  const absl::string_view what = kind == 'A' ? "UCX worker address" : "UCX remote key";
  const auto malformed = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("the context rank's ", what, " is malformed (",
                                                   framed.size(), " bytes): ", why));
  };
  if (framed.empty()) return malformed("empty");
  if (framed.size() < kFrameHeader || std::memcmp(framed.data(), kFrameMagic, 4) != 0) {
    return malformed("not framed by this data plane");
  }
  if (framed[4] != kind) return malformed("of another kind");
  const UcxVersion local = LocalVersion();
  const unsigned major = static_cast<unsigned char>(framed[5]);
  const unsigned minor = static_cast<unsigned char>(framed[6]);
  if (major != local.major || minor != local.minor) {
    return absl::FailedPreconditionError(
        absl::StrCat("the context rank's ", what, " was made by UCX ", major, ".", minor,
                     " and this rank runs UCX ", local.major, ".", local.minor,
                     ": UCX versions must match across ranks (or use transfer.transport tcp)"));
  }
  const uint32_t length = absl::little_endian::Load32(framed.data() + 11);
  if (length == 0 || length > kMaxFramed || length != framed.size() - kFrameHeader) {
    return malformed(
        absl::StrCat("says ", length, " bytes, carries ", framed.size() - kFrameHeader));
  }
  const absl::string_view bytes = framed.substr(kFrameHeader);
  if (Crc32c(bytes.data(), bytes.size()) != absl::little_endian::Load32(framed.data() + 7)) {
    return malformed("checksum mismatch");
  }
  return bytes;
}

}  // namespace lockstep::transfer
