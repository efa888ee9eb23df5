#include <fmt/format.h>

#include "harness/cli/commands.h"
#include "harness/common/error.h"

namespace mtp::cli {

void apply_training_flags(const TrainingFlags& flags, config::TrainingConfig& training) {
  auto ref = [](const std::string& flag, const std::string& text, int64_t default_step) {
    try {
      return config::parse_record_ref(text, default_step);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{} {}", flag, e.what()));
    }
  };
  if (!flags.init_from.empty() && !flags.resume.empty()) {
    throw InputError("--init-from and --resume exclude each other (a resumed run starts from the "
                     "resumed step's weights)");
  }
  if (!flags.init_from.empty()) training.init_from = ref("--init-from", flags.init_from, 0);
  if (!flags.resume.empty()) {
    training.resume_from = ref("--resume", flags.resume, -1);
    training.init_from.reset();
  }
  if (flags.save_optimizer_state) training.save_optimizer_state = true;
}

}  // namespace mtp::cli
