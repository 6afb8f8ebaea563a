#include "common/bounded_json.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace lockstep {
namespace {

// Builds the document bottom-up: each open array or object is a frame holding its
// finished children, moved into its parent when it closes. Returning false from any
// event stops nlohmann's parser at once.
template <typename BasicJson>
class BoundedBuilder final : public nlohmann::json_sax<BasicJson> {
 public:
  using Base = nlohmann::json_sax<BasicJson>;
  using typename Base::binary_t;
  using typename Base::number_float_t;
  using typename Base::number_integer_t;
  using typename Base::number_unsigned_t;
  using typename Base::string_t;

  explicit BoundedBuilder(const JsonBounds& bounds) : bounds_(bounds) {}

  bool null() override { return Add(BasicJson(nullptr)); }
  bool boolean(bool value) override { return Add(BasicJson(value)); }
  bool number_integer(number_integer_t value) override { return Add(BasicJson(value)); }
  bool number_unsigned(number_unsigned_t value) override { return Add(BasicJson(value)); }
  bool number_float(number_float_t value, const string_t&) override {
    return Add(BasicJson(value));
  }
  bool string(string_t& value) override { return Add(BasicJson(std::move(value))); }
  bool binary(binary_t& value) override { return Add(BasicJson::binary(std::move(value))); }

  bool start_object(std::size_t) override { return Open(/*object=*/true); }
  bool key(string_t& key) override {
    frames_.back().key = std::move(key);
    return true;
  }
  bool end_object() override {
    BasicJson object = BasicJson::object();
    FillObject(object.template get_ref<typename BasicJson::object_t&>(), frames_.back().members);
    frames_.pop_back();
    Place(std::move(object));
    return true;
  }
  bool start_array(std::size_t) override { return Open(/*object=*/false); }
  bool end_array() override {
    BasicJson array = std::move(frames_.back().array);
    frames_.pop_back();
    Place(std::move(array));
    return true;
  }

  bool parse_error(std::size_t, const std::string&,
                   const typename BasicJson::exception& error) override {
    // "[json.exception.parse_error.101] parse error at line 1, column 5: ..." without
    // the bracketed id.
    std::string what = error.what();
    if (const size_t end = what.find("] "); !what.empty() && what[0] == '[' && end != what.npos) {
      what.erase(0, end + 2);
    }
    status_ = absl::InvalidArgumentError(absl::StrCat("not valid JSON: ", what));
    return false;
  }

  const absl::Status& status() const { return status_; }
  BasicJson TakeRoot() { return std::move(root_); }

 private:
  struct Frame {
    bool object = false;
    BasicJson array;                                      // !object
    std::vector<std::pair<string_t, BasicJson>> members;  // object, in input order
    string_t key;                                         // object: the next member's
  };

  bool Count() {
    if (++values_ <= bounds_.max_values) return true;
    status_ = absl::InvalidArgumentError(
        absl::StrCat("JSON with more than ", bounds_.max_values,
                     " values (numbers, strings, arrays and objects; the limit bounds the "
                     "memory a body expands to)"));
    return false;
  }

  bool Add(BasicJson value) {
    if (!Count()) return false;
    Place(std::move(value));
    return true;
  }

  bool Open(bool object) {
    if (!Count()) return false;
    if (static_cast<int64_t>(frames_.size()) >= bounds_.max_depth) {
      status_ = absl::InvalidArgumentError(
          absl::StrCat("JSON nested deeper than ", bounds_.max_depth,
                       " levels (arrays and objects inside one another)"));
      return false;
    }
    Frame& frame = frames_.emplace_back();
    frame.object = object;
    if (!object) frame.array = BasicJson::array();
    return true;
  }

  void Place(BasicJson&& value) {
    if (frames_.empty()) {
      root_ = std::move(value);
      return;
    }
    Frame& parent = frames_.back();
    if (parent.object) {
      parent.members.emplace_back(std::move(parent.key), std::move(value));
    } else {
      parent.array.push_back(std::move(value));
    }
  }

  // std::map (nlohmann::json): inserted one by one, the last of equal keys wins.
  // ordered_map (nlohmann::ordered_json): appended in input order once duplicates are
  // merged (sorted indices: O(n log n), where ordered_map's operator[] scans).
  template <typename ObjectT>
  static void FillObject(ObjectT& object, std::vector<std::pair<string_t, BasicJson>>& members) {
    if constexpr (!std::is_base_of_v<std::vector<std::pair<const string_t, BasicJson>>, ObjectT>) {
      for (auto& [key, value] : members) object[std::move(key)] = std::move(value);
    } else {
      std::vector<size_t> order(members.size());
      std::iota(order.begin(), order.end(), size_t{0});
      std::stable_sort(order.begin(), order.end(), [&members](size_t a, size_t b) {
        return members[a].first < members[b].first;
      });
      std::vector<bool> dropped(members.size(), false);
      size_t kept = members.size();
      size_t first = 0;  // in `order`: the first of the current run of equal keys
      for (size_t i = 1; i < order.size(); ++i) {
        if (members[order[i]].first != members[order[first]].first) {
          first = i;
          continue;
        }
        // Equal keys, in input order: the first keeps its place and takes this value.
        members[order[first]].second = std::move(members[order[i]].second);
        dropped[order[i]] = true;
        --kept;
      }
      object.reserve(kept);
      for (size_t i = 0; i < members.size(); ++i) {
        if (dropped[i]) continue;
        object.emplace_back(std::move(members[i].first), std::move(members[i].second));
      }
    }
  }

  const JsonBounds bounds_;
  std::vector<Frame> frames_;
  BasicJson root_;
  int64_t values_ = 0;
  absl::Status status_;
};

}  // namespace

template <typename BasicJson>
absl::StatusOr<BasicJson> ParseBoundedJson(std::string_view text, const JsonBounds& bounds) {
  BoundedBuilder<BasicJson> builder(bounds);
  const bool parsed = BasicJson::sax_parse(text.begin(), text.end(), &builder);
  if (!parsed || !builder.status().ok()) {
    return builder.status().ok() ? absl::InvalidArgumentError("not valid JSON") : builder.status();
  }
  return builder.TakeRoot();
}

template absl::StatusOr<nlohmann::json> ParseBoundedJson<nlohmann::json>(std::string_view,
                                                                         const JsonBounds&);
template absl::StatusOr<nlohmann::ordered_json> ParseBoundedJson<nlohmann::ordered_json>(
    std::string_view, const JsonBounds&);

}  // namespace lockstep
