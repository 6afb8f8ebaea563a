// A loopback port held bound but not listening, for tests of connection errors:
// connecting is refused, and no other process can take the port while this object
// holds it (unlike a port that a test picks, closes, and then hopes is still free).
#ifndef LOCKSTEP_COMMON_TESTING_REFUSING_PORT_H_
#define LOCKSTEP_COMMON_TESTING_REFUSING_PORT_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace lockstep::testing {

class RefusingPort {
 public:
  RefusingPort() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
        getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
      port_ = ntohs(address.sin_port);
    }
  }
  ~RefusingPort() {
    if (fd_ >= 0) close(fd_);
  }
  RefusingPort(const RefusingPort&) = delete;
  RefusingPort& operator=(const RefusingPort&) = delete;

  // 0 when the port could not be bound (the test should ASSERT_GT(port(), 0)).
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace lockstep::testing

#endif  // LOCKSTEP_COMMON_TESTING_REFUSING_PORT_H_
