#include "runtime/worker/instance_bootstrap.h"

#include <fcntl.h>
#include <unistd.h>

#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "runtime/comm/gloo_communicator.h"
#include "runtime/comm/rendezvous_client.h"
#include "runtime/comm/rendezvous_store.h"
#include "runtime/comm/shm_communicator.h"
#include "runtime/comm/shm_host_id.h"
#include "runtime/comm/shm_segment.h"

namespace lockstep::worker {
namespace {

constexpr char kGloo[] = "gloo";
constexpr char kShm[] = "shm";
constexpr char kNccl[] = "nccl";  // made by the device engine, not here
// The two groups of an instance: gloo key prefix and shm segment suffix.
constexpr char kExecutorGroup[] = "exec";
constexpr char kEngineGroup[] = "engine";

// The leader's transport decision for both groups.
struct TransportChoice {
  std::string executor = kGloo;
  std::string engine = kGloo;
  std::string reason;  // why, for the log: where the ranks are
};

// One group's transport: `split` says how the ranks are spread over hosts (empty when
// every rank is on the leader's host).
absl::StatusOr<std::string> Resolve(config::CommTransport wanted, absl::string_view field,
                                    const std::string& split) {
  switch (wanted) {
    case config::CommTransport::kGloo:
      return std::string(kGloo);
    case config::CommTransport::kAuto:
      return std::string(split.empty() ? kShm : kGloo);
    case config::CommTransport::kShm:
      if (!split.empty()) {
        return absl::FailedPreconditionError(
            absl::StrCat(field, " is shm, but the ranks are not on one host: ", split));
      }
      return std::string(kShm);
    case config::CommTransport::kNccl:
      // The CUDA engine makes its NCCL group itself (under this epoch); validation
      // refuses it for the executor's group and for engines without GPUs.
      if (field == "comm.engine_transport") return std::string(kNccl);
      return absl::FailedPreconditionError(
          absl::StrCat(field, " is nccl, which only the CUDA engine's own group takes"));
  }
  return absl::InvalidArgumentError(absl::StrCat(field, ": unknown transport"));
}

// The leader's choice from every rank's host id (hosts[r] is rank r's).
absl::StatusOr<TransportChoice> Choose(const BootstrapOptions& options,
                                       const std::vector<std::string>& hosts) {
  std::string split;
  for (size_t r = 1; r < hosts.size() && split.empty(); ++r) {
    if (hosts[r] != hosts[0]) {
      split = absl::StrCat("rank 0 is on ", hosts[0], ", rank ", r, " on ", hosts[r]);
    }
  }
  TransportChoice choice;
  ASSIGN_OR_RETURN(choice.executor, Resolve(options.vote_transport, "comm.vote_transport", split));
  ASSIGN_OR_RETURN(choice.engine,
                   Resolve(options.engine_transport, "comm.engine_transport", split));
  choice.reason =
      split.empty() ? absl::StrCat("all ", hosts.size(), " ranks on host ", hosts[0]) : split;
  return choice;
}

// "<epoch>/transport": "ok;<executor>;<engine>;<reason>" or "error;<message>".
std::string EncodeChoice(const absl::StatusOr<TransportChoice>& choice) {
  if (!choice.ok()) return absl::StrCat("error;", choice.status().message());
  return absl::StrCat("ok;", choice->executor, ";", choice->engine, ";", choice->reason);
}

absl::StatusOr<TransportChoice> DecodeChoice(absl::string_view value) {
  std::vector<std::string> parts = absl::StrSplit(value, absl::MaxSplits(';', 3));
  if (parts.size() == 2 && parts[0] == "error") return absl::FailedPreconditionError(parts[1]);
  if (parts.size() != 4 || parts[0] != "ok") {
    return absl::InternalError(absl::StrCat("unreadable transport choice '", value, "'"));
  }
  return TransportChoice{parts[1], parts[2], parts[3]};
}

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

absl::StatusOr<std::unique_ptr<comm::Communicator>> MakeGroup(
    comm::RendezvousClient* client, const BootstrapOptions& options, const std::string& epoch,
    absl::string_view group, absl::string_view transport, absl::Duration remaining) {
  if (transport == kNccl) return std::unique_ptr<comm::Communicator>();
  if (transport == kShm) {
    comm::ShmOptions s;
    s.name = comm::ShmSegmentName(options.instance, epoch, group);
    s.rank = options.rank;
    s.world_size = options.world_size;
    s.connect_timeout = remaining;
    ASSIGN_OR_RETURN(std::unique_ptr<comm::ShmCommunicator> shm, comm::ShmCommunicator::Create(s));
    return std::unique_ptr<comm::Communicator>(std::move(shm));
  }
  const std::string prefix = absl::StrCat(epoch, "/", group);
  comm::RendezvousStore store(client, remaining);
  comm::GlooOptions g;
  g.rank = options.rank;
  g.world_size = options.world_size;
  g.store = &store;
  g.prefix = prefix;
  g.hostname = options.hostname;
  g.connect_timeout = remaining;
  g.store_error = [&store] { return store.first_error(); };
  ASSIGN_OR_RETURN(std::unique_ptr<comm::GlooCommunicator> gloo, comm::GlooCommunicator::Create(g));
  return std::unique_ptr<comm::Communicator>(std::move(gloo));
}

}  // namespace

absl::StatusOr<InstanceGroups> BootstrapInstance(const BootstrapOptions& options) {
  const absl::Time deadline = absl::Now() + options.timeout;
  std::unique_ptr<comm::RendezvousClient> client =
      comm::RendezvousClient::Connect(options.rendezvous_address, options.instance);
  InstanceGroups groups;
  const std::string host = options.host_id.empty() ? comm::ShmHostId() : options.host_id;
  absl::StatusOr<TransportChoice> choice;
  if (options.rank == 0) {
    groups.epoch = RandomNonce();
    // The previous launch's segment names, if a crash in its bootstrap left them.
    absl::StatusOr<std::string> previous = client->Get("leader");
    if (!previous.ok() && !absl::IsNotFound(previous.status())) return previous.status();
    if (previous.ok() && *previous != groups.epoch) {
      for (absl::string_view group : {kExecutorGroup, kEngineGroup}) {
        const std::string stale = comm::ShmSegmentName(options.instance, *previous, group);
        if (absl::Status removed = comm::UnlinkShmSegment(stale); !removed.ok()) {
          LOCKSTEP_LOG_WARN("worker", "instance {}: {}", options.instance, removed.ToString());
        }
      }
    }
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
    std::vector<std::string> hosts = {host};
    for (int r = 1; r < options.world_size; ++r) {
      ASSIGN_OR_RETURN(std::string peer_host, client->Get(absl::StrCat(groups.epoch, "/host/", r)));
      hosts.push_back(std::move(peer_host));
    }
    choice = Choose(options, hosts);
    RETURN_IF_ERROR(client->Set(absl::StrCat(groups.epoch, "/transport"), EncodeChoice(choice)));
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
        RETURN_IF_ERROR(client->Set(absl::StrCat(*leader, "/host/", options.rank), host));
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
  if (options.rank != 0) {
    ASSIGN_OR_RETURN(const std::string value,
                     client->Get(absl::StrCat(groups.epoch, "/transport")));
    choice = DecodeChoice(value);
  }
  if (!choice.ok()) {
    return absl::Status(choice.status().code(),
                        absl::StrCat("instance ", options.instance, " rank ", options.rank, ": ",
                                     choice.status().message()));
  }
  groups.executor_transport = choice->executor;
  groups.engine_transport = choice->engine;
  LOCKSTEP_LOG_INFO("worker",
                    "instance {} epoch {}: connecting {} ranks; executor collectives over {}, "
                    "engine collectives over {} ({})",
                    options.instance, groups.epoch, options.world_size, choice->executor,
                    choice->engine, choice->reason);
  ASSIGN_OR_RETURN(groups.executor, MakeGroup(client.get(), options, groups.epoch, kExecutorGroup,
                                              choice->executor, deadline - absl::Now()));
  ASSIGN_OR_RETURN(groups.engine, MakeGroup(client.get(), options, groups.epoch, kEngineGroup,
                                            choice->engine, deadline - absl::Now()));
  return groups;
}

}  // namespace lockstep::worker
