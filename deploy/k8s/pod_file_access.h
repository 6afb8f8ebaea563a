// Who can read what in a rendered pod (tests only): the files each container sees from
// its pod's Secret and ConfigMap volumes, with the owner, group and mode kubelet gives
// them, and the user, group and supplementary groups the container runs as. Tests check
// with it that the image's user (deploy/docker/Dockerfile's USER) can read every mounted
// file, and lay the files out on disk to run the daemons as that user.
//
// The model (kubelet's Secret and ConfigMap volumes, pkg/volume): each file is owned by
// root (uid 0, gid 0) with its item's mode, else the volume's defaultMode, else 0644;
// with a pod fsGroup the file's group is fsGroup and the read bits 0440 are added (the
// volumes are read-only). A container runs as its securityContext's runAsUser and
// runAsGroup, else the pod's, else the image's, with the pod's fsGroup and
// supplementalGroups as supplementary groups. Reading follows Linux: the owner bits for
// the owner, else the group bits for a member of the file's group, else the other bits;
// uid 0 reads everything.
//
// Pure functions; thread-compatible.
#ifndef LOCKSTEP_DEPLOY_K8S_POD_FILE_ACCESS_H_
#define LOCKSTEP_DEPLOY_K8S_POD_FILE_ACCESS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "yaml-cpp/yaml.h"

namespace lockstep::deploy {

struct ImageUser {
  int64_t uid = 0;
  int64_t gid = 0;
};

// The last USER instruction of a Dockerfile's text. It must be numeric, "UID:GID"
// (Kubernetes checks runAsNonRoot only against a numeric user, and the group decides
// what the user reads); otherwise an error naming the line.
absl::StatusOr<ImageUser> ParseDockerfileUser(absl::string_view dockerfile);

// Who a container's processes are.
struct Identity {
  int64_t uid = 0;
  int64_t gid = 0;
  std::vector<int64_t> groups;  // supplementary
  // "uid 10001 gid 10001 groups [10001]"
  std::string Describe() const;
};

// A file a container sees from a Secret or ConfigMap volume.
struct MountedFile {
  std::string path;    // in the container
  std::string kind;    // "Secret" | "ConfigMap"
  std::string object;  // the Secret's or ConfigMap's name
  std::string key;     // its key; "*" when the whole object is mounted and its keys unknown
  int64_t uid = 0;
  int64_t gid = 0;
  int mode = 0644;
  // "/var/run/secrets/lockstep/cluster_token (Secret lockstep-cluster-token key token:
  // owner 0, group 10001, mode 0440)"
  std::string Describe() const;
};

struct ContainerFiles {
  std::string where;  // "Deployment/lockstep-router container router"
  Identity identity;
  std::vector<MountedFile> files;
  std::vector<std::string> command;
  // The container's env in order; a value from a fieldRef is "" (the pod fills it in).
  std::vector<std::pair<std::string, std::string>> env;
};

bool CanRead(const Identity& who, const MountedFile& file);

// Every container of every pod template among `objects` (the documents of the rendered
// files): Deployments, StatefulSets, and a LeaderWorkerSet's leader and worker
// templates. A volume mounted whole lists the keys of the object when it is among
// `objects`. Errors: a mount of a volume the pod does not have.
absl::StatusOr<std::vector<ContainerFiles>> ContainerFilesOf(const std::vector<YAML::Node>& objects,
                                                             const ImageUser& image);

// One line per file a container cannot read: the container, who it runs as, the file,
// its source, owner, group and mode. Empty when every container reads all its files.
std::vector<std::string> UnreadableFiles(const std::vector<ContainerFiles>& containers);

}  // namespace lockstep::deploy

#endif  // LOCKSTEP_DEPLOY_K8S_POD_FILE_ACCESS_H_
