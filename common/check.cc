#include "common/check.h"

#include <cstdio>
#include <cstdlib>

#include "common/log.h"

namespace lockstep::internal {

CheckFailure::CheckFailure(const char* file, int line, const char* condition)
    : file_(file), line_(line), condition_(condition) {}

CheckFailure::~CheckFailure() {
  const std::string message = stream_.str();
  LOCKSTEP_LOG_CRITICAL("check", "{}:{}: check failed: {} {}", file_, line_, condition_, message);
  FlushAllLoggers();
  // Also straight to stderr, in case logging itself is what broke.
  std::fprintf(stderr, "%s:%d: check failed: %s %s\n", file_, line_, condition_, message.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace lockstep::internal
