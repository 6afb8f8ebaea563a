// The identity of the shared-memory domain a process runs in, published by each rank
// through the rendezvous so that `auto` transport selection can tell whether every
// rank of a group can reach the same /dev/shm.
//
// "<boot id>/<hostname>/<ipc namespace>": the kernel's boot id (one per boot of one
// machine or VM), the hostname (containers on one machine differ here), and the IPC
// namespace (two processes can share POSIX shared memory only inside one). Equal ids
// mean the same kernel, the same host name and the same IPC namespace; a part that
// cannot be read is replaced by a value unique to this process, so that such a rank
// never looks co-located with anyone (auto then picks gloo).
//
// Thread safety: thread-safe.
#ifndef LOCKSTEP_RUNTIME_COMM_SHM_HOST_ID_H_
#define LOCKSTEP_RUNTIME_COMM_SHM_HOST_ID_H_

#include <string>

namespace lockstep::comm {

std::string ShmHostId();

}  // namespace lockstep::comm

#endif  // LOCKSTEP_RUNTIME_COMM_SHM_HOST_ID_H_
