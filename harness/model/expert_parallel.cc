#include "harness/model/expert_parallel.h"

#include <fmt/format.h>
#include <torch/csrc/autograd/custom_function.h>

#include <utility>

#include "harness/common/error.h"
#include "harness/gpu/side_stream.h"

namespace mtp::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

std::vector<int64_t> flatten(const ExpertCounts& c) {
  std::vector<int64_t> flat;
  for (const auto& row : c.counts) flat.insert(flat.end(), row.begin(), row.end());
  return flat;
}

ExpertCounts unflatten(const std::vector<int64_t>& flat, int members) {
  ExpertCounts c;
  const size_t E = flat.size() / static_cast<size_t>(members);
  for (int m = 0; m < members; ++m) {
    c.counts.emplace_back(flat.begin() + static_cast<std::ptrdiff_t>(m * E),
                          flat.begin() + static_cast<std::ptrdiff_t>((m + 1) * E));
  }
  return c;
}

/// The autograd node of dispatch (`to_experts`) and combine (the other direction): its backward
/// is the opposite move. For a CUDA `device` the node's input and output are CPU copies and the
/// all-to-all runs on `device`'s side stream, so that autograd runs the backward on the calling
/// thread (ContextParallel's AllGatherSequence explains the deadlock this avoids).
struct ExpertAllToAll : public torch::autograd::Function<ExpertAllToAll> {
  static at::Tensor move(ExpertParallel* ep, bool to_experts, const at::Tensor& x,
                         const ExpertCounts& c, const at::Device& device) {
    return gpu::on_side_stream(device, [&] {
      const at::Tensor in = gpu::side_copy(x, device);
      const at::Tensor out = to_experts ? ep->move_to_experts(in, c) : ep->move_to_sources(in, c);
      return gpu::side_copy(out, x.device());
    });
  }
  static at::Device device_of(AutogradContext* ctx) {
    return {static_cast<at::DeviceType>(ctx->saved_data["device_type"].toInt()),
            static_cast<at::DeviceIndex>(ctx->saved_data["device_index"].toInt())};
  }
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t self,
                            bool to_experts, std::vector<int64_t> counts, int64_t device_type,
                            int64_t device_index) {
    auto* ep = reinterpret_cast<ExpertParallel*>(self);  // NOLINT: the rank's own object
    ctx->saved_data["self"] = self;
    ctx->saved_data["to_experts"] = to_experts;
    ctx->saved_data["counts"] = counts;
    ctx->saved_data["device_type"] = device_type;
    ctx->saved_data["device_index"] = device_index;
    return move(ep, to_experts, x, unflatten(counts, ep->size()), device_of(ctx));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto* ep = reinterpret_cast<ExpertParallel*>(ctx->saved_data["self"].toInt());  // NOLINT
    const bool to_experts = ctx->saved_data["to_experts"].toBool();
    const ExpertCounts c = unflatten(ctx->saved_data["counts"].toIntVector(), ep->size());
    return {move(ep, !to_experts, grad_outputs[0].contiguous(), c, device_of(ctx)),
            at::Tensor(),
            at::Tensor(),
            at::Tensor(),
            at::Tensor(),
            at::Tensor()};
  }
};

/// A CUDA tensor's CPU copy inside autograd, both ways in side-stream sections (page-locked host
/// memory; the gradient's device copy marked as used by the compute stream, side_stream.h),
/// which LibTorch's own copy node would not do. A CPU node (its output is on the CPU), so
/// autograd runs its backward on the calling thread.
struct ToHost : public torch::autograd::Function<ToHost> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x) {
    ctx->saved_data["device_type"] = static_cast<int64_t>(x.device().type());
    ctx->saved_data["device_index"] = static_cast<int64_t>(x.device().index());
    return gpu::on_side_stream(x.device(), [&] { return gpu::side_copy(x, at::kCPU); });
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Device device = ExpertAllToAll::device_of(ctx);
    return {gpu::on_side_stream(device, [&] { return gpu::side_copy(grad_outputs[0], device); })};
  }
};

/// The inverse of ToHost: a CPU tensor's copy on a CUDA device inside autograd. Applied inside
/// a side-stream section, so the node belongs to the side stream and autograd runs its backward
/// (the gradient's host copy, a section too) there, after the gradient's producer.
struct ToDevice : public torch::autograd::Function<ToDevice> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t device_type,
                            int64_t device_index) {
    ctx->saved_data["device_type"] = device_type;
    ctx->saved_data["device_index"] = device_index;
    return gpu::side_copy(x, ExpertAllToAll::device_of(ctx));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Device device = ExpertAllToAll::device_of(ctx);
    return {gpu::on_side_stream(device, [&] { return gpu::side_copy(grad_outputs[0], at::kCPU); }),
            at::Tensor(), at::Tensor()};
  }
};

at::Tensor apply(ExpertParallel* ep, bool to_experts, const at::Tensor& x, const ExpertCounts& c) {
  const at::Device device = x.device();
  const at::Tensor input = device.is_cpu() ? x : ToHost::apply(x);
  const at::Tensor out =
      ExpertAllToAll::apply(input, reinterpret_cast<int64_t>(ep), to_experts, flatten(c),  // NOLINT
                            static_cast<int64_t>(device.type()),
                            static_cast<int64_t>(device.has_index() ? device.index() : 0));
  if (device.is_cpu()) return out;
  return gpu::on_side_stream(device, [&] {
    return ToDevice::apply(out, static_cast<int64_t>(device.type()),
                           static_cast<int64_t>(device.index()));
  });
}

}  // namespace

ExpertParallel::ExpertParallel(collectives::Communicator& comm, collectives::Group group,
                               int64_t num_experts)
    : comm_(comm),
      group_(std::move(group)),
      rank_(group_.index_of(comm.rank())),
      num_experts_(num_experts) {
  MTP_INTERNAL_ASSERT(
      num_experts_ > 0 && num_experts_ % size() == 0,
      fmt::format("expert parallel: {} experts over {} ranks", num_experts_, size()));
}

ExpertCounts ExpertParallel::exchange_counts(const std::vector<int64_t>& tokens_per_expert,
                                             at::Device device) {
  MTP_INTERNAL_ASSERT(static_cast<int64_t>(tokens_per_expert.size()) == num_experts_,
                      "exchange_counts: one count per expert");
  ExpertCounts c;
  if (size() == 1) {
    c.counts.push_back(tokens_per_expert);
    return c;
  }
  at::Tensor mine = at::empty({num_experts_}, at::kLong);
  std::copy(tokens_per_expert.begin(), tokens_per_expert.end(), mine.data_ptr<int64_t>());
  const at::Tensor all =
      gpu::on_side_stream(device, [&] {
        return gpu::side_copy(
            comm_.all_gather(group_, gpu::side_copy(mine, device), num_experts_ * size()),
            at::kCPU);
      }).contiguous();
  const int64_t* p = all.data_ptr<int64_t>();
  return unflatten(std::vector<int64_t>(p, p + all.numel()), size());
}

std::vector<int64_t> ExpertParallel::local_rows(const ExpertCounts& c) const {
  std::vector<int64_t> rows(static_cast<size_t>(num_local_experts()), 0);
  for (const auto& src : c.counts) {
    for (int64_t le = 0; le < num_local_experts(); ++le) {
      rows[static_cast<size_t>(le)] += src[static_cast<size_t>(first_local_expert() + le)];
    }
  }
  return rows;
}

at::Tensor ExpertParallel::move_to_experts(const at::Tensor& permuted, const ExpertCounts& c) {
  const int n = size();
  const int64_t El = num_local_experts(), H = permuted.size(-1);
  const auto& mine = c.counts[static_cast<size_t>(rank_)];
  // One block per destination member: the rows for its experts (contiguous in global order).
  std::vector<int64_t> send_rows(static_cast<size_t>(n), 0);
  for (int64_t e = 0; e < num_experts_; ++e) send_rows[owner_of(e)] += mine[e];
  std::vector<at::Tensor> parts = permuted.split_with_sizes(send_rows, 0);
  std::vector<std::vector<int64_t>> shapes;
  for (int src = 0; src < n; ++src) {
    int64_t rows = 0;
    for (int64_t le = 0; le < El; ++le) rows += c.counts[src][first_local_expert() + le];
    shapes.push_back({rows, H});
  }
  const std::vector<at::Tensor> got = n == 1 ? parts : comm_.all_to_all(group_, parts, shapes);
  // Regroup [source][local expert] → [local expert][source].
  std::vector<std::vector<at::Tensor>> by_source;
  for (int src = 0; src < n; ++src) {
    std::vector<int64_t> sizes;
    for (int64_t le = 0; le < El; ++le) sizes.push_back(c.counts[src][first_local_expert() + le]);
    by_source.push_back(got[src].split_with_sizes(sizes, 0));
  }
  std::vector<at::Tensor> out;
  for (int64_t le = 0; le < El; ++le) {
    for (int src = 0; src < n; ++src) out.push_back(by_source[src][le]);
  }
  return at::cat(out, 0);
}

at::Tensor ExpertParallel::move_to_sources(const at::Tensor& expert_out, const ExpertCounts& c) {
  const int n = size();
  const int64_t El = num_local_experts(), H = expert_out.size(-1);
  // Cut [local expert][source] blocks, then regroup by source.
  std::vector<int64_t> sizes;
  for (int64_t le = 0; le < El; ++le) {
    for (int src = 0; src < n; ++src) sizes.push_back(c.counts[src][first_local_expert() + le]);
  }
  const std::vector<at::Tensor> blocks = expert_out.split_with_sizes(sizes, 0);
  std::vector<at::Tensor> parts;
  for (int src = 0; src < n; ++src) {
    std::vector<at::Tensor> of_src;
    for (int64_t le = 0; le < El; ++le) of_src.push_back(blocks[le * n + src]);
    parts.push_back(at::cat(of_src, 0));
  }
  const auto& mine = c.counts[static_cast<size_t>(rank_)];
  std::vector<std::vector<int64_t>> shapes(static_cast<size_t>(n), std::vector<int64_t>{0, H});
  for (int64_t e = 0; e < num_experts_; ++e) shapes[owner_of(e)][0] += mine[e];
  const std::vector<at::Tensor> got = n == 1 ? parts : comm_.all_to_all(group_, parts, shapes);
  return at::cat(got, 0);
}

at::Tensor ExpertParallel::dispatch(const at::Tensor& permuted, const ExpertCounts& c) {
  if (size() == 1) return permuted;
  return apply(this, /*to_experts=*/true, permuted, c);
}

at::Tensor ExpertParallel::combine(const at::Tensor& expert_out, const ExpertCounts& c) {
  if (size() == 1) return expert_out;
  return apply(this, /*to_experts=*/false, expert_out, c);
}

}  // namespace mtp::model
