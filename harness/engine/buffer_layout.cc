#include "harness/engine/buffer_layout.h"

#include <fmt/format.h>

#include <numeric>
#include <set>

#include "harness/common/error.h"

namespace mtp::engine {
namespace {

int64_t pad_to(int64_t n, int64_t divisor) { return (n + divisor - 1) / divisor * divisor; }

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string without(const std::string& s, const std::string& suffix) {
  return s.substr(0, s.size() - suffix.size());
}

}  // namespace

std::pair<int64_t, int64_t> BufferLayout::shard(int bucket, int dp) const {
  MTP_INTERNAL_ASSERT(bucket >= 0 && bucket < static_cast<int>(buckets.size()),
                      fmt::format("bucket {} of {}", bucket, buckets.size()));
  const BufferBucket& b = buckets[bucket];
  if (!options.distributed_optimizer) return {b.start, b.end};
  const int n = options.data_parallel_size;
  MTP_INTERNAL_ASSERT(dp >= 0 && dp < n, fmt::format("data-parallel rank {} of {}", dp, n));
  const int64_t size = (b.end - b.start) / n;
  return {b.start + dp * size, b.start + (dp + 1) * size};
}

const BufferParamRange& BufferLayout::range(const std::string& name) const {
  for (const auto& p : params) {
    if (p.name == name) return p;
  }
  throw InternalError(fmt::format("parameter {} is not in the buffer", name));
}

bool BufferLayout::contains(const std::string& name) const {
  for (const auto& p : params) {
    if (p.name == name) return true;
  }
  return false;
}

BufferLayout megatron_buffer_layout(const std::vector<BufferParamSpec>& params,
                                    const BufferOptions& options) {
  MTP_INTERNAL_ASSERT(options.data_parallel_size >= 1 && options.bucket_size >= 0,
                      "buffer options: DP >= 1, bucket_size >= 0");
  std::set<std::string> seen;
  for (const auto& p : params) {
    MTP_INTERNAL_ASSERT(seen.insert(p.name).second, fmt::format("{} listed twice", p.name));
  }
  const bool dist = options.distributed_optimizer;
  const int64_t bucket_divisor =
      std::lcm<int64_t>(std::lcm<int64_t>(options.data_parallel_size, 128),
                        options.pad_buckets_for_high_nccl_busbw ? int64_t{1} << 16 : 1);
  auto pad_end = [&](int64_t end) { return dist ? pad_to(end, bucket_divisor) : end; };
  auto pad_start = [&](int64_t start) { return dist ? pad_to(start, 64) : start; };
  auto own_bucket = [&](const BufferParamSpec& p) { return p.shared_embedding && dist; };

  BufferLayout out;
  out.options = options;
  int64_t param_start = 0, bucket_start = 0, param_end = 0;
  std::vector<std::string> bucket_params;
  auto close_bucket = [&](int64_t last_param_end) {
    BufferBucket b;
    b.start = bucket_start;
    b.end = pad_end(last_param_end);
    b.numel_unpadded = last_param_end - bucket_start;
    b.params = bucket_params;
    out.buckets.push_back(b);
    bucket_start = b.end;
    bucket_params.clear();
    return b.end;
  };
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    const BufferParamSpec& p = *it;
    param_start = pad_start(param_start);
    if (own_bucket(p) && !bucket_params.empty()) param_start = close_bucket(param_start);
    param_end = param_start + p.numel;
    out.params.push_back({p.name, param_start, param_end, static_cast<int>(out.buckets.size())});
    bucket_params.push_back(p.name);
    const bool full = options.bucket_size > 0 && param_end - bucket_start >= options.bucket_size;
    param_start = (full || own_bucket(p)) ? close_bucket(param_end) : param_end;
  }
  if (!bucket_params.empty()) close_bucket(param_end);
  out.numel = out.buckets.empty() ? 0 : out.buckets.back().end;
  for (const auto& b : out.buckets) out.numel_unpadded += b.numel_unpadded;
  return out;
}

std::vector<std::string> megatron_registration_order(std::vector<std::string> names) {
  const std::string qkv = "self_attention.linear_qkv.weight";
  const std::string proj = "self_attention.linear_proj.weight";
  for (size_t i = 0; i + 1 < names.size(); ++i) {
    if (ends_with(names[i], qkv) && ends_with(names[i + 1], proj) &&
        without(names[i], qkv) == without(names[i + 1], proj)) {
      std::swap(names[i], names[i + 1]);
      ++i;
    }
  }
  return names;
}

}  // namespace mtp::engine
