// The engines' speculation defaults are the deployment YAML's: the worker hands the
// instance's `speculative:` block to the engine as is (one SpeculativeConfig), so an
// engine built in code without setting it speculates exactly as an instance whose YAML
// has no block, and the YAML reader fills what a block leaves out with the struct's own
// defaults.
#include <string>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "runtime/config/config_yaml.h"
#include "runtime/config/deployment_config.h"
#include "runtime/engine/cpu/cpu_engine.h"
#include "runtime/engine/device_engine.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::worker {
namespace {

using ::lockstep::testing::IsOk;

// The effective `speculative:` block of one aggregated instance with `fields`.
spec::SpeculativeConfig FromYaml(const std::string& fields) {
  const std::string yaml =
      "model: {name: tiny, path: /m}\ninstances:\n  - {name: agg0, role: aggregated" +
      (fields.empty() ? std::string() : ", " + fields) + "}\n";
  absl::StatusOr<config::DeploymentConfig> parsed = config::ParseDeploymentConfig(yaml, "");
  EXPECT_THAT(parsed, IsOk());
  if (!parsed.ok()) return {};
  EXPECT_THAT(parsed->Validate(), IsOk());
  return config::EffectiveSpeculative(parsed->instances[0]);
}

TEST(EngineSpeculationTest, WithoutABlockTheEnginesDefaultsAreTheYamls) {
  const spec::SpeculativeConfig yaml = FromYaml("");
  EXPECT_FALSE(yaml.enabled());
  EXPECT_EQ(yaml, spec::SpeculativeConfig());
  EXPECT_EQ(engine::CpuEngineOptions().speculative, yaml);
  EXPECT_EQ(engine::DeviceEngineOptions().speculative, yaml);
}

TEST(EngineSpeculationTest, ABlockLeavesWhatItOmitsAtTheStructsDefaults) {
  const spec::SpeculativeConfig yaml =
      FromYaml("speculative: {method: ngram, num_draft_tokens: 2}");
  spec::SpeculativeConfig in_code;
  in_code.method = spec::Method::kNgram;
  in_code.num_draft_tokens = 2;
  EXPECT_EQ(yaml, in_code);
  EXPECT_EQ(yaml.ngram_max, engine::CpuEngineOptions().speculative.ngram_max);
  EXPECT_FALSE(yaml.dynamic);
}

}  // namespace
}  // namespace lockstep::worker
