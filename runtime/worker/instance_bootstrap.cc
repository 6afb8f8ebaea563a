#include "runtime/worker/instance_bootstrap.h"

#include <fcntl.h>
#include <unistd.h>

#include <random>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "runtime/comm/gloo_communicator.h"
#include "runtime/comm/rendezvous_client.h"
#include "runtime/comm/rendezvous_store.h"

namespace lockstep::worker {
namespace {

std::string RandomNonce() {
  uint64_t value = 0;
  const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    if (read(fd, &value, sizeof(value)) != static_cast<ssize_t>(sizeof(value))) value = 0;
    close(fd);
  }
  if (value == 0) {
    std::random_device rd;
    value = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(getpid());
  }
  return absl::StrCat(absl::Hex(value, absl::kZeroPad16));
}

absl::StatusOr<std::unique_ptr<comm::Communicator>> MakeGroup(comm::RendezvousClient* client,
                                                              const BootstrapOptions& options,
                                                              const std::string& prefix,
                                                              absl::Duration remaining) {
  comm::RendezvousStore store(client, remaining);
  comm::GlooOptions g;
  g.rank = options.rank;
  g.world_size = options.world_size;
  g.store = &store;
  g.prefix = prefix;
  g.hostname = options.hostname;
  g.connect_timeout = remaining;
  g.store_error = [&store] { return store.first_error(); };
  ASSIGN_OR_RETURN(std::unique_ptr<comm::GlooCommunicator> group,
                   comm::GlooCommunicator::Create(g));
  return std::unique_ptr<comm::Communicator>(std::move(group));
}

}  // namespace

absl::StatusOr<InstanceGroups> BootstrapInstance(const BootstrapOptions& options) {
  const absl::Time deadline = absl::Now() + options.timeout;
  std::unique_ptr<comm::RendezvousClient> client =
      comm::RendezvousClient::Connect(options.rendezvous_address, options.instance);
  InstanceGroups groups;
  if (options.rank == 0) {
    groups.epoch = RandomNonce();
    RETURN_IF_ERROR(client->Set("leader", groups.epoch));
    std::vector<std::string> joins;
    for (int r = 1; r < options.world_size; ++r) {
      joins.push_back(absl::StrCat(groups.epoch, "/join/", r));
    }
    if (!joins.empty()) {
      absl::Status joined = client->Wait(joins, deadline - absl::Now());
      if (!joined.ok()) {
        return absl::Status(joined.code(),
                            absl::StrCat("instance ", options.instance,
                                         ": not every rank joined: ", joined.message()));
      }
    }
    // Acknowledge each joiner under its own nonce: an acknowledgement can only ever be
    // read by the process that chose that nonce.
    for (int r = 1; r < options.world_size; ++r) {
      ASSIGN_OR_RETURN(const std::string nonce,
                       client->Get(absl::StrCat(groups.epoch, "/join/", r)));
      RETURN_IF_ERROR(client->Set(absl::StrCat(groups.epoch, "/ack/", r, "/", nonce), "1"));
    }
  } else {
    const std::string nonce = RandomNonce();
    while (true) {
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat("instance ", options.instance, " rank ", options.rank,
                         ": the leader did not start the instance within ",
                         absl::FormatDuration(options.timeout)));
      }
      absl::StatusOr<std::string> leader = client->Get("leader");
      if (leader.ok()) {
        RETURN_IF_ERROR(client->Set(absl::StrCat(*leader, "/join/", options.rank), nonce));
        const absl::Duration wait = std::min(absl::Seconds(1), deadline - absl::Now());
        if (client->Wait({absl::StrCat(*leader, "/ack/", options.rank, "/", nonce)}, wait).ok()) {
          groups.epoch = *leader;
          break;
        }
      } else if (!absl::IsNotFound(leader.status())) {
        return leader.status();
      } else {
        // The leader has not published yet: wait for the key to appear (bounded).
        (void)client->Wait({"leader"}, std::min(absl::Seconds(1), deadline - absl::Now()));
      }
    }
  }
  LOCKSTEP_LOG_INFO("worker", "instance {} epoch {}: connecting {} ranks", options.instance,
                    groups.epoch, options.world_size);
  ASSIGN_OR_RETURN(groups.executor,
                   MakeGroup(client.get(), options, absl::StrCat(groups.epoch, "/exec"),
                             deadline - absl::Now()));
  ASSIGN_OR_RETURN(groups.engine,
                   MakeGroup(client.get(), options, absl::StrCat(groups.epoch, "/engine"),
                             deadline - absl::Now()));
  return groups;
}

}  // namespace lockstep::worker
