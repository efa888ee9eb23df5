#include "harness/record/schema.h"

#include <fmt/format.h>

#include <cstdio>

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

const char* group_name(Group g) {
  switch (g) {
    case Group::kBatch:
      return "batch";
    case Group::kLoss:
      return "loss";
    case Group::kGrad:
      return "grad";
    case Group::kWeight:
      return "weight";
    case Group::kModelWeight:
      return "model_weight";
    case Group::kOptimizer:
      return "optimizer";
    case Group::kCopies:
      return "copies";
  }
  return "?";
}

std::optional<Group> parse_group(std::string_view name) {
  for (Group g : kAllGroups) {
    if (name == group_name(g)) return g;
  }
  return std::nullopt;
}

const std::vector<std::string>& record_groups() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (Group g : kAllGroups) v.emplace_back(group_name(g));
    return v;
  }();
  return names;
}

int group_index(const std::string& group) {
  const std::optional<Group> g = parse_group(group);
  return g ? static_cast<int>(*g) : -1;
}

std::vector<std::string> default_compared_groups() {
  return {group_name(Group::kLoss), group_name(Group::kGrad), group_name(Group::kWeight)};
}

std::string copy_name(const std::string& param, int data_parallel_rank, int stage) {
  return fmt::format("{}@dp{}.stage{}", param, data_parallel_rank, stage);
}

std::string copied_param(const std::string& name) {
  const size_t at = name.rfind('@');
  if (at == std::string::npos || at == 0) return "";
  int dp = -1, stage = -1;
  char tail = 0;
  if (std::sscanf(name.c_str() + at, "@dp%d.stage%d%c", &dp, &stage, &tail) != 2 || dp < 0 ||
      stage < 0 || name.substr(at) != fmt::format("@dp{}.stage{}", dp, stage)) {
    return "";
  }
  return name.substr(0, at);
}

std::string mtp_loss_name(int64_t depth) { return fmt::format("mtp_{}", depth); }

std::vector<std::string> loss_names(int64_t mtp_num_layers) {
  std::vector<std::string> names{kLmLossName};
  for (int64_t k = 1; k <= mtp_num_layers; ++k) names.push_back(mtp_loss_name(k));
  names.emplace_back(kTotalLossName);
  return names;
}

uint64_t StepTensor::nbytes() const {
  return static_cast<uint64_t>(numel) * static_cast<uint64_t>(dtype_size(dtype));
}

std::vector<StepTensor> step_tensors(const StepContents& c, bool start) {
  std::vector<StepTensor> out;
  auto params = [&](Group g, DType d) {
    for (const auto& p : c.params) out.push_back({g, p.name, d, p.numel});
  };
  const DType copy_dtype = c.model_dtype ? *c.model_dtype : c.main_dtype;
  if (start) {
    params(Group::kWeight, c.main_dtype);
    if (c.model_dtype) params(Group::kModelWeight, *c.model_dtype);
    for (const auto& p : c.copies) out.push_back({Group::kCopies, p.name, copy_dtype, p.numel});
    return out;
  }
  const int64_t batch = c.batch_samples * c.tokens_per_sample;
  out.push_back({Group::kBatch, kBatchTensorNames[0], DType::kI32, batch});
  out.push_back({Group::kBatch, kBatchTensorNames[1], DType::kI32, batch});
  out.push_back({Group::kBatch, kBatchTensorNames[2], DType::kU8, batch});
  for (const auto& n : loss_names(c.mtp_num_layers))
    out.push_back({Group::kLoss, n, c.main_dtype, 1});
  params(Group::kGrad, c.main_dtype);
  params(Group::kWeight, c.main_dtype);
  if (c.model_dtype) params(Group::kModelWeight, *c.model_dtype);
  if (c.optimizer_state) {
    out.push_back({Group::kOptimizer, kOptimizerStepName, DType::kF64, 1});
    for (const auto& p : c.params) {
      out.push_back({Group::kOptimizer, exp_avg_name(p.name), c.main_dtype, p.numel});
    }
    for (const auto& p : c.params) {
      out.push_back({Group::kOptimizer, exp_avg_sq_name(p.name), c.main_dtype, p.numel});
    }
  }
  for (const auto& p : c.copies) out.push_back({Group::kCopies, p.name, copy_dtype, p.numel});
  return out;
}

std::vector<std::string> step_tensor_names(const StepContents& c, Group g) {
  std::vector<std::string> names;
  for (const auto& t : step_tensors(c, false)) {
    if (t.group == g) names.push_back(t.name);
  }
  return names;
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
