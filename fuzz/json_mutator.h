// Structure-aware mutation of JSON inputs for the fuzz targets that parse JSON (the
// router's request bodies, the chat template's context): byte mutations of the seed
// corpus almost never produce a document nested thousands of levels deep or an array
// of a hundred thousand elements, which are what overflowed the router's stack and
// what bounds its memory (docs/security.md §6). MutateJson picks a value of the
// document (a scanner finds value boundaries; malformed input is handled) and
// replaces it with one of:
//   * the value wrapped in N arrays or objects, N mostly around the depth limit (64),
//     sometimes up to 100,000;
//   * an array or object of up to 100,000 copies of the value (objects with distinct
//     or repeated keys);
//   * a random JSON tree (GenerateJson) with deep chains and wide nodes;
//   * an integer or number at a type's edge (int32, int64, uint64, 1e400, -0).
//
// A target uses it by defining LLVMFuzzerCustomMutator as MutateJsonInput, which
// libFuzzer then calls instead of its own mutations; half the time it makes libFuzzer's
// byte mutations (LLVMFuzzerMutate) instead. fuzz_driver.cc, the `bazel test` side,
// calls a target's custom mutator for part of its iterations and provides
// LLVMFuzzerMutate itself. Long runs need room for deep values: run_fuzzers.sh gives
// these targets -max_len=1048576.
//
// Thread-compatible; deterministic for a given seed.
#ifndef LOCKSTEP_FUZZ_JSON_MUTATOR_H_
#define LOCKSTEP_FUZZ_JSON_MUTATOR_H_

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>

namespace lockstep::fuzz {

// A random JSON value of at most about `budget` bytes.
std::string GenerateJson(std::mt19937_64& rng, size_t budget);

// `json` with one value replaced as above; the result is at most `max_size` bytes
// (a replacement that would not fit is not made).
std::string MutateJson(std::string_view json, std::mt19937_64& rng, size_t max_size);

// The custom mutator of a target whose input is `prefix` bytes (left as they are)
// followed by JSON: LLVMFuzzerCustomMutator's contract (returns the new size).
size_t MutateJsonInput(uint8_t* data, size_t size, size_t max_size, unsigned int seed,
                       size_t prefix);

}  // namespace lockstep::fuzz

// libFuzzer's byte mutator (fuzz_driver.cc's outside libFuzzer).
extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

#endif  // LOCKSTEP_FUZZ_JSON_MUTATOR_H_
