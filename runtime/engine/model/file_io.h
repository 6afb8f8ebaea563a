// Whole-file reads and writes with errors that name the file.
#ifndef LOCKSTEP_RUNTIME_ENGINE_MODEL_FILE_IO_H_
#define LOCKSTEP_RUNTIME_ENGINE_MODEL_FILE_IO_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lockstep::engine {

absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// Writes `data` to `path.tmp`, then renames it over `path`.
absl::Status WriteStringToFile(const std::string& path, absl::string_view data);

// Creates `dir` and its missing parents.
absl::Status MakeDirectories(const std::string& dir);

// `dir` + "/" + `name`.
std::string JoinPath(const std::string& dir, const std::string& name);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_MODEL_FILE_IO_H_
