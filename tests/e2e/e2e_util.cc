#include "tests/e2e/e2e_util.h"

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "runtime/engine/make_model.h"

namespace lockstep::e2e {

absl::Status EnsureTinyMoe(const std::string& dir) {
  static absl::Mutex mu(absl::kConstInit);
  absl::MutexLock lock(&mu);
  if (std::filesystem::exists(std::filesystem::path(dir) / "config.json")) {
    return absl::OkStatus();
  }
  engine::MakeModelOptions options;
  options.preset = "tiny-moe";
  options.out_dir = dir;
  options.seed = 7;
  return engine::MakeModel(options);
}

std::string LockstepBinary() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir ? srcdir : ".", "/", workspace ? workspace : "lockstep",
                      "/tools/lockstep");
}

std::string TestTmpDir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return tmp ? tmp : "/tmp";
}

}  // namespace lockstep::e2e
