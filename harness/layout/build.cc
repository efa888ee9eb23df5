// File: harness/layout/build.cc
//
// build_layout: validation rules R1–R10 (layout.h; spec megatron_mtp_standalone.md §2.3–2.6) and
// the StagePlan of every (pipeline rank, virtual stage).
//
// Check order: R1–R5, R7–R10, then R6. Given R2, R3 and R7, the only thing R10 can catch is a `t`
// in a stage after the MTP stage, which also breaks R6; it is reported as R10 because that
// message names the stage. R6 then reports a `t` after `m` inside the MTP stage itself.

#include <fmt/format.h>

#include <string>
#include <vector>

#include "harness/layout/internal.h"
#include "harness/layout/layout.h"

namespace mtp::layout {
namespace {

using internal::SourcedStage;

/// One item of the expanded layout, in string order.
struct Item {
  int stage;  // stage index i
  int index;  // position within the stage
  char c;
  int pos;  // position in the string as given
};

// The text of rule Rn is kRuleText[n - 1].
constexpr const char* kRuleText[] = {
    "the number of stages must be a multiple of P",
    "exactly one 'E', and it is the first item of stage 0",
    "exactly one 'L', and it is the last item of the last stage",
    "the number of 't' must equal num_layers",
    "the number of 'm' must equal mtp_num_layers",
    "no 't' after the first 'm'",
    "all 'm' in one stage",
    "the MTP stage must be a last virtual stage (v = V-1)",
    "the MTP stage must not be on pipeline rank 0 (when P > 1)",
    "every stage after the MTP stage is empty or holds only 'L'",
};

class Builder {
 public:
  Builder(const std::string& text, int pipeline_size, int num_layers, int mtp_num_layers,
          MtpRule rule)
      : text_(text), p_(pipeline_size), n_(num_layers), d_(mtp_num_layers), rule_(rule) {}

  PipelineLayout run() {
    check_arguments();
    stages_ = internal::parse_sourced(text_);
    const int num_stages = static_cast<int>(stages_.size());
    if (num_stages % p_ != 0) {
      fail(1, fmt::format("the layout has {} stages, which is not a multiple of P = {}", num_stages,
                          p_));
    }
    v_ = num_stages / p_;
    for (int i = 0; i < num_stages; ++i) {
      const SourcedStage& st = stages_[i];
      for (int j = 0; j < static_cast<int>(st.items.size()); ++j) {
        items_.push_back({i, j, st.items[j], st.positions[j]});
      }
    }
    check_marker('E', 2, 0, /*first_item=*/true);
    check_marker('L', 3, num_stages - 1, /*first_item=*/false);
    check_count('t', 4, n_, "num_layers");
    check_count('m', 5, d_, "mtp_num_layers");
    const std::vector<int> mtp_stages = d_ > 0 ? check_mtp_placement() : std::vector<int>{};
    return make_layout(mtp_stages);
  }

 private:
  [[noreturn]] void fail(int rule, const std::string& detail) const {
    throw LayoutError(fmt::format("{} with P = {}: rule R{} ({}): {}",
                                  internal::quote_layout(text_), p_, rule, kRuleText[rule - 1],
                                  detail));
  }

  void check_arguments() const {
    const auto bad = [&](const std::string& what) {
      throw LayoutError(fmt::format("{}: {}", internal::quote_layout(text_), what));
    };
    if (p_ < 1) bad(fmt::format("pipeline_size (P) must be at least 1, got {}", p_));
    if (n_ < 1) bad(fmt::format("num_layers must be at least 1, got {}", n_));
    if (d_ < 0) bad(fmt::format("mtp_num_layers must be at least 0, got {}", d_));
  }

  std::string stage_name(int i) const {
    return fmt::format("stage {} (p={}, v={})", i, i % p_, i / p_);
  }
  std::string item_name(const Item& it) const {
    return fmt::format("{} at position {} (item {} of {})", internal::describe_char(it.c), it.pos,
                       it.index, stage_name(it.stage));
  }

  std::vector<Item> items_of(char c) const {
    std::vector<Item> found;
    for (const Item& it : items_) {
      if (it.c == c) found.push_back(it);
    }
    return found;
  }

  // R2 / R3: exactly one `marker`, the first (E) or last (L) item of stage `stage`.
  void check_marker(char marker, int rule, int stage, bool first_item) const {
    const std::vector<Item> found = items_of(marker);
    const std::string where =
        fmt::format("{} item of {}", first_item ? "the first" : "the last", stage_name(stage));
    if (found.empty()) {
      fail(rule, fmt::format("there is no '{}'; it must be {}", marker, where));
    }
    if (found.size() > 1) {
      fail(rule, fmt::format("a second '{}': {}", marker, item_name(found[1])));
    }
    const Item& it = found[0];
    const int last_index = static_cast<int>(stages_[stage].items.size()) - 1;
    if (it.stage != stage || it.index != (first_item ? 0 : last_index)) {
      fail(rule, fmt::format("{}; it must be {}", item_name(it), where));
    }
  }

  // R4 / R5: the number of `c` equals `expected`.
  void check_count(char c, int rule, int expected, const char* knob) const {
    const std::vector<Item> found = items_of(c);
    const int count = static_cast<int>(found.size());
    if (count == expected) return;
    std::string detail =
        fmt::format("the layout has {} '{}' but {} = {}", count, c, knob, expected);
    if (count > expected) {
      detail += fmt::format("; the first one too many is {}", item_name(found[expected]));
    }
    fail(rule, detail);
  }

  // R7, R8, R9, R10, R6 (in that order); returns the MTP stages (ascending).
  std::vector<int> check_mtp_placement() const {
    const std::vector<Item> ms = items_of('m');
    const Item& first = ms.front();
    const int s = first.stage;
    std::vector<int> stages{s};
    for (const Item& it : ms) {
      if (it.stage == stages.back()) continue;
      if (rule_ == MtpRule::kOneStage) {
        fail(7, fmt::format("{}, but the first 'm' is in {} (only the split implementation "
                            "spreads MTP depths over stages)",
                            item_name(it), stage_name(s)));
      }
      if (it.stage != stages.back() + 1) {
        fail(7, fmt::format("{}, but the stage before it, {}, holds no 'm': the MTP stages must "
                            "be consecutive",
                            item_name(it), stage_name(it.stage - 1)));
      }
      stages.push_back(it.stage);
    }
    for (const Item& it : ms) {
      if (it.stage / p_ != v_ - 1) {
        fail(8, fmt::format("the 'm' at position {} is in {}, but its virtual stage must be "
                            "V-1 = {}",
                            it.pos, stage_name(it.stage), v_ - 1));
      }
      if (p_ > 1 && it.stage % p_ == 0) {
        fail(9, fmt::format("the 'm' at position {} is in {}, on pipeline rank 0", it.pos,
                            stage_name(it.stage)));
      }
    }
    for (const Item& it : items_) {
      if (it.stage > s && it.c != 'L' && !(it.c == 'm' && it.stage <= stages.back())) {
        fail(10, fmt::format("{} comes after the MTP {}", item_name(it), stage_name(s)));
      }
    }
    for (const Item& it : items_) {
      if (it.c == 't' && it.stage == s && it.index > first.index) {
        fail(6,
             fmt::format("{} comes after the first 'm' at position {}", item_name(it), first.pos));
      }
    }
    return stages;
  }

  PipelineLayout make_layout(const std::vector<int>& mtp_stages) const {
    const int mtp_stage = mtp_stages.empty() ? -1 : mtp_stages.front();
    PipelineLayout layout;
    layout.text = text_;
    layout.pipeline_size = p_;
    layout.virtual_size = v_;
    layout.num_layers = n_;
    layout.mtp_num_layers = d_;
    layout.mtp_stage = mtp_stage;
    layout.mtp_stages = mtp_stages;
    layout.mtp_standalone = mtp_stage >= 0 && mtp_stage % p_ != p_ - 1;
    int next_layer = 0;
    int next_depth = 1;  // depth k is the k-th `m` in string order
    int fln_stage = static_cast<int>(stages_.size()) - 1;
    for (int i = 0; i < static_cast<int>(stages_.size()); ++i) {
      StagePlan plan;
      plan.stage_index = i;
      plan.pipeline_rank = i % p_;
      plan.virtual_stage = i / p_;
      for (char c : stages_[i].items) {
        if (c == 't') plan.decoder_layers.push_back(next_layer++);
        if (c == 'E') plan.has_embedding = true;
        if (c == 'L') plan.has_loss = true;
      }
      for (char c : stages_[i].items) {
        if (c == 'm') plan.mtp_depths.push_back(next_depth++);
      }
      if (d_ > 0 && !plan.decoder_layers.empty() && plan.decoder_layers.back() == n_ - 1) {
        fln_stage = i;
      }
      layout.stages.push_back(std::move(plan));
    }
    layout.stages[fln_stage].owns_final_layernorm = true;
    return layout;
  }

  const std::string& text_;
  const int p_, n_, d_;
  const MtpRule rule_;
  int v_ = 1;
  std::vector<SourcedStage> stages_;
  std::vector<Item> items_;  // every item in string order
};

}  // namespace

const StagePlan& PipelineLayout::at(int pipeline_rank, int virtual_stage) const {
  const long index = static_cast<long>(virtual_stage) * pipeline_size + pipeline_rank;
  if (pipeline_rank < 0 || pipeline_rank >= pipeline_size || virtual_stage < 0 ||
      virtual_stage >= virtual_size || index >= static_cast<long>(stages.size())) {
    throw InternalError(fmt::format("PipelineLayout::at({}, {}) out of range for P = {}, V = {}",
                                    pipeline_rank, virtual_stage, pipeline_size, virtual_size));
  }
  return stages[static_cast<size_t>(index)];
}

PipelineLayout build_layout(const std::string& text, int pipeline_size, int num_layers,
                            int mtp_num_layers, MtpRule mtp_rule) {
  return Builder(text, pipeline_size, num_layers, mtp_num_layers, mtp_rule).run();
}

}  // namespace mtp::layout
