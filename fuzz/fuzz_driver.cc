// The `bazel test` side of every fuzz target: runs LLVMFuzzerTestOneInput on each file
// of the corpus directories given as arguments, then on a bounded number of mutations
// of them (bit flips, byte changes, insertions, deletions, truncations, splices), so
// that CI exercises each target for a few seconds without libFuzzer. A target that
// defines LLVMFuzzerCustomMutator (a structure-aware one: json_mutator.h) gets it for
// one mutation in four, with this driver's byte mutations as its LLVMFuzzerMutate. The
// libFuzzer build of the same target (`*_fuzzer`, docs/security.md) explores for as
// long as asked.
//
//   fuzz_driver_test CORPUS_DIR... [--iterations=N] [--seed=S]
//
// A crash is the test failing; the input that caused it is written to
// $TEST_UNDECLARED_OUTPUTS_DIR (or the working directory) as crash-<seed>-<i>, to be
// added to the corpus as a regression input.
#include <algorithm>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
// Defined by structure-aware targets only.
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) __attribute__((weak));

namespace {

std::string g_current;  // the input being run, written out if it crashes
std::string g_crash_path;
std::vector<std::string> g_corpus;
std::mt19937_64 g_rng;

// The most a custom mutator may make of an input (room for deep and wide JSON).
constexpr size_t kMaxCustomSize = size_t{1} << 20;

// Runs on its own stack (a stack overflow leaves none), so only async-signal-safe calls.
void WriteCrash(int signal) {
  const int fd = ::open(g_crash_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    for (size_t done = 0; done < g_current.size();) {
      const ssize_t n = ::write(fd, g_current.data() + done, g_current.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    ::close(fd);
  }
  static constexpr char kMessage[] = "fuzz_driver: crashed; the input is written to ";
  (void)!::write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
  (void)!::write(STDERR_FILENO, g_crash_path.c_str(), g_crash_path.size());
  (void)!::write(STDERR_FILENO, "\n", 1);
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

// WriteCrash for the fatal signals, on an alternate stack.
void InstallCrashHandlers() {
  static char alternate_stack[1 << 16];
  stack_t stack{};
  stack.ss_sp = alternate_stack;
  stack.ss_size = sizeof(alternate_stack);
  ::sigaltstack(&stack, nullptr);
  struct sigaction action {};
  action.sa_handler = WriteCrash;
  action.sa_flags = SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  for (const int signal : {SIGSEGV, SIGABRT, SIGFPE, SIGBUS}) ::sigaction(signal, &action, nullptr);
}

void Run(const std::string& input) {
  g_current = input;
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

std::string Mutate(std::string input, const std::vector<std::string>& corpus, std::mt19937_64& rng) {
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    const size_t size = input.size();
    switch (rng() % 7) {
      case 0:  // flip a bit
        if (size > 0) input[rng() % size] ^= static_cast<char>(1 << (rng() % 8));
        break;
      case 1:  // replace a byte, often with an interesting one
        if (size > 0) {
          static constexpr char kInteresting[] = {0, 1, '\x7f', '\x80', '\xff', '"', '\\', '{',
                                                  '}', '[', ']', ':', ',', '\n', '-', '9'};
          input[rng() % size] = rng() % 2 ? static_cast<char>(rng())
                                          : kInteresting[rng() % sizeof(kInteresting)];
        }
        break;
      case 2:  // insert random bytes
        input.insert(size == 0 ? 0 : rng() % (size + 1), std::string(1 + rng() % 8, static_cast<char>(rng())));
        break;
      case 3:  // delete a range
        if (size > 0) {
          const size_t at = rng() % size;
          input.erase(at, 1 + rng() % std::min<size_t>(16, size - at));
        }
        break;
      case 4:  // truncate
        if (size > 0) input.resize(rng() % size);
        break;
      case 5: {  // splice with another corpus input
        const std::string& other = corpus[rng() % corpus.size()];
        if (!other.empty()) {
          const size_t from = rng() % other.size();
          input.insert(size == 0 ? 0 : rng() % (size + 1), other.substr(from, 1 + rng() % 64));
        }
        break;
      }
      case 6:  // duplicate a range
        if (size > 0) {
          const size_t at = rng() % size;
          input.insert(at, input.substr(at, 1 + rng() % 32));
        }
        break;
    }
  }
  return input;
}

}  // namespace

// libFuzzer's byte mutator, for the custom mutators: this driver's mutations.
extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size) {
  std::string mutated =
      Mutate(std::string(reinterpret_cast<const char*>(data), size), g_corpus, g_rng);
  mutated.resize(std::min(mutated.size(), max_size));
  std::memcpy(data, mutated.data(), mutated.size());
  return mutated.size();
}

int main(int argc, char** argv) {
  std::vector<std::string>& corpus = g_corpus;
  long iterations = 20000;
  uint64_t seed = std::random_device()();
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--iterations=", 0) == 0) {
      iterations = std::strtol(arg.c_str() + 13, nullptr, 10);
    } else if (arg.rfind("--seed=", 0) == 0) {
      seed = std::strtoull(arg.c_str() + 7, nullptr, 10);
    } else {
      for (const auto& entry : std::filesystem::directory_iterator(arg)) {
        if (!entry.is_regular_file()) continue;
        std::ifstream in(entry.path(), std::ios::binary);
        std::stringstream contents;
        contents << in.rdbuf();
        corpus.push_back(contents.str());
      }
    }
  }
  if (corpus.empty()) {
    std::fprintf(stderr, "fuzz_driver: no corpus files\n");
    return 1;
  }
  const char* out_dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  g_crash_path = std::string(out_dir != nullptr ? out_dir : ".") + "/crash-" + std::to_string(seed);
  InstallCrashHandlers();
  std::fprintf(stderr, "fuzz_driver: %zu corpus inputs, %ld mutations, --seed=%llu\n",
               corpus.size(), iterations, static_cast<unsigned long long>(seed));
  for (const std::string& input : corpus) Run(input);
  std::mt19937_64& rng = g_rng;
  rng.seed(seed);
  std::string buffer;
  for (long i = 0; i < iterations; ++i) {
    const std::string& input = corpus[rng() % corpus.size()];
    if (LLVMFuzzerCustomMutator != nullptr && rng() % 4 == 0 && input.size() <= kMaxCustomSize) {
      buffer.assign(kMaxCustomSize, '\0');
      std::memcpy(buffer.data(), input.data(), input.size());
      buffer.resize(LLVMFuzzerCustomMutator(reinterpret_cast<uint8_t*>(buffer.data()), input.size(),
                                            kMaxCustomSize, static_cast<unsigned int>(rng())));
      Run(buffer);
    } else {
      Run(Mutate(input, corpus, rng));
    }
  }
  std::fprintf(stderr, "fuzz_driver: ok\n");
  return 0;
}
