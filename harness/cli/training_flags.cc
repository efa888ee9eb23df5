#include <fmt/format.h>

#include <set>

#include "harness/cli/commands.h"
#include "harness/common/error.h"
#include "harness/scenario/scenario.h"

namespace mtp::cli {

void apply_training_flags(const TrainingFlags& flags, config::TrainingConfig& training,
                          std::vector<config::VariantSpec>& variants) {
  auto ref = [](const std::string& flag, const std::string& text, int64_t default_step) {
    try {
      return config::parse_record_ref(text, default_step);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{} {}", flag, e.what()));
    }
  };
  if (!flags.init_from.empty() && !flags.resume.empty()) {
    throw InputError(
        "--init-from and --resume exclude each other (a resumed run starts from the "
        "resumed step's weights)");
  }
  if (!flags.init_from.empty()) training.init_from = ref("--init-from", flags.init_from, 0);
  if (!flags.resume.empty()) {
    training.resume_from = ref("--resume", flags.resume, -1);
    training.init_from.reset();
  }
  if (flags.save_optimizer_state) training.save_optimizer_state = true;
  if (flags.record_copies) training.record_copies = true;
  if (!flags.record.empty()) {
    training.record = config::parse_enum<config::RecordMode>(flags.record, "--record");
    for (auto& v : variants) v.record.reset();
  }
  if (!flags.dump_steps.empty()) {
    std::set<int> steps;
    try {
      steps = scenario::parse_step_spec(flags.dump_steps, static_cast<int>(training.steps));
    } catch (const InputError& e) {
      throw InputError(fmt::format("--dump-steps: {}", e.what()));
    }
    if (steps.empty()) {  // "all"
      for (int64_t s = 0; s <= training.steps; ++s) training.dump_steps.insert(s);
    }
    for (int s : steps) {
      if (s > training.steps) {
        throw InputError(fmt::format("--dump-steps {}: step {} is after the last step {}",
                                     flags.dump_steps, s, training.steps));
      }
      training.dump_steps.insert(s);
    }
  }
}

std::string training_flags_text(const TrainingFlags& flags) {
  std::string out;
  if (!flags.init_from.empty()) out += " --init-from " + flags.init_from;
  if (!flags.resume.empty()) out += " --resume " + flags.resume;
  if (flags.save_optimizer_state) out += " --save-optimizer-state";
  if (flags.record_copies) out += " --record-copies";
  if (!flags.record.empty()) out += " --record " + flags.record;
  if (!flags.dump_steps.empty()) out += " --dump-steps " + flags.dump_steps;
  return out;
}

}  // namespace mtp::cli
