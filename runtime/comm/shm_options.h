// Options of one rank of a ShmCommunicator group (see shm_communicator.h).
#ifndef LOCKSTEP_RUNTIME_COMM_SHM_OPTIONS_H_
#define LOCKSTEP_RUNTIME_COMM_SHM_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace lockstep::comm {

struct ShmOptions {
  // The segment's shm_open name without the leading '/': unique per group and per
  // launch (ShmSegmentName(instance, epoch, group)). [A-Za-z0-9._-], at most 200.
  std::string name;
  int rank = 0;
  int world_size = 1;
  // Payload bytes a rank moves per round (larger payloads take several rounds). Used
  // by rank 0, which creates the segment; the others adopt the segment's. The segment
  // takes about world_size * 2 * chunk_bytes of /dev/shm. 256 KiB rounds stay in the
  // L2 cache between the writer's and the readers' copies: on the 2-core VM a 2 MiB
  // all-to-all-v took 140 us with them, 330-590 us with 1-4 MiB (docs/perf.md).
  int64_t chunk_bytes = int64_t{256} << 10;
  // Bound on the bootstrap: until every rank has attached.
  absl::Duration connect_timeout = absl::Seconds(30);
  // How long a waiting rank busy-polls before it sleeps on the futex. While the group
  // has more ranks than the CPUs a rank may run on, the poll yields the CPU between
  // checks, and the wait that ends a direct call (peers still copying) sleeps at once.
  // It must outlast a futex wake-up: on the 2-core VM an idle vCPU took ~35 us to
  // wake, and with a 20 us spin two ranks fell into a cycle of putting each other to
  // sleep (35 us per vote instead of 1 us; docs/perf.md).
  absl::Duration spin = absl::Microseconds(50);
  // How often a sleeping rank checks whether the peers it waits for still exist.
  absl::Duration liveness_interval = absl::Milliseconds(10);
  // Ops whose receivers read distinct parts of each payload (all-to-alls, gathers,
  // broadcasts) move a payload of at least direct_min_bytes with one copy: each
  // receiver reads the sender's buffer in place (shm_direct.h), then one more round
  // tells the senders they may return. Used only if every rank can read every peer
  // (probed at join; every rank must set the same direct_copy). Otherwise, and for
  // smaller payloads, bytes are staged through the segment (two copies).
  bool direct_copy = true;
  int64_t direct_min_bytes = int64_t{64} << 10;
};

}  // namespace lockstep::comm

#endif  // LOCKSTEP_RUNTIME_COMM_SHM_OPTIONS_H_
