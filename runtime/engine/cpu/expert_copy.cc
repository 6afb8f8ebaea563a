#include "runtime/engine/cpu/expert_copy.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <utility>

#include "absl/strings/str_cat.h"

namespace lockstep::engine {
namespace {

bool Holds(const std::vector<int>& slots, int expert) {
  return std::binary_search(slots.begin(), slots.end(), expert);
}

void AppendInts(std::string& out, std::initializer_list<int32_t> values) {
  for (int32_t v : values) out.append(reinterpret_cast<const char*>(&v), sizeof(v));
}

void AppendFloats(std::string& out, absl::Span<const float> values) {
  out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

// Reads the encoded experts of one sender in order.
class Reader {
 public:
  explicit Reader(const std::string& bytes) : bytes_(bytes) {}

  bool Int(int32_t& v) { return Raw(&v, sizeof(v)); }
  bool Floats(size_t n, std::vector<float>& out) {
    out.resize(n);
    return Raw(out.data(), n * sizeof(float));
  }
  bool done() const { return offset_ == bytes_.size(); }

 private:
  bool Raw(void* out, size_t n) {
    if (bytes_.size() - offset_ < n) return false;
    std::memcpy(out, bytes_.data() + offset_, n);
    offset_ += n;
    return true;
  }

  const std::string& bytes_;
  size_t offset_ = 0;
};

absl::StatusOr<PackedMatrix> ReadMatrix(Reader& reader, int32_t n, int32_t k) {
  std::vector<float> panels;
  const size_t values = static_cast<size_t>((n + PackedMatrix::kPanel - 1) / PackedMatrix::kPanel) *
                        k * PackedMatrix::kPanel;
  if (n < 0 || k < 0 || !reader.Floats(values, panels)) {
    return absl::DataLossError(absl::StrCat("a [", n, ", ", k, "] matrix is cut short"));
  }
  return PackedMatrix::FromPanels(n, k, std::move(panels));
}

absl::StatusOr<SwiGluWeights> ReadExpert(Reader& reader, const ExpertCopy& copy) {
  int32_t layer = 0, expert = 0, width = 0, gn = 0, gk = 0, dn = 0, dk = 0;
  if (!reader.Int(layer) || !reader.Int(expert) || !reader.Int(width) || !reader.Int(gn) ||
      !reader.Int(gk) || !reader.Int(dn) || !reader.Int(dk)) {
    return absl::DataLossError("the bytes end before the expert's header");
  }
  if (layer != copy.layer || expert != copy.expert) {
    return absl::DataLossError(absl::StrCat("got layer ", layer, " expert ", expert));
  }
  SwiGluWeights out;
  out.width = width;
  absl::StatusOr<PackedMatrix> gate_up = ReadMatrix(reader, gn, gk);
  if (!gate_up.ok()) return gate_up.status();
  absl::StatusOr<PackedMatrix> down = ReadMatrix(reader, dn, dk);
  if (!down.ok()) return down.status();
  out.gate_up = std::move(*gate_up);
  out.down = std::move(*down);
  return out;
}

}  // namespace

int HeldIndex(const MoeWeights& moe, int expert) {
  for (size_t j = 0; j < moe.experts.size(); ++j) {
    const int e = moe.held.empty() ? moe.local.first + static_cast<int>(j) : moe.held[j];
    if (e == expert) return static_cast<int>(j);
  }
  return -1;
}

absl::StatusOr<std::vector<ExpertCopy>> PlanExpertCopies(const eplb::Placement& current,
                                                         const eplb::Placement& next,
                                                         const std::vector<bool>& moe_layer) {
  if (current.num_ranks != next.num_ranks || current.layers.size() != next.layers.size() ||
      moe_layer.size() != next.layers.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("placements of ", current.num_ranks, " and ", next.num_ranks, " ranks, ",
                     current.layers.size(), " and ", next.layers.size(), " layers, ",
                     moe_layer.size(), " layer flags"));
  }
  std::vector<ExpertCopy> copies;
  std::vector<int> sends(current.num_ranks, 0);
  for (size_t l = 0; l < next.layers.size(); ++l) {
    if (!moe_layer[l]) continue;
    const auto& now = current.layers[l].slots;
    const auto& then = next.layers[l].slots;
    if (static_cast<int>(now.size()) != current.num_ranks ||
        static_cast<int>(then.size()) != current.num_ranks) {
      return absl::InvalidArgumentError(absl::StrCat("layer ", l, " has no slots for every rank"));
    }
    for (int to = 0; to < next.num_ranks; ++to) {
      for (int e : then[to]) {
        if (Holds(now[to], e)) continue;
        int from = -1;
        for (int r = 0; r < current.num_ranks; ++r) {
          if (Holds(now[r], e) && (from < 0 || sends[r] < sends[from])) from = r;
        }
        if (from < 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("layer ", l, " expert ", e, " is held by no rank"));
        }
        ++sends[from];
        copies.push_back({static_cast<int>(l), e, from, to});
      }
    }
  }
  return copies;
}

absl::StatusOr<std::vector<std::string>> EncodeExpertCopies(const std::vector<ExpertCopy>& copies,
                                                            int rank, int world_size,
                                                            const LayerMoeWeights& weights) {
  std::vector<std::string> send(world_size);
  // Each destination's size first, so its bytes are written once (no regrowth).
  std::vector<size_t> sizes(world_size, 0);
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) {
      for (int to = 0; to < world_size; ++to) send[to].reserve(sizes[to]);
    }
    for (const ExpertCopy& copy : copies) {
      if (copy.from != rank) continue;
      const MoeWeights* moe =
          copy.layer < static_cast<int>(weights.size()) ? weights[copy.layer].get() : nullptr;
      const int index = moe == nullptr ? -1 : HeldIndex(*moe, copy.expert);
      if (index < 0 || copy.to < 0 || copy.to >= world_size) {
        return absl::NotFoundError(absl::StrCat("rank ", rank, " does not hold layer ", copy.layer,
                                                " expert ", copy.expert, " to send to rank ",
                                                copy.to));
      }
      const SwiGluWeights& expert = moe->experts[index];
      if (pass == 0) {
        sizes[copy.to] += kExpertCopyHeaderBytes + expert.gate_up.bytes() + expert.down.bytes();
        continue;
      }
      std::string& out = send[copy.to];
      AppendInts(out, {copy.layer, copy.expert, expert.width, expert.gate_up.n(),
                       expert.gate_up.k(), expert.down.n(), expert.down.k()});
      AppendFloats(out, expert.gate_up.panels());
      AppendFloats(out, expert.down.panels());
    }
  }
  return send;
}

std::vector<std::shared_ptr<MoeWeights>> KeptExperts(int rank, const eplb::Placement& next,
                                                     const LayerMoeWeights& weights) {
  std::vector<std::shared_ptr<MoeWeights>> out(weights.size());
  for (size_t l = 0; l < weights.size(); ++l) {
    if (weights[l] == nullptr) continue;
    const MoeWeights& old = *weights[l];
    auto moe = std::make_shared<MoeWeights>();
    moe->router = old.router;
    moe->score_bias = old.score_bias;
    moe->held = next.layers[l].slots[rank];
    moe->replicas = eplb::ReplicaRanks(next.layers[l], next.num_experts);
    for (int e : moe->held) {
      const int had = HeldIndex(old, e);
      moe->experts.push_back(had >= 0 ? old.experts[had] : SwiGluWeights());
    }
    out[l] = std::move(moe);
  }
  return out;
}

absl::Status FillCopiedExperts(const std::vector<ExpertCopy>& copies, int rank,
                               const std::vector<std::string>& received,
                               std::vector<std::shared_ptr<MoeWeights>>& kept) {
  std::vector<Reader> readers;
  for (const std::string& bytes : received) readers.emplace_back(bytes);
  for (const ExpertCopy& copy : copies) {
    if (copy.to != rank) continue;
    if (copy.from < 0 || copy.from >= static_cast<int>(readers.size()) || copy.layer < 0 ||
        copy.layer >= static_cast<int>(kept.size()) || kept[copy.layer] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("copy of layer ", copy.layer, " expert ",
                                                     copy.expert, " from rank ", copy.from,
                                                     " does not fit ", readers.size(), " ranks"));
    }
    absl::StatusOr<SwiGluWeights> expert = ReadExpert(readers[copy.from], copy);
    if (!expert.ok()) {
      return absl::DataLossError(absl::StrCat("copy of layer ", copy.layer, " expert ", copy.expert,
                                              " from rank ", copy.from, ": ",
                                              expert.status().message()));
    }
    MoeWeights& moe = *kept[copy.layer];
    const auto it = std::find(moe.held.begin(), moe.held.end(), copy.expert);
    if (it == moe.held.end() || moe.experts[it - moe.held.begin()].width != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", rank, " has no empty place for layer ", copy.layer, " expert ", copy.expert));
    }
    moe.experts[it - moe.held.begin()] = std::move(*expert);
  }
  for (size_t from = 0; from < readers.size(); ++from) {
    if (!readers[from].done()) {
      return absl::DataLossError(absl::StrCat("rank ", from, " sent more than its copies"));
    }
  }
  for (size_t l = 0; l < kept.size(); ++l) {
    if (kept[l] == nullptr) continue;
    for (size_t i = 0; i < kept[l]->held.size(); ++i) {
      if (kept[l]->experts[i].width == 0) {
        return absl::DataLossError(absl::StrCat("layer ", l, " expert ", kept[l]->held[i],
                                                " is neither held nor copied to rank ", rank));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<LayerMoeWeights> AssembleExperts(const std::vector<ExpertCopy>& copies, int rank,
                                                const eplb::Placement& next,
                                                const LayerMoeWeights& weights,
                                                const std::vector<std::string>& received) {
  if (static_cast<int>(received.size()) != next.num_ranks) {
    return absl::InvalidArgumentError(
        absl::StrCat("bytes from ", received.size(), " ranks, not ", next.num_ranks));
  }
  std::vector<std::shared_ptr<MoeWeights>> kept = KeptExperts(rank, next, weights);
  absl::Status filled = FillCopiedExperts(copies, rank, received, kept);
  if (!filled.ok()) return filled;
  return LayerMoeWeights(kept.begin(), kept.end());
}

}  // namespace lockstep::engine
