#include "harness/record/schema.h"

#include <fmt/format.h>

#include "harness/record/record.h"

namespace mtp::record {

std::string step_group_name(int step) {
  if (step < 0 || step > kMaxStep) {
    throw RecordError(
        fmt::format("step {} is outside [0, {}] (step groups have 6 digits)", step, kMaxStep));
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

const char* storage_name(Storage s) { return s == Storage::kFull ? "full" : "digest"; }

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::optional<std::vector<int64_t>> parse_shape_attr(const std::string& text) {
  if (text.size() < 2 || text.front() != '[' || text.back() != ']') return std::nullopt;
  std::vector<int64_t> dims;
  const std::string body = text.substr(1, text.size() - 2);
  if (body.empty()) return dims;
  size_t pos = 0;
  while (true) {
    size_t end = body.find(',', pos);
    std::string part = body.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    while (!part.empty() && part.front() == ' ') part.erase(part.begin());
    if (part.empty() || part.size() > 19) return std::nullopt;
    int64_t v = 0;
    for (char c : part) {
      if (c < '0' || c > '9') return std::nullopt;
      v = v * 10 + (c - '0');
      if (v > (int64_t{1} << 62)) return std::nullopt;
    }
    dims.push_back(v);
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return dims;
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
