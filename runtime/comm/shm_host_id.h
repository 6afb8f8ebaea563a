// The identity of the shared-memory domain a process runs in, published by each rank
// through the rendezvous so that `auto` transport selection can tell whether every
// rank of a group can reach the same /dev/shm.
//
// "<boot id>/<hostname>/shm-dev:<device>:<inode>": the kernel's boot id (one per
// boot of one machine or VM), the hostname (containers on one machine usually differ
// here), and the filesystem behind /dev/shm, where shm_open names live (two processes
// share POSIX shared memory only through one such mount). Equal ids mean the same
// kernel, host name and /dev/shm; a part that cannot be read is replaced by a value
// unique to this process, so that such a rank never looks co-located with anyone
// (auto then picks gloo).
//
// Thread safety: thread-safe.
#ifndef LOCKSTEP_RUNTIME_COMM_SHM_HOST_ID_H_
#define LOCKSTEP_RUNTIME_COMM_SHM_HOST_ID_H_

#include <string>

namespace lockstep::comm {

std::string ShmHostId();

}  // namespace lockstep::comm

#endif  // LOCKSTEP_RUNTIME_COMM_SHM_HOST_ID_H_
