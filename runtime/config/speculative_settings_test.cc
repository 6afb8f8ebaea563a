// The `speculative:` block: YAML parsing, validation with errors that name the field,
// and the `executor.spec_k` alias.
#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/config/config_yaml.h"
#include "runtime/config/deployment_config.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::config {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

absl::StatusOr<DeploymentConfig> Parse(const std::string& instance_fields,
                                       const std::string& draft_path = "") {
  const std::string yaml =
      "model: {name: tiny-moe, path: /m" +
      (draft_path.empty() ? std::string() : ", draft_path: " + draft_path) +
      "}\ninstances:\n  - {name: agg0, role: aggregated, " + instance_fields + "}\n";
  return ParseDeploymentConfig(yaml, "");
}

absl::Status Validated(const std::string& instance_fields, const std::string& draft_path = "") {
  absl::StatusOr<DeploymentConfig> config = Parse(instance_fields, draft_path);
  if (!config.ok()) return config.status();
  return config->Validate();
}

TEST(SpeculativeSettingsTest, ParsesTheBlock) {
  absl::StatusOr<DeploymentConfig> config = Parse(
      "speculative: {method: ngram, num_draft_tokens: 4, dynamic: true, ngram_max: 5}");
  ASSERT_THAT(config, IsOk());
  ASSERT_THAT(config->Validate(), IsOk());
  const spec::SpeculativeConfig& s = config->instances[0].speculative;
  EXPECT_EQ(s.method, spec::Method::kNgram);
  EXPECT_EQ(s.num_draft_tokens, 4);
  EXPECT_TRUE(s.dynamic);
  EXPECT_EQ(s.ngram_max, 5);
  const spec::SpeculativeConfig effective = EffectiveSpeculative(config->instances[0]);
  EXPECT_EQ(effective.method, spec::Method::kNgram);
  EXPECT_EQ(effective.num_draft_tokens, 4);
  EXPECT_TRUE(effective.dynamic);
  EXPECT_EQ(effective.ngram_max, 5);
  EXPECT_THAT(effective.Validate(), IsOk());
}

TEST(SpeculativeSettingsTest, MtpWithKNeedsNoDraftPath) {
  absl::StatusOr<DeploymentConfig> config =
      Parse("speculative: {method: mtp, k: 2, dynamic: true}, executor: {draft_pool: paired}");
  ASSERT_THAT(config, IsOk());
  ASSERT_THAT(config->Validate(), IsOk());
  const spec::SpeculativeConfig effective = EffectiveSpeculative(config->instances[0]);
  EXPECT_EQ(effective.method, spec::Method::kMtp);
  EXPECT_EQ(effective.num_draft_tokens, 2);
  EXPECT_TRUE(effective.dynamic);
  EXPECT_TRUE(effective.needs_draft_kv());
}

TEST(SpeculativeSettingsTest, SpecKIsAnAliasOfDraftModelWithK) {
  absl::StatusOr<DeploymentConfig> config =
      Parse("executor: {spec_k: 3, draft_pool: paired}", "/d");
  ASSERT_THAT(config, IsOk());
  ASSERT_THAT(config->Validate(), IsOk());
  const spec::SpeculativeConfig effective = EffectiveSpeculative(config->instances[0]);
  EXPECT_EQ(effective.method, spec::Method::kDraftModel);
  EXPECT_EQ(effective.num_draft_tokens, 3);
  EXPECT_FALSE(effective.dynamic);
  EXPECT_FALSE(EffectiveSpeculative(Parse("world_size: 1")->instances[0]).enabled());
}

TEST(SpeculativeSettingsTest, ErrorsNameTheProblem) {
  EXPECT_THAT(Validated("speculative: {method: draft_model, num_draft_tokens: 3}, "
                        "executor: {draft_pool: paired}"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("model.draft_path: is required: instances[0].speculative.method "
                                 "is draft_model")));
  EXPECT_THAT(Validated("speculative: {method: draft_model, num_draft_tokens: 3}", "/d"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instances[0].executor.draft_pool: must be paired or unpaired "
                                 "with speculative.method draft_model")));
  EXPECT_THAT(Validated("speculative: {method: ngram, num_draft_tokens: 17}, "
                        "executor: {max_num_tokens: 4096}"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instances[0].speculative.num_draft_tokens: must be in [1, 16], "
                                 "got 17")));
  EXPECT_THAT(Validated("speculative: {method: ngram, num_draft_tokens: 0}"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instances[0].speculative.num_draft_tokens: must be in [1, 16], "
                                 "got 0")));
  EXPECT_THAT(Validated("speculative: {method: ngram, num_draft_tokens: 3}, "
                        "executor: {draft_pool: unpaired}"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instances[0].executor.draft_pool: must be none with "
                                 "speculative.method ngram (it keeps no draft KV), got unpaired")));
  EXPECT_THAT(Validated("speculative: {method: ngram, num_draft_tokens: 3, ngram_max: 0}"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instances[0].speculative.ngram_max: must be in [1, 16], got 0")));
  EXPECT_THAT(Validated("speculative: {method: none, num_draft_tokens: 2}"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instances[0].speculative.num_draft_tokens: must be 0 with "
                                 "method none, got 2")));
  EXPECT_THAT(Validated("speculative: {dynamic: true}"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instances[0].speculative.dynamic: needs a method")));
  EXPECT_THAT(Validated("speculative: {method: ngram, num_draft_tokens: 2}, "
                        "executor: {spec_k: 2}"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instances[0].executor.spec_k: is an alias of "
                                 "instances[0].speculative.num_draft_tokens: give one, not both")));
  EXPECT_THAT(Validated("speculative: {method: ngram, num_draft_tokens: 8}, "
                        "executor: {max_batch_size: 8, max_num_tokens: 64}"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instances[0].executor.max_num_tokens: must be >= max_batch_size "
                                 "* (1 + speculative.num_draft_tokens) = 72, got 64")));
  EXPECT_THAT(
      Parse("speculative: {method: medusa}").status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("instances[0].speculative.method")));
  EXPECT_THAT(Parse("speculative: {num_draft_tokens: 4294967297}").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instances[0].speculative.num_draft_tokens: must be a 32-bit "
                                 "integer, got 4294967297")));
  EXPECT_THAT(Parse("speculative: {k: 3, num_draft_tokens: 3}").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instances[0].speculative.k: is an alias of num_draft_tokens: "
                                 "give one, not both")));
  EXPECT_THAT(Parse("speculative: {kk: 3}").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("speculative.kk")));
  EXPECT_THAT(Validated("speculative: {method: mtp, k: 2}"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instances[0].executor.draft_pool: must be paired or unpaired "
                                 "with speculative.method mtp")));
}

// The CUDA engine drafts with the MTP layer too (runtime/cuda/engine/cuda_mtp.h).
TEST(SpeculativeSettingsTest, MtpIsAcceptedOnTheCudaEngine) {
  EXPECT_THAT(
      Validated("engine: cuda, speculative: {method: mtp, k: 2}, executor: {draft_pool: paired}"),
      IsOk());
}

// A disaggregated deployment: one context and two generation instances with these
// fields each.
absl::Status DisaggValidated(const std::string& ctx, const std::string& gen0,
                             const std::string& gen1) {
  const std::string yaml =
      "model: {name: tiny-dsv3-mtp, path: /m, draft_path: /d}\ninstances:\n"
      "  - {name: ctx0, role: context, " + ctx + "}\n"
      "  - {name: gen0, role: generation, " + gen0 + "}\n"
      "  - {name: gen1, role: generation, " + gen1 + "}\n";
  absl::StatusOr<DeploymentConfig> config = ParseDeploymentConfig(yaml, "");
  if (!config.ok()) return config.status();
  return config->Validate();
}

// A generation instance without draft KV takes any context instance's target KV; one
// with a draft pool needs its context instances to make that draft KV, and is refused
// at start naming both instances otherwise.
TEST(SpeculativeSettingsTest, GenerationDraftKvNeedsContextDraftKvOfTheSameMethod) {
  const std::string mtp = "speculative: {method: mtp, k: 3}, executor: {draft_pool: paired}";
  const std::string mtp1 = "speculative: {method: mtp, k: 1}, executor: {draft_pool: paired}";
  const std::string draft_model =
      "speculative: {method: draft_model, k: 2}, executor: {draft_pool: paired}";
  const std::string ngram = "speculative: {method: ngram, k: 2}";
  const std::string none = "executor: {max_batch_size: 4}";
  EXPECT_THAT(DisaggValidated(mtp, mtp1, none), IsOk());
  EXPECT_THAT(DisaggValidated(mtp, none, ngram), IsOk());
  EXPECT_THAT(DisaggValidated(none, none, ngram), IsOk());
  EXPECT_THAT(DisaggValidated(draft_model, draft_model, none), IsOk());
  EXPECT_THAT(DisaggValidated(none, none, mtp),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instances[2].speculative.method: generation instance 'gen1' "
                                 "drafts with mtp on the draft KV its context instance makes, but "
                                 "context instance 'ctx0' has no draft pool (speculative.method "
                                 "none): give 'ctx0' speculative.method mtp or 'gen1' a method "
                                 "without draft KV (none, ngram)")));
  EXPECT_THAT(DisaggValidated(ngram, mtp, none),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("'gen0' drafts with mtp on the draft KV its context instance "
                                 "makes, but context instance 'ctx0' has no draft pool "
                                 "(speculative.method ngram)")));
  EXPECT_THAT(DisaggValidated(mtp, draft_model, none),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instances[1].speculative.method: generation instance 'gen0' "
                                 "drafts with draft_model on the draft KV its context instance "
                                 "makes, but context instance 'ctx0' drafts with mtp")));
  // The executor.spec_k alias is a draft model.
  EXPECT_THAT(DisaggValidated("executor: {spec_k: 2, draft_pool: paired}", draft_model, none),
              IsOk());
}

}  // namespace
}  // namespace lockstep::config
