#include "kvcache/kv_types.h"

#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::kv {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

PoolConfig Pool(int32_t blocks, int tpb = 16) {
  PoolConfig pool;
  pool.layout.tokens_per_block = tpb;
  pool.num_blocks = blocks;
  return pool;
}

TEST(KvTypesTest, Names) {
  EXPECT_STREQ(PoolKindName(PoolKind::kTarget), "target");
  EXPECT_STREQ(PoolKindName(PoolKind::kDraft), "draft");
  EXPECT_STREQ(DraftModeName(DraftMode::kNone), "none");
  EXPECT_STREQ(DraftModeName(DraftMode::kPaired), "paired");
  EXPECT_STREQ(DraftModeName(DraftMode::kUnpaired), "unpaired");
}

TEST(KvTypesTest, PoolConfigValidate) {
  EXPECT_THAT(Pool(8).Validate(), IsOk());
  EXPECT_THAT(Pool(0).Validate(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_blocks")));
  PoolConfig bad_layout = Pool(8);
  bad_layout.layout.num_kv_heads = 0;
  EXPECT_THAT(bad_layout.Validate(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_kv_heads")));
  PoolConfig huge = Pool(1 << 30);
  huge.layout.num_layers = 1 << 20;
  huge.layout.head_dim = 1 << 20;
  EXPECT_THAT(huge.Validate(), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(KvTypesTest, ManagerConfigValidateNamesThePool) {
  KvManagerConfig config;
  config.target = Pool(8);
  EXPECT_THAT(config.Validate(), IsOk());

  config.draft_mode = DraftMode::kUnpaired;  // the draft pool now matters
  EXPECT_THAT(config.Validate(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("draft pool: num_blocks")));
  config.draft = Pool(4, 8);
  EXPECT_THAT(config.Validate(), IsOk());

  config.target.num_blocks = 0;
  EXPECT_THAT(config.Validate(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("target pool: num_blocks")));
  config.target.num_blocks = 8;

  config.dummy_reserved_tokens = -1;
  EXPECT_THAT(config.Validate(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dummy_reserved_tokens")));
  // 3 draft blocks of 8 tokens for 20 tokens: fits in 4; 32 tokens would take them all.
  config.dummy_reserved_tokens = 20;
  EXPECT_THAT(config.Validate(), IsOk());
  config.dummy_reserved_tokens = 32;
  EXPECT_THAT(config.Validate(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("draft pool")));
  // Without a draft pool only the target counts.
  config.draft_mode = DraftMode::kNone;
  EXPECT_THAT(config.Validate(), IsOk());
}

}  // namespace
}  // namespace lockstep::kv
