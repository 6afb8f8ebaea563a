// The rendered pods against the image they run: every container of every checked-in
// example (the golden test keeps them equal to the renderer's output) must be able to
// read every file it mounts, as the user deploy/docker/Dockerfile's USER names, with
// the owner, group and mode kubelet gives the files (pod_file_access.h).
#include "deploy/k8s/pod_file_access.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_join.h"
#include "deploy/k8s/k8s_render.h"
#include "deploy/k8s/k8s_secrets.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::deploy {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kDockerfile[] = "deploy/docker/Dockerfile";
constexpr const char* kExamples[] = {"deploy/k8s/examples/gb300_disagg",
                                     "deploy/k8s/examples/gb300_disagg_lws"};

// "CODE: message" of a failed result, "OK" otherwise.
template <typename T>
std::string StatusOf(const absl::StatusOr<T>& result) {
  return result.status().ToString();
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// Every document of every YAML file in `dir`.
std::vector<YAML::Node> LoadObjects(const std::string& dir) {
  std::vector<YAML::Node> objects;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    for (const YAML::Node& doc : YAML::LoadAll(ReadFile(entry.path().string()))) {
      objects.push_back(doc);
    }
  }
  return objects;
}

ImageUser ImageOfDockerfile() {
  absl::StatusOr<ImageUser> image = ParseDockerfileUser(ReadFile(kDockerfile));
  EXPECT_TRUE(image.ok()) << image.status();
  return image.ok() ? *image : ImageUser{};
}

TEST(PodFileAccessTest, TheDockerfilesUserIsNumericAndTheOneTheRendererUses) {
  const ImageUser image = ImageOfDockerfile();
  EXPECT_EQ(image.uid, kImageUid);
  EXPECT_EQ(image.gid, kImageGid);
  EXPECT_NE(image.uid, 0);
  EXPECT_THAT(StatusOf(ParseDockerfileUser("FROM x\nUSER lockstep\n")),
              HasSubstr("INVALID_ARGUMENT: USER lockstep: must be numeric UID:GID"));
  EXPECT_THAT(StatusOf(ParseDockerfileUser("FROM x\nUSER 10001\n")),
              HasSubstr("INVALID_ARGUMENT: USER 10001:"));
  EXPECT_THAT(StatusOf(ParseDockerfileUser("FROM x\n")), HasSubstr("NOT_FOUND"));
  absl::StatusOr<ImageUser> last = ParseDockerfileUser("USER 1:2\nRUN x\n  user 3:4\n");
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->uid, 3);
  EXPECT_EQ(last->gid, 4);
}

TEST(PodFileAccessTest, TheImagesUserReadsEveryFileEveryRenderedPodMounts) {
  const ImageUser image = ImageOfDockerfile();
  for (const char* dir : kExamples) {
    SCOPED_TRACE(dir);
    absl::StatusOr<std::vector<ContainerFiles>> containers =
        ContainerFilesOf(LoadObjects(dir), image);
    ASSERT_TRUE(containers.ok()) << containers.status();
    ASSERT_FALSE(containers->empty());
    EXPECT_THAT(UnreadableFiles(*containers), IsEmpty())
        << absl::StrJoin(UnreadableFiles(*containers), "\n");
    for (const ContainerFiles& container : *containers) {
      SCOPED_TRACE(container.where);
      EXPECT_EQ(container.identity.uid, image.uid);
      EXPECT_EQ(container.identity.gid, image.gid);
      bool token = false;
      for (const MountedFile& file : container.files) {
        if (file.kind != "Secret") continue;
        token = token || file.path == kDefaultTokenPath;
        // Owner root, the image's group, readable by that group and nobody else.
        EXPECT_EQ(file.uid, 0) << file.Describe();
        EXPECT_EQ(file.gid, image.gid) << file.Describe();
        EXPECT_EQ(file.mode, 0440) << file.Describe();
      }
      EXPECT_TRUE(token) << "every pod mounts the cluster token";
    }
  }
}

// Without the pod's securityContext the Secrets stay root's: the check names the file,
// its owner, group and mode, and who could not read it.
TEST(PodFileAccessTest, NamesEachFileAContainerCannotRead) {
  const ImageUser image = ImageOfDockerfile();
  std::vector<YAML::Node> objects = LoadObjects("deploy/k8s/examples/gb300_disagg_lws");
  for (YAML::Node& object : objects) {
    if (object["kind"].Scalar() == "Deployment") {
      object["spec"]["template"]["spec"].remove("securityContext");
    }
  }
  absl::StatusOr<std::vector<ContainerFiles>> containers = ContainerFilesOf(objects, image);
  ASSERT_TRUE(containers.ok()) << containers.status();
  const std::vector<std::string> unreadable = UnreadableFiles(*containers);
  EXPECT_THAT(unreadable,
              Contains("Deployment/lockstep-router container router (uid 10001 gid 10001 "
                       "groups []) cannot read /var/run/secrets/lockstep/cluster_token (Secret "
                       "lockstep-cluster-token key token: owner 0, group 0, mode 0440)"));
  EXPECT_THAT(unreadable, Contains(HasSubstr(
                              "cannot read /var/run/secrets/lockstep/router-https/tls.key "
                              "(Secret lockstep-router-https key tls.key")));
  EXPECT_EQ(unreadable.size(), 7u) << absl::StrJoin(unreadable, "\n");  // the router's only
}

// Linux reads by the first class that matches: owner, then group, then others.
TEST(PodFileAccessTest, ReadingFollowsTheOwnerGroupOtherBits) {
  MountedFile file{.path = "/f", .kind = "Secret", .object = "s", .key = "k", .uid = 5, .gid = 6};
  const Identity owner{.uid = 5, .gid = 9};
  const Identity member{.uid = 7, .gid = 9, .groups = {6}};
  const Identity stranger{.uid = 7, .gid = 9};
  file.mode = 0040;
  EXPECT_FALSE(CanRead(owner, file));
  EXPECT_TRUE(CanRead(member, file));
  EXPECT_FALSE(CanRead(stranger, file));
  file.mode = 0404;
  EXPECT_TRUE(CanRead(owner, file));
  EXPECT_FALSE(CanRead(member, file));
  EXPECT_TRUE(CanRead(stranger, file));
  EXPECT_TRUE(CanRead(Identity{.uid = 0}, MountedFile{.mode = 0}));
}

// kubelet adds the group read bits to a read-only volume's files with fsGroup, and
// takes the pod's settings over the image's and a container's over the pod's.
TEST(PodFileAccessTest, ModelsFsGroupAndTheSecurityContextLayers) {
  const std::vector<YAML::Node> objects = YAML::LoadAll(R"(
kind: Deployment
metadata: {name: d}
spec:
  template:
    spec:
      securityContext: {fsGroup: 2000, supplementalGroups: [3000]}
      containers:
      - name: a
        volumeMounts: [{name: s, mountPath: /s}]
      - name: b
        securityContext: {runAsUser: 42, runAsGroup: 43}
        volumeMounts: [{name: s, mountPath: /s/x, subPath: x}]
      volumes:
      - name: s
        secret:
          secretName: sec
          defaultMode: 256
          items: [{key: x, path: x}, {key: y, path: y, mode: 384}]
)");
  absl::StatusOr<std::vector<ContainerFiles>> containers =
      ContainerFilesOf(objects, ImageUser{.uid = 10, .gid = 11});
  ASSERT_TRUE(containers.ok()) << containers.status();
  ASSERT_EQ(containers->size(), 2u);
  const ContainerFiles& a = (*containers)[0];
  EXPECT_EQ(a.identity.Describe(), "uid 10 gid 11 groups [2000,3000]");
  ASSERT_EQ(a.files.size(), 2u);
  EXPECT_EQ(a.files[0].Describe(), "/s/x (Secret sec key x: owner 0, group 2000, mode 0440)");
  EXPECT_EQ(a.files[1].Describe(), "/s/y (Secret sec key y: owner 0, group 2000, mode 0640)");
  const ContainerFiles& b = (*containers)[1];
  EXPECT_EQ(b.identity.Describe(), "uid 42 gid 43 groups [2000,3000]");
  ASSERT_EQ(b.files.size(), 1u);
  EXPECT_EQ(b.files[0].path, "/s/x");
  EXPECT_THAT(UnreadableFiles(*containers), IsEmpty());
}

}  // namespace
}  // namespace lockstep::deploy
