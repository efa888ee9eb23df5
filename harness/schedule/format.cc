// File: harness/schedule/format.cc
//
// Compact text of an op list, in the notation of spec §4.5 ("F0.0 (F0.6 B1.0) B0.2").
#include "harness/schedule/schedule.h"

#include <fmt/format.h>

namespace mtp::schedule {
namespace {

std::string op_text(const Op& op) {
  return fmt::format("{}{}.{}", op.type == OpType::kForward ? 'F' : 'B', op.chunk, op.microbatch);
}

}  // namespace

std::string format_ops(const std::vector<Op>& ops) {
  std::string out;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!out.empty()) {
      out += ' ';
    }
    const Op& op = ops[i];
    const bool pair = op.type == OpType::kForward && op.phase == Phase::kSteady &&
                      i + 1 < ops.size() && ops[i + 1].type == OpType::kBackward &&
                      ops[i + 1].phase == Phase::kSteady;
    if (pair) {
      out += fmt::format("({} {})", op_text(op), op_text(ops[i + 1]));
      ++i;
    } else {
      out += op_text(op);
    }
  }
  return out;
}

}  // namespace mtp::schedule
