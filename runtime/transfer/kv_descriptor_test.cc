#include "runtime/transfer/kv_descriptor.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::transfer {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

KvDescriptor Base() {
  KvDescriptor d;
  d.model = "tiny-moe@1";
  d.target =
      kv::BlockLayout{.num_layers = 4, .num_kv_heads = 2, .head_dim = 32, .tokens_per_block = 16};
  d.draft =
      kv::BlockLayout{.num_layers = 1, .num_kv_heads = 2, .head_dim = 32, .tokens_per_block = 16};
  return d;
}

TEST(KvDescriptorTest, IdenticalDescriptorsAreCompatible) {
  EXPECT_THAT(CheckCompatible(Base(), Base()), IsOk());
  KvDescriptor no_draft = Base();
  no_draft.draft.reset();
  EXPECT_THAT(CheckCompatible(no_draft, no_draft), IsOk());
}

// Every field that changes what the bytes mean is checked; the message names the
// field and gives the context value first.
TEST(KvDescriptorTest, EachMismatchNamesTheFieldAndBothValues) {
  struct Case {
    std::function<void(KvDescriptor&)> mutate;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](KvDescriptor& d) { d.model = "tiny@1"; },
       "model: context 'tiny-moe@1', generation 'tiny@1'"},
      {[](KvDescriptor& d) { d.dtype = "bf16"; }, "dtype: context f32, generation bf16"},
      {[](KvDescriptor& d) { d.target->tokens_per_block = 32; },
       "target tokens_per_block: context 16, generation 32"},
      {[](KvDescriptor& d) { d.target->num_layers = 3; },
       "target num_layers: context 4, generation 3"},
      {[](KvDescriptor& d) { d.target->num_kv_heads = 4; },
       "target num_kv_heads: context 2, generation 4"},
      {[](KvDescriptor& d) { d.target->head_dim = 64; },
       "target head_dim: context 32, generation 64"},
      {[](KvDescriptor& d) { d.draft->tokens_per_block = 8; },
       "draft tokens_per_block: context 16, generation 8"},
      {[](KvDescriptor& d) { d.draft->num_layers = 2; },
       "draft num_layers: context 1, generation 2"},
  };
  for (const Case& c : cases) {
    KvDescriptor generation = Base();
    c.mutate(generation);
    EXPECT_THAT(CheckCompatible(Base(), generation),
                StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr(c.message)));
  }
  KvDescriptor context = Base();
  context.draft.reset();
  EXPECT_THAT(CheckCompatible(context, Base()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("draft pool: context absent, generation present")));
}

// A generation rank that keeps no draft KV (no drafter, or one without KV) may take
// the target KV of a context rank with a draft pool; everything else still must match.
TEST(KvDescriptorTest, GenerationWithoutDraftPoolIsCompatible) {
  KvDescriptor generation = Base();
  generation.draft.reset();
  EXPECT_THAT(CheckCompatible(Base(), generation), IsOk());
  generation.target->num_layers = 3;
  EXPECT_THAT(CheckCompatible(Base(), generation),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("target num_layers: context 4, generation 3")));
  generation = Base();
  generation.draft.reset();
  generation.model = "tiny@1";
  EXPECT_THAT(CheckCompatible(Base(), generation),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("model")));
}

// The draft KV moves when both sides have a draft cache, not when neither has or the
// generation side has no draft pool; a draft cache on one side of two draft pools is
// a mismatch, named.
TEST(KvDescriptorTest, MovesDraftKvOnlyBetweenTwoDraftCaches) {
  KvDescriptor no_pool = Base();
  no_pool.draft.reset();
  const auto moves = [](const KvDescriptor& generation, bool context_cache,
                        bool generation_cache) {
    const absl::StatusOr<bool> draft = MovesDraftKv(generation, context_cache, generation_cache);
    EXPECT_THAT(draft.status(), IsOk());
    return draft.value_or(false);
  };
  EXPECT_TRUE(moves(Base(), true, true));
  EXPECT_FALSE(moves(Base(), false, false));
  EXPECT_FALSE(moves(no_pool, false, false));
  EXPECT_FALSE(moves(no_pool, true, false));
  EXPECT_THAT(MovesDraftKv(Base(), true, false),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("draft cache: context present, generation absent")));
  EXPECT_THAT(MovesDraftKv(Base(), false, true),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("draft cache: context absent, generation present")));
}

TEST(KvDescriptorTest, ProtoRoundTrip) {
  for (bool with_draft : {true, false}) {
    KvDescriptor d = Base();
    if (!with_draft) d.draft.reset();
    lockstep::v1::KvDescriptor proto;
    ToProto(d, &proto);
    absl::StatusOr<KvDescriptor> back = FromProto(proto);
    ASSERT_THAT(back.status(), IsOk());
    EXPECT_EQ(back->model, d.model);
    EXPECT_EQ(back->dtype, d.dtype);
    EXPECT_EQ(back->target, d.target);
    EXPECT_EQ(back->draft, d.draft);
  }
}

TEST(KvDescriptorTest, FromProtoRejectsInvalidDescriptors) {
  lockstep::v1::KvDescriptor proto;
  ToProto(Base(), &proto);
  lockstep::v1::KvDescriptor bad = proto;
  bad.clear_model();
  EXPECT_THAT(FromProto(bad).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("model is empty")));
  bad = proto;
  bad.clear_target();
  EXPECT_THAT(FromProto(bad).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("target pool is absent")));
  bad = proto;
  bad.mutable_draft()->mutable_layout()->set_head_dim(0);
  EXPECT_THAT(FromProto(bad).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("draft layout")));
}

TEST(KvDescriptorTest, DescribesAKvManager) {
  kv::KvManagerConfig config;
  config.target.layout = *Base().target;
  config.target.num_blocks = 8;
  config.draft_mode = kv::DraftMode::kUnpaired;
  config.draft.layout = *Base().draft;
  config.draft.num_blocks = 5;
  absl::StatusOr<std::unique_ptr<kv::KvManager>> kv = kv::KvManager::Create(config);
  ASSERT_THAT(kv.status(), IsOk());
  const KvDescriptor d = DescribeKv(**kv, "tiny-moe@1");
  EXPECT_THAT(CheckCompatible(d, Base()), IsOk());
  const KvCopiers copiers = CopiersOf(**kv);
  EXPECT_EQ(copiers.target, (*kv)->Copier(kv::PoolKind::kTarget));
  ASSERT_NE(copiers.target, nullptr);
  EXPECT_EQ(copiers.target->num_blocks(), 8);
  EXPECT_EQ(copiers.draft, (*kv)->Copier(kv::PoolKind::kDraft));
  ASSERT_NE(copiers.draft, nullptr);
  EXPECT_EQ(copiers.draft->num_blocks(), 5);
  EXPECT_THAT(CheckCopiers(d, copiers), IsOk());

  config.draft_mode = kv::DraftMode::kNone;
  kv = kv::KvManager::Create(config);
  ASSERT_THAT(kv.status(), IsOk());
  EXPECT_FALSE(DescribeKv(**kv, "m").draft.has_value());
  EXPECT_EQ(CopiersOf(**kv).draft, nullptr);
  // A descriptor with a draft pool is not served by copiers without one.
  EXPECT_THAT(CheckCopiers(d, CopiersOf(**kv)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("draft pool")));
}

TEST(KvDescriptorTest, CheckBlockRefsKeepsBlocksInsideTheCopiersPools) {
  kv::KvManagerConfig config;
  config.target.layout = *Base().target;
  config.target.num_blocks = 4;
  absl::StatusOr<std::unique_ptr<kv::KvManager>> kv = kv::KvManager::Create(config);
  ASSERT_THAT(kv.status(), IsOk());
  KvDescriptor d = Base();
  d.draft.reset();
  kv::BlockRefs blocks;
  blocks.id = RequestId(3);
  blocks.blocks = {BlockId(3), BlockId(0)};
  EXPECT_THAT(CheckBlockRefs(blocks, 32, d, CopiersOf(**kv)), IsOk());
  blocks.blocks = {BlockId(3), BlockId(4)};
  EXPECT_THAT(CheckBlockRefs(blocks, 32, d, CopiersOf(**kv)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("target block 4 (table index 1) is outside the pool's 4 blocks")));
  blocks.draft_generation = 7;
  blocks.draft_blocks = {BlockId(0)};
  EXPECT_THAT(CheckBlockRefs(blocks, 16, d, CopiersOf(**kv)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no draft pool")));
}

TEST(KvDescriptorTest, TheDtypeSizesTheElementsOnBothSidesOfTheWire) {
  EXPECT_EQ(*DtypeElementBytes("f32"), 4);
  EXPECT_EQ(*DtypeElementBytes("bf16"), 2);
  EXPECT_THAT(DtypeElementBytes("f64"), StatusIs(absl::StatusCode::kInvalidArgument));
  KvDescriptor d = Base();
  d.dtype = "bf16";
  EXPECT_THAT(d.Validate(), StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr("element_bytes 4 but dtype bf16 has 2")));
  d.target->element_bytes = 2;
  d.draft->element_bytes = 2;
  ASSERT_THAT(d.Validate(), IsOk());
  lockstep::v1::KvDescriptor proto;
  ToProto(d, &proto);
  absl::StatusOr<KvDescriptor> back = FromProto(proto);
  ASSERT_THAT(back.status(), IsOk());
  EXPECT_EQ(back->target, d.target);  // element_bytes 2 restored from the dtype
  EXPECT_EQ(back->draft, d.draft);
  // An f32 peer of the same shape is not compatible.
  EXPECT_THAT(CheckCompatible(Base(), d), StatusIs(absl::StatusCode::kFailedPrecondition));
  proto.set_dtype("int4");
  EXPECT_THAT(FromProto(proto).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'int4'")));
}

}  // namespace
}  // namespace lockstep::transfer
