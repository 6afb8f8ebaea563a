// `lockstep router --config FILE [--http-listen H:P] [--grpc-listen H:P]`: runs the
// router until SIGINT or SIGTERM. Prints one line when serving:
//   lockstep router: http 127.0.0.1:8000 grpc 127.0.0.1:50051
#ifndef LOCKSTEP_RUNTIME_ROUTER_ROUTER_MAIN_H_
#define LOCKSTEP_RUNTIME_ROUTER_ROUTER_MAIN_H_

#include <string>
#include <vector>

namespace lockstep::router {

int RunRouter(const std::vector<std::string>& args);

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_ROUTER_MAIN_H_
