// The `bazel test` side of every fuzz target: runs LLVMFuzzerTestOneInput on each file
// of the corpus directories given as arguments, then on a bounded number of mutations
// of them (bit flips, byte changes, insertions, deletions, truncations, splices), so
// that CI exercises each target for a few seconds without libFuzzer. The libFuzzer
// build of the same target (`*_fuzzer`, docs/security.md) explores for as long as asked.
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

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::string g_current;  // the input being run, written out if it crashes
std::string g_crash_path;

void WriteCrash(int signal) {
  std::ofstream(g_crash_path, std::ios::binary) << g_current;
  std::fprintf(stderr, "fuzz_driver: signal %d; input written to %s\n", signal,
               g_crash_path.c_str());
  std::signal(signal, SIG_DFL);
  std::raise(signal);
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

int main(int argc, char** argv) {
  std::vector<std::string> corpus;
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
  std::signal(SIGSEGV, WriteCrash);
  std::signal(SIGABRT, WriteCrash);
  std::signal(SIGFPE, WriteCrash);
  std::signal(SIGBUS, WriteCrash);
  std::fprintf(stderr, "fuzz_driver: %zu corpus inputs, %ld mutations, --seed=%llu\n",
               corpus.size(), iterations, static_cast<unsigned long long>(seed));
  for (const std::string& input : corpus) Run(input);
  std::mt19937_64 rng(seed);
  for (long i = 0; i < iterations; ++i) {
    Run(Mutate(corpus[rng() % corpus.size()], corpus, rng));
  }
  std::fprintf(stderr, "fuzz_driver: ok\n");
  return 0;
}
