#include "harness/record/schema.h"

#include <fmt/format.h>

#include "harness/record/record.h"

namespace mtp::record {

std::string step_group_name(int step) {
  if (step < 0 || step > kMaxStep) {
    throw RecordError(fmt::format("step {} is outside [0, {}] (step groups have 6 digits)", step,
                                  kMaxStep));
  }
  return fmt::format("{:06d}", step);
}

std::optional<int> parse_step_group_name(const std::string& name) {
  if (name.size() != 6) {
    return std::nullopt;
  }
  int step = 0;
  for (char c : name) {
    if (c < '0' || c > '9') {
      return std::nullopt;
    }
    step = step * 10 + (c - '0');
  }
  return step;
}

int group_index(const std::string& group) {
  const std::vector<std::string>& groups = record_groups();
  for (size_t i = 0; i < groups.size(); ++i) {
    if (groups[i] == group) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

std::string dataset_name_problem(const std::string& name) {
  if (name.empty()) {
    return "the name is empty";
  }
  if (name == "." || name == "..") {
    return fmt::format("'{}' is not a valid name", name);
  }
  if (name.find('/') != std::string::npos) {
    return fmt::format("name '{}' contains '/'", name);
  }
  if (name.find('\0') != std::string::npos) {
    return "the name contains a NUL character";
  }
  return "";
}

}  // namespace mtp::record
