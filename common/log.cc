#include "common/log.h"

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "spdlog/sinks/dist_sink.h"
#include "spdlog/sinks/stdout_sinks.h"

namespace lockstep {
namespace {

// Process-wide logging state. Never destroyed, so loggers cached in call-site statics
// stay valid during static destruction.
struct LogState {
  std::mutex mu;
  std::shared_ptr<spdlog::sinks::dist_sink_mt> sink;
  std::vector<std::shared_ptr<spdlog::logger>> loggers;
  std::string tag = "tool/-/-";
  spdlog::level::level_enum level = spdlog::level::info;

  LogState() : sink(std::make_shared<spdlog::sinks::dist_sink_mt>()) {
    sink->add_sink(std::make_shared<spdlog::sinks::stderr_sink_mt>());
    sink->set_pattern(Pattern());
  }

  std::string Pattern() const {
    return absl::StrCat("[%Y-%m-%d %H:%M:%S.%e] [%L] [", tag, "] [%n] %v");
  }
};

LogState& State() {
  static LogState* state = new LogState();
  return *state;
}

}  // namespace

void InitLogging(const LogIdentity& identity, spdlog::level::level_enum level) {
  LogState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  s.tag = absl::StrCat(identity.role, "/", identity.instance, "/",
                       identity.rank >= 0 ? absl::StrCat("r", identity.rank) : "-");
  s.level = level;
  s.sink->set_pattern(s.Pattern());
  for (auto& logger : s.loggers) logger->set_level(level);
}

spdlog::logger* GetLogger(std::string_view module) {
  LogState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  for (auto& logger : s.loggers) {
    if (logger->name() == module) return logger.get();
  }
  auto logger = std::make_shared<spdlog::logger>(std::string(module), s.sink);
  logger->set_level(s.level);
  logger->flush_on(spdlog::level::warn);
  s.loggers.push_back(logger);
  return logger.get();
}

void AddLogSink(spdlog::sink_ptr sink) {
  LogState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  sink->set_pattern(s.Pattern());
  s.sink->add_sink(std::move(sink));
}

void RemoveLogSink(const spdlog::sink_ptr& sink) { State().sink->remove_sink(sink); }

void SetLogLevel(spdlog::level::level_enum level) {
  LogState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  s.level = level;
  for (auto& logger : s.loggers) logger->set_level(level);
}

void FlushAllLoggers() {
  LogState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  for (auto& logger : s.loggers) logger->flush();
}

std::string LogIdentityTag() {
  LogState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.tag;
}

}  // namespace lockstep
