// CRC32C (Castagnoli; reflected polynomial 0x82F63B78, initial and final XOR ~0), the
// checksum of every KV block on the wire (proto/kv_transfer.proto). Three versions give
// the same values (checked by the tests): carry-less multiplication folding on 512-bit
// registers where the CPU has AVX-512 VPCLMULQDQ (~60 GB/s on one core), the SSE4.2
// crc32 instruction on three interleaved streams (~17 GB/s), a byte table otherwise.
//
// Thread safety: thread-safe (pure functions; the tables are built once).
#ifndef LOCKSTEP_RUNTIME_TRANSFER_CRC32C_H_
#define LOCKSTEP_RUNTIME_TRANSFER_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace lockstep::transfer {

// The CRC32C of `data[0, size)` appended to bytes whose CRC32C is `crc` (0 for none):
// Crc32cExtend(Crc32c(a), b) == Crc32c(a + b).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size);

inline uint32_t Crc32c(const void* data, size_t size) { return Crc32cExtend(0, data, size); }

// The portable table version (what Crc32cExtend falls back to), for tests.
uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t size);

// Whether Crc32cExtend uses the crc32 instruction / the 512-bit folding on this CPU.
bool Crc32cIsAccelerated();
bool Crc32cIsWide();

}  // namespace lockstep::transfer

#endif  // LOCKSTEP_RUNTIME_TRANSFER_CRC32C_H_
