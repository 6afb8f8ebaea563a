// CRC32C (Castagnoli; reflected polynomial 0x82F63B78, initial and final XOR ~0), the
// checksum of every KV block on the wire (proto/kv_transfer.proto). Three paths give the
// same values (the tests check every path the CPU running them has):
//   kFold512     carry-less multiplication folding on 512-bit registers (x86 AVX-512
//                with VPCLMULQDQ; ~60 GB/s on one core)
//   kInstruction the crc32 instruction on three interleaved streams (x86 SSE4.2, ~17
//                GB/s; the AArch64 CRC32 extension of Grace and every Neoverse)
//   kPortable    a byte table (~0.35 GB/s)
// Crc32cExtend takes the fastest the CPU has (docs/perf/transfer.md).
//
// Thread safety: thread-safe (pure functions; the tables are built once).
#ifndef LOCKSTEP_RUNTIME_TRANSFER_CRC32C_H_
#define LOCKSTEP_RUNTIME_TRANSFER_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace lockstep::transfer {

enum class Crc32cPath { kPortable, kInstruction, kFold512 };

// The CRC32C of `data[0, size)` appended to bytes whose CRC32C is `crc` (0 for none):
// Crc32cExtend(Crc32c(a), b) == Crc32c(a + b).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size);

inline uint32_t Crc32c(const void* data, size_t size) { return Crc32cExtend(0, data, size); }

// Crc32cExtend on one path (for tests and benchmarks); a path this CPU lacks runs the
// portable one.
uint32_t Crc32cExtendWith(Crc32cPath path, uint32_t crc, const void* data, size_t size);

// Whether this CPU (and this build's architecture) has `path`; kPortable always.
bool Crc32cSupports(Crc32cPath path);
// The path Crc32cExtend takes on this CPU, and a path's name ("512-bit clmul", ...).
Crc32cPath Crc32cFastestPath();
const char* Crc32cPathName(Crc32cPath path);

}  // namespace lockstep::transfer

#endif  // LOCKSTEP_RUNTIME_TRANSFER_CRC32C_H_
