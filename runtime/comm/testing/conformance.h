// The reference behaviour of every Communicator operation, written once and run on
// every implementation (ranks as threads or as processes).
//
// Each rank calls RunConformance with the same seed. Every input of every rank is a
// pure function of (seed, round, rank), so each rank computes the expected result of
// each operation locally from all ranks' inputs and compares it with what the
// Communicator produced. Sizes vary per round and per rank (empty blocks included).
#ifndef LOCKSTEP_RUNTIME_COMM_TESTING_CONFORMANCE_H_
#define LOCKSTEP_RUNTIME_COMM_TESTING_CONFORMANCE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/comm/communicator.h"

namespace lockstep::comm::testing {

// Runs `rounds` rounds of every operation (AllReduce sum/min/max, AllGather,
// AllGatherBytes, Broadcast and Gather from a root that moves with the round,
// AllToAll, AllToAllV, AllToAllBytes, Barrier). Returns the first call error, or
// Internal naming the operation, round and first wrong element.
absl::Status RunConformance(Communicator& comm, uint64_t seed, int rounds,
                            absl::Duration timeout = absl::Seconds(10));

}  // namespace lockstep::comm::testing

#endif  // LOCKSTEP_RUNTIME_COMM_TESTING_CONFORMANCE_H_
