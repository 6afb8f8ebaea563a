#include "tools/bench/http_error.h"

#include "absl/strings/str_cat.h"

namespace lockstep::bench {
namespace {

std::string Seconds(absl::Duration d) { return absl::StrCat(absl::ToDoubleSeconds(d), " s"); }

}  // namespace

std::string DescribeHttpError(httplib::Error error, absl::Duration idle,
                              absl::Duration read_timeout, absl::Duration connect_timeout) {
  switch (error) {
    case httplib::Error::Success:
      return "no error";
    case httplib::Error::Connection:
      return "connection refused (or the host is unreachable)";
    case httplib::Error::ConnectionTimeout:
      return absl::StrCat("connection timed out after ", Seconds(connect_timeout));
    case httplib::Error::BindIPAddress:
      return "cannot bind the local address";
    case httplib::Error::Read:
      if (idle >= read_timeout) return absl::StrCat("read timed out after ", Seconds(read_timeout));
      return "the server closed the connection before the response was complete";
    case httplib::Error::Write:
      return "the connection closed while sending the request";
    case httplib::Error::ExceedRedirectCount:
      return "too many redirects";
    case httplib::Error::Canceled:
      return "cancelled by the client";
    case httplib::Error::SSLConnection:
    case httplib::Error::SSLLoadingCerts:
    case httplib::Error::SSLServerVerification:
      return "TLS error";
    case httplib::Error::UnsupportedMultipartBoundaryChars:
      return "unsupported multipart boundary";
    case httplib::Error::Compression:
      return "cannot decompress the response";
    case httplib::Error::Unknown:
      break;
  }
  return absl::StrCat("unknown transport error (httplib error ", static_cast<int>(error), ")");
}

}  // namespace lockstep::bench
