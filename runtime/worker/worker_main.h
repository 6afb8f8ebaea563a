// `lockstep worker`: one rank of an instance.
//
//   lockstep worker --config FILE --role aggregated --instance NAME --rank R
//       --world-size N --rendezvous ADDR --listen ADDR
#ifndef LOCKSTEP_RUNTIME_WORKER_WORKER_MAIN_H_
#define LOCKSTEP_RUNTIME_WORKER_WORKER_MAIN_H_

#include <string>
#include <vector>

namespace lockstep::worker {

int RunWorker(const std::vector<std::string>& args);

}  // namespace lockstep::worker

#endif  // LOCKSTEP_RUNTIME_WORKER_WORKER_MAIN_H_
