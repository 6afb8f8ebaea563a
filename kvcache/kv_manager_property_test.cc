// Randomized property test: random operations on a KvManager, checked op by op against
// a plain reference model (lengths, statuses, generations, stale counts, the outcome of
// every call), with Audit clean after each operation. KV content is checked too: every
// computed position holds its token (written into the K slot) in the target pool and in
// the draft pool (paired, or an unpaired mirror, which reuses from its own tree), so a
// block shared or reused by mistake shows up as a wrong token.
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kvcache/kv_manager.h"

namespace lockstep::kv {
namespace {

using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;

struct Variant {
  const char* name;
  DraftMode mode;
  bool reuse;
  int32_t reserved_tokens;
  int target_tpb;
  int draft_tpb;
  int ops;
};

void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }

struct ModelCache {
  uint64_t generation = 0;
  int64_t committed = 0;
  int64_t history = 0;
  int64_t capacity = 0;
  CacheStatus status = CacheStatus::kActive;
};

struct ModelRequest {
  std::vector<int32_t> tokens;  // tokens[0, target.history) are computed
  ModelCache target;
  std::optional<ModelCache> draft;
};

constexpr int32_t kTargetBlocks = 16;
constexpr int32_t kDraftBlocks = 12;
constexpr int kNumIds = 10;
constexpr int kDocLength = 48;

class Harness {
 public:
  Harness(const Variant& v, uint64_t seed) : v_(v), rng_(seed) {
    KvManagerConfig config;
    config.target.layout = BlockLayout{.tokens_per_block = v.target_tpb};
    config.target.num_blocks = kTargetBlocks;
    config.target.enable_prefix_reuse = v.reuse;
    config.target.reuse_salt = 11;
    config.draft_mode = v.mode;
    config.draft.layout = BlockLayout{.tokens_per_block = v.draft_tpb};
    config.draft.num_blocks = kDraftBlocks;
    config.draft.enable_prefix_reuse = v.reuse;
    config.draft.reuse_salt = 12;
    config.dummy_reserved_tokens = v.reserved_tokens;
    absl::StatusOr<std::unique_ptr<KvManager>> m = KvManager::Create(config);
    EXPECT_THAT(m, ::lockstep::testing::IsOk());
    if (m.ok()) m_ = std::move(*m);
    for (auto& doc : docs_) {
      doc.resize(kDocLength);
      for (int32_t& t : doc) t = Uniform(0, 999);
    }
  }

  bool ok() const { return m_ != nullptr; }
  // How often each outcome was expected (and seen): the run must cover them all.
  int outcomes(absl::StatusCode code) const {
    auto it = outcomes_.find(code);
    return it == outcomes_.end() ? 0 : it->second;
  }
  int64_t stale() const { return stale_; }
  int64_t mirror_reused() const { return mirror_reused_; }
  int applied() const { return applied_; }
  const KvManager& manager() const { return *m_; }
  const std::string& last_op() const { return op_; }

  void Step() {
    const int dice = Uniform(0, 99);
    if (dice < 12) {
      Create();
    } else if (dice < 32) {
      ResizeOp(PoolKind::kTarget);
    } else if (dice < 40) {
      AdmitMirror();
    } else if (dice < 48) {
      ResizeOp(PoolKind::kDraft);
    } else if (dice < 56) {
      RecordUpdate();
    } else if (dice < 68) {
      ApplyRecordedUpdate();
    } else if (dice < 76) {
      Commit();
    } else if (dice < 86) {
      Release();
    } else if (dice < 93) {
      SuspendOrResume();
    } else {
      CanGrow();
    }
  }

  // Everything observable agrees with the model; the audit is clean.
  void Check() {
    std::vector<RequestId> live;
    std::vector<RequestId> target_ids;
    std::vector<RequestId> draft_ids;
    for (const auto& [id, r] : model_) {
      if (id != m_->dummy_id()) live.push_back(id);
      target_ids.push_back(id);
      if (r.draft) draft_ids.push_back(id);
    }
    EXPECT_THAT(m_->Audit(live, {}, model_.contains(m_->dummy_id())), ::testing::IsEmpty());
    EXPECT_EQ(m_->Ids(PoolKind::kTarget), target_ids);
    EXPECT_EQ(m_->Ids(PoolKind::kDraft), draft_ids);
    for (const auto& [id, r] : model_) {
      ExpectInfo(id, PoolKind::kTarget, r.target);
      if (r.draft) ExpectInfo(id, PoolKind::kDraft, *r.draft);
      ExpectContent(id, PoolKind::kTarget, r.tokens, r.target.history);
      if (r.draft) ExpectContent(id, PoolKind::kDraft, r.tokens, r.draft->history);
    }
    const ManagerStats stats = m_->Stats();
    EXPECT_EQ(stats.stale_updates, stale_);
    for (const std::optional<PoolStats>& p :
         {std::optional<PoolStats>(stats.target), stats.draft}) {
      if (!p) continue;
      EXPECT_EQ(p->free_blocks + p->used_blocks + p->cached_blocks + p->reserved_blocks,
                p->total_blocks);
    }
  }

 private:
  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool Chance(int percent) { return Uniform(0, 99) < percent; }

  RequestId PickId() {
    const int i = Uniform(0, kNumIds);
    return i == kNumIds ? m_->dummy_id() : RequestId(i + 1);
  }
  ModelRequest* Find(RequestId id) {
    auto it = model_.find(id);
    return it == model_.end() ? nullptr : &it->second;
  }
  int tpb(PoolKind pool) const { return pool == PoolKind::kTarget ? v_.target_tpb : v_.draft_tpb; }
  int64_t BlocksFor(PoolKind pool, int64_t tokens) const {
    return (tokens + tpb(pool) - 1) / tpb(pool);
  }
  int64_t Available(PoolKind pool, RequestId id) const {
    const ManagerStats s = m_->Stats();
    const PoolStats& p = pool == PoolKind::kTarget ? s.target : *s.draft;
    return p.free_blocks + p.cached_blocks + (id == m_->dummy_id() ? p.reserved_blocks : 0);
  }

  // The K slot of `position` in `pool`'s block table of `id`.
  float* Slot(RequestId id, PoolKind pool, int64_t position) {
    const BlockLayout& layout = m_->layout(pool);
    const BlockId block = m_->BlockTable(id, pool)[position / layout.tokens_per_block];
    return reinterpret_cast<float*>(m_->Storage(pool)) +
           static_cast<size_t>(block.value()) * layout.BlockElements() +
           layout.Offset(0, 0, 0, static_cast<int>(position % layout.tokens_per_block));
  }
  // "Computes" KV for positions [from, to) in `pool` (and a paired draft with its
  // target): writes each token into its K slot.
  void ComputeKv(RequestId id, ModelRequest& r, PoolKind pool, int64_t from, int64_t to) {
    while (static_cast<int64_t>(r.tokens.size()) < to) r.tokens.push_back(Uniform(0, 999));
    for (PoolKind p : {PoolKind::kTarget, PoolKind::kDraft}) {
      if (p != pool && !(p == PoolKind::kDraft && v_.mode == DraftMode::kPaired)) continue;
      for (int64_t i = from; i < to; ++i) *Slot(id, p, i) = static_cast<float>(r.tokens[i]);
    }
  }
  void ExpectContent(RequestId id, PoolKind pool, const std::vector<int32_t>& tokens,
                     int64_t history) {
    for (int64_t p = 0; p < history; ++p) {
      ASSERT_EQ(*Slot(id, pool, p), static_cast<float>(tokens[p]))
          << PoolKindName(pool) << " KV of request " << id << " at position " << p;
    }
  }
  void ExpectInfo(RequestId id, PoolKind pool, const ModelCache& want) {
    const std::optional<CacheInfo> got = m_->Info(id, pool);
    ASSERT_TRUE(got.has_value()) << PoolKindName(pool) << " cache of " << id;
    EXPECT_EQ(got->generation, want.generation) << PoolKindName(pool) << " " << id;
    EXPECT_EQ(got->committed, want.committed) << PoolKindName(pool) << " " << id;
    EXPECT_EQ(got->history, want.history) << PoolKindName(pool) << " " << id;
    EXPECT_EQ(got->capacity, want.capacity) << PoolKindName(pool) << " " << id;
    EXPECT_EQ(got->status, want.status) << PoolKindName(pool) << " " << id;
  }

  void Create() {
    const RequestId id = PickId();
    std::vector<int32_t> prompt = docs_[Uniform(0, 2)];
    prompt.resize(static_cast<size_t>(Uniform(1, 40)));
    if (Chance(30)) prompt[Uniform(0, static_cast<int>(prompt.size()) - 1)] = Uniform(0, 999);
    op_ = absl::StrCat("CreateCache(", id.value(), ", ", prompt.size(), " tokens)");
    const int64_t probe = m_->ProbePrefix(prompt);
    absl::StatusOr<int64_t> reused = m_->CreateCache(id, prompt);
    if (Find(id) != nullptr) {
      EXPECT_THAT(reused, ::lockstep::testing::StatusIs(absl::StatusCode::kAlreadyExists));
      return;
    }
    ASSERT_THAT(reused, ::lockstep::testing::IsOk());
    if (id == m_->dummy_id() || !v_.reuse) {
      EXPECT_EQ(*reused, 0);
    } else {
      EXPECT_EQ(*reused, probe);
    }
    EXPECT_LE(*reused, static_cast<int64_t>(prompt.size()) - 1 + (prompt.size() < 2 ? 1 : 0));
    EXPECT_EQ(*reused % v_.target_tpb, 0);
    // Reused KV holds exactly the prompt's tokens.
    ExpectContent(id, PoolKind::kTarget, prompt, *reused);
    ModelRequest& r = model_[id];
    r.tokens = prompt;
    r.target = ModelCache{.generation = next_generation_++,
                          .committed = *reused,
                          .history = *reused,
                          .capacity = *reused};
    if (v_.mode == DraftMode::kPaired) {
      EXPECT_EQ(*reused % v_.draft_tpb, 0);
      ExpectContent(id, PoolKind::kDraft, prompt, *reused);
      r.draft = r.target;
      r.draft->generation = next_generation_++;
    }
  }

  // Resize with lengths drawn to be valid most of the time; the model predicts the
  // outcome, including ResourceExhausted from the pool's free + evictable blocks.
  void ResizeOp(PoolKind pool) {
    const RequestId id = PickId();
    ModelRequest* r = Find(id);
    const ModelCache* c = r == nullptr                ? nullptr
                          : pool == PoolKind::kTarget ? &r->target
                          : r->draft                  ? &*r->draft
                                                      : nullptr;
    const int64_t cap0 = c ? c->capacity : 0;
    const int64_t hist0 = c ? c->history : 0;
    std::optional<int64_t> capacity;
    std::optional<int64_t> history;
    switch (Uniform(0, 4)) {
      case 0:  // shrink toward history
        capacity = Uniform(static_cast<int>(hist0), static_cast<int>(cap0));
        break;
      case 1:  // invalid on purpose
        history = Chance(50) ? hist0 - 1 : cap0 + 1;
        break;
      default:  // grow
        capacity = cap0 + Uniform(0, 12);
        history = Uniform(static_cast<int>(hist0), static_cast<int>(*capacity));
        if (Chance(20)) history.reset();
    }
    op_ = absl::StrCat("Resize(", id.value(), ", ", PoolKindName(pool), ", ",
                       capacity ? absl::StrCat(*capacity) : "-", ", ",
                       history ? absl::StrCat(*history) : "-", ")");
    const absl::StatusCode want = Predict(id, pool, capacity, history);
    const absl::Status got = m_->Resize(id, pool, capacity, history);
    ExpectCode(got, want);
    if (want == absl::StatusCode::kOk) ApplyToModel(id, pool, capacity, history);
  }

  // The status a Resize would return (the manager's rule order), without calling it.
  absl::StatusCode Predict(RequestId id, PoolKind pool, std::optional<int64_t> capacity,
                           std::optional<int64_t> history) {
    ModelRequest* r = Find(id);
    if (pool == PoolKind::kDraft) {
      if (v_.mode == DraftMode::kNone) return absl::StatusCode::kNotFound;
      if (v_.mode == DraftMode::kPaired) return absl::StatusCode::kFailedPrecondition;
      if (r == nullptr || !r->draft) return absl::StatusCode::kNotFound;
    }
    if (r == nullptr) return absl::StatusCode::kNotFound;
    const ModelCache& c = pool == PoolKind::kTarget ? r->target : *r->draft;
    if (c.status != CacheStatus::kActive) return absl::StatusCode::kFailedPrecondition;
    const int64_t cap = capacity.value_or(c.capacity);
    const int64_t hist = history.value_or(c.history);
    if (hist < c.history || hist > cap) {
      next_message_ = hist < c.history ? "history length cannot decrease"
                                       : "history length cannot exceed capacity";
      return absl::StatusCode::kInvalidArgument;
    }
    std::vector<PoolKind> pools = {pool};
    if (pool == PoolKind::kTarget && v_.mode == DraftMode::kPaired)
      pools.push_back(PoolKind::kDraft);
    for (PoolKind p : pools) {
      const int64_t needed = BlocksFor(p, cap) - BlocksFor(p, c.capacity);
      if (needed > 0 && needed > Available(p, id)) return absl::StatusCode::kResourceExhausted;
    }
    return absl::StatusCode::kOk;
  }

  void ExpectCode(const absl::Status& got, absl::StatusCode want) {
    ++outcomes_[want];
    EXPECT_EQ(got.code(), want) << got;
    if (want == absl::StatusCode::kInvalidArgument) {
      EXPECT_EQ(got.message(), next_message_);
    }
  }

  void ApplyToModel(RequestId id, PoolKind pool, std::optional<int64_t> capacity,
                    std::optional<int64_t> history) {
    ModelRequest& r = *Find(id);
    std::vector<ModelCache*> caches = {pool == PoolKind::kTarget ? &r.target : &*r.draft};
    if (pool == PoolKind::kTarget && v_.mode == DraftMode::kPaired) caches.push_back(&*r.draft);
    const int64_t old_history = caches[0]->history;
    for (ModelCache* c : caches) {
      c->capacity = capacity.value_or(c->capacity);
      c->history = history.value_or(c->history);
    }
    ComputeKv(id, r, pool, old_history, caches[0]->history);
  }

  // Admits a mirror, half the time with the request's tokens (a new mirror may then
  // reuse its own pool's committed prefix, never beyond its target's history).
  void AdmitMirror() {
    const RequestId id = PickId();
    ModelRequest* r = Find(id);
    const bool with_prompt = r != nullptr && Chance(50);
    const std::vector<int32_t> prompt = with_prompt ? r->tokens : std::vector<int32_t>();
    op_ = absl::StrCat("AdmitMirror(", id.value(), ", ", prompt.size(), " tokens)");
    const absl::Status got = m_->AdmitMirror(id, prompt);
    if (v_.mode != DraftMode::kUnpaired) {
      ExpectCode(got, absl::StatusCode::kFailedPrecondition);
    } else if (r == nullptr) {
      ExpectCode(got, absl::StatusCode::kNotFound);
    } else {
      ExpectCode(got, absl::StatusCode::kOk);
      if (r->draft) {
        r->draft->status = CacheStatus::kActive;
        return;
      }
      const std::optional<CacheInfo> info = m_->Info(id, PoolKind::kDraft);
      ASSERT_TRUE(info.has_value());
      const int64_t reused = info->history;
      if (!with_prompt || !v_.reuse || id == m_->dummy_id()) EXPECT_EQ(reused, 0);
      EXPECT_LE(reused, r->target.history);
      EXPECT_LE(reused, std::max<int64_t>(0, static_cast<int64_t>(prompt.size()) - 1));
      EXPECT_EQ(reused % v_.draft_tpb, 0);
      mirror_reused_ += reused;
      r->draft = ModelCache{.generation = next_generation_++,
                            .committed = reused,
                            .history = reused,
                            .capacity = reused};
      // Reused KV holds exactly the request's tokens.
      ExpectContent(id, PoolKind::kDraft, r->tokens, reused);
    }
  }

  // Snapshots an update for a cache as it is now; applied later, maybe after the cache
  // was released or re-created.
  void RecordUpdate() {
    const RequestId id = PickId();
    const PoolKind pool = Chance(70) ? PoolKind::kTarget : PoolKind::kDraft;
    ModelRequest* r = Find(id);
    const ModelCache* c = r == nullptr                ? nullptr
                          : pool == PoolKind::kTarget ? &r->target
                          : r->draft                  ? &*r->draft
                                                      : nullptr;
    op_ = absl::StrCat("RecordUpdate(", id.value(), ", ", PoolKindName(pool), ")");
    if (c == nullptr) return;
    // Mostly what a completed step computes: history moves within capacity, capacity
    // is kept or trimmed (rejected drafts).
    CacheUpdate u{.id = id, .pool = pool, .generation = c->generation};
    u.history = c->history + Uniform(0, static_cast<int>(c->capacity - c->history) + 1);
    if (Chance(50)) u.capacity = std::max(u.history, c->capacity - Uniform(0, 3));
    recorded_.push_back(u);
    if (recorded_.size() > 32) recorded_.erase(recorded_.begin());
  }

  // Applies the latest recorded update (usually still live) or an older one (often
  // stale: released, re-created or suspended since).
  void ApplyRecordedUpdate() {
    if (recorded_.empty()) return;
    const CacheUpdate u = Chance(50)
                              ? recorded_.back()
                              : recorded_[Uniform(0, static_cast<int>(recorded_.size()) - 1)];
    op_ = absl::StrCat("ApplyUpdate(", u.id.value(), ", ", PoolKindName(u.pool), ", gen ",
                       u.generation, ", ", u.capacity ? absl::StrCat(*u.capacity) : "-", ", ",
                       u.history, ")");
    ModelRequest* r = Find(u.id);
    const ModelCache* c = r == nullptr                  ? nullptr
                          : u.pool == PoolKind::kTarget ? &r->target
                          : r->draft                    ? &*r->draft
                                                        : nullptr;
    const bool live =
        c != nullptr && c->generation == u.generation && c->status == CacheStatus::kActive;
    const absl::StatusCode want =
        live ? Predict(u.id, u.pool, u.capacity, u.history) : absl::StatusCode::kOk;
    absl::StatusOr<UpdateResult> got = m_->ApplyUpdate(u);
    ExpectCode(got.status(), want);
    if (!live) {
      ++stale_;
      if (got.ok()) {
        EXPECT_EQ(*got, UpdateResult::kStale);
      }
    } else if (want == absl::StatusCode::kOk) {
      EXPECT_EQ(*got, UpdateResult::kApplied);
      ++applied_;
      ApplyToModel(u.id, u.pool, u.capacity, u.history);
    }
  }

  void Commit() {
    const RequestId id = PickId();
    op_ = absl::StrCat("Commit(", id.value(), ")");
    ModelRequest* r = Find(id);
    const std::vector<int32_t> tokens = r ? r->tokens : std::vector<int32_t>{1, 2, 3};
    const absl::Status got = m_->Commit(id, tokens);
    if (r == nullptr) {
      ExpectCode(got, absl::StatusCode::kNotFound);
      return;
    }
    ExpectCode(got, absl::StatusCode::kOk);
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(tokens.size()), r->target.history);
    r->target.committed = std::max(r->target.committed, n / v_.target_tpb * v_.target_tpb);
    if (r->draft) {  // paired, or an unpaired mirror: up to its own history
      const int64_t d = std::min<int64_t>(static_cast<int64_t>(tokens.size()), r->draft->history);
      r->draft->committed = std::max(r->draft->committed, d / v_.draft_tpb * v_.draft_tpb);
    }
  }

  void Release() {
    const RequestId id = PickId();
    op_ = absl::StrCat("Release(", id.value(), ")");
    ModelRequest* r = Find(id);
    const int want = r == nullptr ? 0 : 1 + (r->draft ? 1 : 0);
    EXPECT_EQ(m_->Release(id), want);
    model_.erase(id);
  }

  void SuspendOrResume() {
    const RequestId id = PickId();
    const bool suspend = Chance(50);
    op_ = absl::StrCat(suspend ? "Suspend(" : "Resume(", id.value(), ")");
    const absl::Status got = suspend ? m_->Suspend(id) : m_->Resume(id);
    ModelRequest* r = Find(id);
    if (r == nullptr) {
      ExpectCode(got, absl::StatusCode::kNotFound);
      return;
    }
    ExpectCode(got, absl::StatusCode::kOk);
    const CacheStatus status = suspend ? CacheStatus::kSuspended : CacheStatus::kActive;
    r->target.status = status;
    if (r->draft) r->draft->status = status;
  }

  void CanGrow() {
    const RequestId id = PickId();
    const int tokens = Uniform(-2, 40);
    op_ = absl::StrCat("CanGrow(", id.value(), ", ", tokens, ")");
    ModelRequest* r = Find(id);
    bool want = true;
    for (PoolKind pool : {PoolKind::kTarget, PoolKind::kDraft}) {
      if (pool == PoolKind::kDraft && v_.mode == DraftMode::kNone) continue;
      const ModelCache* c = r == nullptr                ? nullptr
                            : pool == PoolKind::kTarget ? &r->target
                            : r->draft                  ? &*r->draft
                                                        : nullptr;
      const int64_t cap = c ? c->capacity : 0;
      const int64_t needed = BlocksFor(pool, cap + std::max(tokens, 0)) - BlocksFor(pool, cap);
      if (needed > 0 && needed > Available(pool, id)) want = false;
    }
    EXPECT_EQ(m_->CanGrow(id, tokens), want);
  }

  const Variant v_;
  std::mt19937_64 rng_;
  std::unique_ptr<KvManager> m_;
  std::vector<int32_t> docs_[3];
  std::map<RequestId, ModelRequest> model_;  // ordered: same order as Ids()
  std::vector<CacheUpdate> recorded_;
  uint64_t next_generation_ = 1;
  int64_t stale_ = 0;
  int64_t mirror_reused_ = 0;
  std::string op_;
  std::string next_message_;
  std::map<absl::StatusCode, int> outcomes_;
  int applied_ = 0;
};

class KvManagerPropertyTest : public ::testing::TestWithParam<Variant> {};

TEST_P(KvManagerPropertyTest, RandomOperationsMatchTheModelAndAuditClean) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  Harness h(GetParam(), seed);
  ASSERT_TRUE(h.ok());
  for (int i = 0; i < GetParam().ops; ++i) {
    h.Step();
    h.Check();
    if (::testing::Test::HasFailure()) {
      FAIL() << "after operation " << i << ": " << h.last_op();
    }
  }
  // The run exercised every path it is meant to check.
  const ManagerStats stats = h.manager().Stats();
  std::cout << GetParam().name << ": ok " << h.outcomes(absl::StatusCode::kOk) << ", invalid "
            << h.outcomes(absl::StatusCode::kInvalidArgument) << ", exhausted "
            << h.outcomes(absl::StatusCode::kResourceExhausted) << ", not found "
            << h.outcomes(absl::StatusCode::kNotFound) << ", precondition "
            << h.outcomes(absl::StatusCode::kFailedPrecondition) << ", stale " << h.stale()
            << ", applied updates " << h.applied() << ", reused tokens " << stats.reused_tokens
            << ", mirror reused tokens " << stats.mirror_reused_tokens << ", evicted blocks "
            << stats.evicted_blocks << "\n";
  EXPECT_GT(h.outcomes(absl::StatusCode::kOk), GetParam().ops / 10);
  EXPECT_GT(h.outcomes(absl::StatusCode::kInvalidArgument), 0);
  EXPECT_GT(h.outcomes(absl::StatusCode::kResourceExhausted), 0);
  EXPECT_GT(h.outcomes(absl::StatusCode::kNotFound), 0);
  EXPECT_GT(h.outcomes(absl::StatusCode::kFailedPrecondition), 0);
  EXPECT_GT(h.stale(), 0);
  EXPECT_GT(h.applied(), 0);
  EXPECT_EQ(stats.mirror_reused_tokens, h.mirror_reused());
  if (GetParam().reuse) {
    EXPECT_GT(stats.reused_tokens, 0);
    EXPECT_GT(stats.evicted_blocks, 0);
    if (GetParam().mode == DraftMode::kUnpaired) EXPECT_GT(stats.mirror_reused_tokens, 0);
  }
}

// 100k operations in all, across the draft modes.
INSTANTIATE_TEST_SUITE_P(
    Modes, KvManagerPropertyTest,
    ::testing::Values(Variant{"none", DraftMode::kNone, true, 0, 4, 4, 25000},
                      Variant{"paired", DraftMode::kPaired, true, 6, 4, 8, 25000},
                      Variant{"unpaired", DraftMode::kUnpaired, true, 6, 4, 4, 25000},
                      Variant{"no_reuse", DraftMode::kUnpaired, false, 4, 8, 4, 25000}),
    [](const ::testing::TestParamInfo<Variant>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace lockstep::kv
