#include "deploy/k8s/pod_file_access.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace lockstep::deploy {
namespace {

// kubelet: the read bits fsGroup adds to the files of a read-only volume.
constexpr int kFsGroupReadBits = 0440;
constexpr int kDefaultFileMode = 0644;

std::string Octal(int mode) {
  std::string digits;
  for (int shift = 9; shift >= 0; shift -= 3) {
    digits += static_cast<char>('0' + ((mode >> shift) & 7));
  }
  return digits;
}

// node[key], or an undefined node (false, iterates as empty) when `node` is no map or
// has no `key`: yaml-cpp throws on a lookup in a missing node.
YAML::Node At(const YAML::Node& node, const std::string& key) {
  if (!node || !node.IsMap() || !node[key]) return YAML::Node(YAML::NodeType::Undefined);
  return node[key];
}

// A scalar's text; "" for anything else.
std::string Str(const YAML::Node& node) { return node && node.IsScalar() ? node.Scalar() : ""; }

std::optional<int64_t> IntAt(const YAML::Node& node) {
  if (!node || !node.IsScalar()) return std::nullopt;
  int64_t value = 0;
  if (!absl::SimpleAtoi(node.Scalar(), &value)) return std::nullopt;
  return value;
}

// A pod template's spec and how reports name it.
struct PodTemplate {
  std::string where;
  YAML::Node spec;
};

std::vector<PodTemplate> PodTemplates(const std::vector<YAML::Node>& objects) {
  std::vector<PodTemplate> pods;
  for (const YAML::Node& object : objects) {
    const std::string kind = Str(At(object, "kind"));
    const std::string id = absl::StrCat(kind, "/", Str(At(At(object, "metadata"), "name")));
    if (kind == "Deployment" || kind == "StatefulSet") {
      pods.push_back({id, At(At(At(object, "spec"), "template"), "spec")});
    } else if (kind == "LeaderWorkerSet") {
      const YAML::Node lws = At(At(object, "spec"), "leaderWorkerTemplate");
      if (At(lws, "leaderTemplate")) {
        pods.push_back({id + " leader", At(At(lws, "leaderTemplate"), "spec")});
      }
      pods.push_back({id + " worker", At(At(lws, "workerTemplate"), "spec")});
    }
  }
  return pods;
}

// The keys of the Secret or ConfigMap `name` among `objects` (data and stringData);
// empty when it is not there (the operator creates it).
std::vector<std::string> KeysOf(const std::vector<YAML::Node>& objects, const std::string& kind,
                                const std::string& name) {
  std::vector<std::string> keys;
  for (const YAML::Node& object : objects) {
    if (Str(At(object, "kind")) != kind || Str(At(At(object, "metadata"), "name")) != name) {
      continue;
    }
    for (const char* field : {"data", "stringData"}) {
      for (const auto& entry : At(object, field)) keys.push_back(entry.first.Scalar());
    }
  }
  return keys;
}

// A Secret or ConfigMap volume of a pod.
struct SourceVolume {
  std::string kind;
  std::string object;
  int default_mode = kDefaultFileMode;
  std::vector<std::pair<std::string, std::string>> items;  // key -> path in the volume
  std::map<std::string, int> item_modes;                   // by key
};

std::optional<SourceVolume> SourceOf(const YAML::Node& volume) {
  SourceVolume source;
  YAML::Node spec;
  if (At(volume, "secret")) {
    source.kind = "Secret";
    spec = At(volume, "secret");
    source.object = Str(At(spec, "secretName"));
  } else if (At(volume, "configMap")) {
    source.kind = "ConfigMap";
    spec = At(volume, "configMap");
    source.object = Str(At(spec, "name"));
  } else {
    return std::nullopt;
  }
  if (std::optional<int64_t> mode = IntAt(At(spec, "defaultMode"))) source.default_mode = *mode;
  for (const YAML::Node& item : At(spec, "items")) {
    const std::string key = Str(At(item, "key"));
    source.items.push_back({key, Str(At(item, "path"))});
    if (std::optional<int64_t> mode = IntAt(At(item, "mode"))) source.item_modes[key] = *mode;
  }
  return source;
}

}  // namespace

absl::StatusOr<ImageUser> ParseDockerfileUser(absl::string_view dockerfile) {
  std::optional<std::string> user;
  for (absl::string_view line : absl::StrSplit(dockerfile, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.size() > 5 && absl::EqualsIgnoreCase(line.substr(0, 4), "USER") &&
        absl::ascii_isspace(static_cast<unsigned char>(line[4]))) {
      user = std::string(absl::StripAsciiWhitespace(line.substr(5)));
    }
  }
  if (!user.has_value()) return absl::NotFoundError("the Dockerfile has no USER line");
  const std::vector<std::string> parts = absl::StrSplit(*user, ':');
  ImageUser image;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &image.uid) ||
      !absl::SimpleAtoi(parts[1], &image.gid) || image.uid < 0 || image.gid < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("USER ", *user,
                     ": must be numeric UID:GID (Kubernetes checks "
                     "runAsNonRoot only against a numeric user; the group decides what it "
                     "reads)"));
  }
  return image;
}

std::string Identity::Describe() const {
  return absl::StrCat("uid ", uid, " gid ", gid, " groups [", absl::StrJoin(groups, ","), "]");
}

std::string MountedFile::Describe() const {
  return absl::StrCat(path, " (", kind, " ", object, " key ", key, ": owner ", uid, ", group ", gid,
                      ", mode ", Octal(mode), ")");
}

bool CanRead(const Identity& who, const MountedFile& file) {
  if (who.uid == 0) return true;
  if (who.uid == file.uid) return (file.mode & 0400) != 0;
  const bool member = who.gid == file.gid ||
                      std::find(who.groups.begin(), who.groups.end(), file.gid) != who.groups.end();
  if (member) return (file.mode & 0040) != 0;
  return (file.mode & 0004) != 0;
}

absl::StatusOr<std::vector<ContainerFiles>> ContainerFilesOf(const std::vector<YAML::Node>& objects,
                                                             const ImageUser& image) {
  std::vector<ContainerFiles> result;
  for (const PodTemplate& pod : PodTemplates(objects)) {
    const YAML::Node pod_context = At(pod.spec, "securityContext");
    const std::optional<int64_t> fs_group = IntAt(At(pod_context, "fsGroup"));
    std::set<std::string> declared;               // every volume of the pod
    std::map<std::string, SourceVolume> volumes;  // its Secrets and ConfigMaps, by name
    for (const YAML::Node& volume : At(pod.spec, "volumes")) {
      const std::string name = Str(At(volume, "name"));
      declared.insert(name);
      if (std::optional<SourceVolume> source = SourceOf(volume)) volumes[name] = *source;
    }
    for (const YAML::Node& container : At(pod.spec, "containers")) {
      ContainerFiles files;
      files.where = absl::StrCat(pod.where, " container ", Str(At(container, "name")));
      const YAML::Node context = At(container, "securityContext");
      const std::optional<int64_t> uid = IntAt(At(context, "runAsUser"));
      const std::optional<int64_t> pod_uid = IntAt(At(pod_context, "runAsUser"));
      const std::optional<int64_t> gid = IntAt(At(context, "runAsGroup"));
      const std::optional<int64_t> pod_gid = IntAt(At(pod_context, "runAsGroup"));
      files.identity.uid = uid.value_or(pod_uid.value_or(image.uid));
      // A user other than the image's, without a group: the image's /etc/passwd would
      // decide; the model takes group 0 (what an unknown uid gets).
      files.identity.gid =
          gid.value_or(pod_gid.value_or(files.identity.uid == image.uid ? image.gid : int64_t{0}));
      if (fs_group.has_value()) files.identity.groups.push_back(*fs_group);
      for (const YAML::Node& group : At(pod_context, "supplementalGroups")) {
        if (std::optional<int64_t> g = IntAt(group)) files.identity.groups.push_back(*g);
      }
      for (const YAML::Node& arg : At(container, "command")) {
        files.command.push_back(Str(arg));
      }
      for (const YAML::Node& var : At(container, "env")) {
        files.env.push_back({Str(At(var, "name")), Str(At(var, "value"))});
      }
      for (const YAML::Node& mount : At(container, "volumeMounts")) {
        const std::string name = Str(At(mount, "name"));
        if (declared.count(name) == 0) {
          return absl::InvalidArgumentError(
              absl::StrCat(files.where, ": mounts volume ", name, ", which the pod does not have"));
        }
        auto it = volumes.find(name);
        if (it == volumes.end()) continue;  // not a Secret or ConfigMap
        const SourceVolume& source = it->second;
        const std::string mount_path = Str(At(mount, "mountPath"));
        // The volume's files: its items, else the object's keys when it is rendered.
        std::vector<std::pair<std::string, std::string>> entries = source.items;
        if (entries.empty()) {
          for (const std::string& key : KeysOf(objects, source.kind, source.object)) {
            entries.push_back({key, key});
          }
        }
        std::vector<std::pair<std::string, std::string>> shown;  // (key, container path)
        if (At(mount, "subPath")) {
          const std::string sub_path = Str(At(mount, "subPath"));
          std::string key = sub_path;
          for (const auto& [k, path] : source.items) {
            if (path == sub_path) key = k;
          }
          shown.push_back({key, mount_path});
        } else if (entries.empty()) {
          shown.push_back({"*", mount_path + "/*"});
        } else {
          for (const auto& [key, path] : entries) shown.push_back({key, mount_path + "/" + path});
        }
        for (const auto& [key, path] : shown) {
          MountedFile file;
          file.path = path;
          file.kind = source.kind;
          file.object = source.object;
          file.key = key;
          auto mode = source.item_modes.find(key);
          file.mode = mode != source.item_modes.end() ? mode->second : source.default_mode;
          if (fs_group.has_value()) {
            file.gid = *fs_group;
            file.mode |= kFsGroupReadBits;
          }
          files.files.push_back(std::move(file));
        }
      }
      result.push_back(std::move(files));
    }
  }
  return result;
}

std::vector<std::string> UnreadableFiles(const std::vector<ContainerFiles>& containers) {
  std::vector<std::string> lines;
  for (const ContainerFiles& container : containers) {
    for (const MountedFile& file : container.files) {
      if (CanRead(container.identity, file)) continue;
      lines.push_back(absl::StrCat(container.where, " (", container.identity.Describe(),
                                   ") cannot read ", file.Describe()));
    }
  }
  return lines;
}

}  // namespace lockstep::deploy
