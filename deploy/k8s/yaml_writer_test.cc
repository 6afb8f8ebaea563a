#include "deploy/k8s/yaml_writer.h"

#include "gtest/gtest.h"
#include "yaml-cpp/yaml.h"

namespace lockstep::deploy {
namespace {

using Json = nlohmann::ordered_json;

TEST(YamlWriterTest, BlockStyleInInsertionOrder) {
  const Json value = {{"kind", "Service"},
                      {"spec", {{"ports", {{{"name", "http"}, {"port", 8000}}}}}},
                      {"empty", Json::object()},
                      {"list", Json::array()}};
  EXPECT_EQ(ToYaml(value),
            "kind: Service\n"
            "spec:\n"
            "  ports:\n"
            "  - name: http\n"
            "    port: 8000\n"
            "empty: {}\n"
            "list: []\n");
}

TEST(YamlWriterTest, StringsReadBackAsStrings) {
  // Each of these would be read as a number, a bool, null or something else plain.
  const std::vector<std::string> tricky = {"1",   "0.5", "true", "No",      "null", "~",
                                           "",    "-x",  "a: b", "#c",      "x y",  "lockstep:dev",
                                           "0x1", "1e3", "on",   "\"q\"\\", "*a",   "&b"};
  Json list = Json::array();
  for (const std::string& s : tricky) list.push_back(s);
  const YAML::Node parsed = YAML::Load(ToYaml({{"values", list}}));
  ASSERT_EQ(parsed["values"].size(), tricky.size());
  for (size_t i = 0; i < tricky.size(); ++i) {
    EXPECT_EQ(parsed["values"][i].Scalar(), tricky[i]) << i;
    EXPECT_EQ(parsed["values"][i].Tag(), "!") << tricky[i] << " must be quoted";
  }
  // Plain where it is safe.
  EXPECT_EQ(ToYaml({{"image", "nvidia.com/gpu"}}), "image: nvidia.com/gpu\n");
}

TEST(YamlWriterTest, MultiLineStringsAreLiteralBlocks) {
  const std::string text = "model:\n  name: m\n\n# comment\n";
  const std::string yaml = ToYaml({{"data", {{"deployment.yaml", text}}}});
  EXPECT_EQ(yaml, "data:\n  deployment.yaml: |\n    model:\n      name: m\n\n    # comment\n");
  EXPECT_EQ(YAML::Load(yaml)["data"]["deployment.yaml"].Scalar(), text);
  // Without a final newline.
  EXPECT_EQ(YAML::Load(ToYaml({{"s", "a\nb"}}))["s"].Scalar(), "a\nb");
}

TEST(YamlWriterTest, SequencesOfScalarsAndNestedSequences) {
  const Json value = {{"command", {"lockstep", "probe", "10.0.0.1:8700"}},
                      {"nested", {{{"a", {{{"b", 1}}}}}}}};
  const YAML::Node parsed = YAML::Load(ToYaml(value));
  EXPECT_EQ(parsed["command"][2].Scalar(), "10.0.0.1:8700");
  EXPECT_EQ(parsed["nested"][0]["a"][0]["b"].as<int>(), 1);
}

}  // namespace
}  // namespace lockstep::deploy
