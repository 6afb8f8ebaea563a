// Logging on spdlog: one named logger per module ("kv", "sched", "exec", "engine",
// "comm", "worker", "router", ...), all writing through one shared sink whose pattern
// carries the process identity (role, instance, rank), set once at start-up.
//
//   lockstep::InitLogging({.role = "generation", .instance = "gen0", .rank = 2});
//   LOCKSTEP_LOG_INFO("exec", "step {} vetoed by rank {}", step, rank);
//
// Thread safety: every function here is thread-safe. `InitLogging` is meant to be
// called once from main before other threads start; calling it again only changes the
// pattern. Per-token logging never goes above debug.
#ifndef LOCKSTEP_COMMON_LOG_H_
#define LOCKSTEP_COMMON_LOG_H_

#include <string>
#include <string_view>

#include "spdlog/sinks/sink.h"
#include "spdlog/spdlog.h"

namespace lockstep {

// Who this process is; shown in every log line as `role/instance/rN`.
struct LogIdentity {
  std::string role = "tool";
  std::string instance = "-";
  int rank = -1;  // -1: not a rank (router, launcher, tools).
};

// Sets the identity and the level of every logger (existing and future).
void InitLogging(const LogIdentity& identity,
                 spdlog::level::level_enum level = spdlog::level::info);

// The logger named `module`, created on first use. Never null; lives until exit.
spdlog::logger* GetLogger(std::string_view module);

// Adds a sink that receives every logger's output (tests capture lines with it).
void AddLogSink(spdlog::sink_ptr sink);
void RemoveLogSink(const spdlog::sink_ptr& sink);

void SetLogLevel(spdlog::level::level_enum level);
void FlushAllLoggers();

// The prefix the pattern puts in each line, e.g. "generation/gen0/r2".
std::string LogIdentityTag();

}  // namespace lockstep

// `module` must be a string literal: the logger is looked up once per call site.
#define LOCKSTEP_LOG(module, level, ...)                                             \
  do {                                                                               \
    static ::spdlog::logger* const lockstep_logger_ = ::lockstep::GetLogger(module); \
    if (lockstep_logger_->should_log(level)) {                                       \
      lockstep_logger_->log(level, __VA_ARGS__);                                     \
    }                                                                                \
  } while (false)

#define LOCKSTEP_LOG_TRACE(module, ...) LOCKSTEP_LOG(module, ::spdlog::level::trace, __VA_ARGS__)
#define LOCKSTEP_LOG_DEBUG(module, ...) LOCKSTEP_LOG(module, ::spdlog::level::debug, __VA_ARGS__)
#define LOCKSTEP_LOG_INFO(module, ...) LOCKSTEP_LOG(module, ::spdlog::level::info, __VA_ARGS__)
#define LOCKSTEP_LOG_WARN(module, ...) LOCKSTEP_LOG(module, ::spdlog::level::warn, __VA_ARGS__)
#define LOCKSTEP_LOG_ERROR(module, ...) LOCKSTEP_LOG(module, ::spdlog::level::err, __VA_ARGS__)
#define LOCKSTEP_LOG_CRITICAL(module, ...) \
  LOCKSTEP_LOG(module, ::spdlog::level::critical, __VA_ARGS__)

#endif  // LOCKSTEP_COMMON_LOG_H_
