// File: kernels/ops.cc
//
// The autograd functions of kernels/ops.h: shape/dtype/device checks, layout to the kernels'
// row-major [rows, H] form, dispatch to kernels/cpu or kernels/cuda.
#include "kernels/ops.h"

#include <torch/version.h>

#include <cmath>
#include <vector>

#include <ATen/EmptyTensor.h>
#include <torch/csrc/autograd/custom_function.h>

#include "kernels/cpu/kernels_cpu.h"
#include "kernels/internal/arg_checks.h"
#include "kernels/nonfinite.h"
#include "kernels/numerics.h"

#if defined(MTP_KERNELS_WITH_CUDA)
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/EmptyTensor.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/cuda/kernels_cuda.h"
#endif

namespace mtp::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

template <typename T>
struct Tag {
  using type = T;
};

/// Calls f(Tag<T>{}) for the kernel type of `dtype`; other dtypes fail with c10::Error.
template <typename F>
void dispatch_dtype(at::ScalarType dtype, const char* op, F&& f) {
  switch (dtype) {
    case at::kFloat:
      f(Tag<float>{});
      break;
    case at::kDouble:
      f(Tag<double>{});
      break;
    case at::kBFloat16:
      f(Tag<Bf16>{});
      break;
    default:
      TORCH_CHECK(false, op, ": dtype ", dtype, " is not supported (float32, float64, bfloat16)");
  }
}

/// The accumulation dtype of a kernel input dtype (Acc<T>).
at::ScalarType acc_dtype(at::ScalarType dtype) {
  return dtype == at::kDouble ? at::kDouble : at::kFloat;
}

/// Typed data pointers of contiguous tensors.
template <typename T>
T* data(const at::Tensor& t);
template <>
float* data<float>(const at::Tensor& t) {
  return t.data_ptr<float>();
}
template <>
double* data<double>(const at::Tensor& t) {
  return t.data_ptr<double>();
}
template <>
Bf16* data<Bf16>(const at::Tensor& t) {
  return reinterpret_cast<Bf16*>(t.data_ptr<at::BFloat16>());
}
template <typename T>
const T* data_or_null(const at::Tensor& t) {
  return t.defined() ? data<T>(t) : nullptr;
}

/// A new contiguous tensor for a kernel output or workspace every element of which the kernel
/// writes before anything reads it. Allocated directly (at::detail::empty_cpu / empty_cuda), not
/// through at::empty: with deterministic algorithms on, LibTorch >= 2.1 fills at::empty's memory
/// with NaN first (fill_uninitialized_memory), one more kernel per output that here would only
/// be overwritten, and for the embedding backward twice the bytes written. That every element
/// is written is what the poisoned-memory tests of the kernel batteries check.
at::Tensor uninitialized(at::IntArrayRef sizes, const at::TensorOptions& options) {
#if defined(MTP_KERNELS_WITH_CUDA)
  if (options.device().is_cuda()) return at::Tensor(at::detail::empty_cuda(sizes, options));
#endif
  return at::Tensor(at::detail::empty_cpu(sizes, options));
}

/// True for a CUDA tensor (when the CUDA kernels are built), false for a CPU tensor; anything
/// else fails with c10::Error.
bool use_cuda(const at::Tensor& t, const char* op) {
  if (t.device().is_cpu()) {
    return false;
  }
  TORCH_CHECK(t.is_cuda(), op, ": tensors must be on the CPU or a CUDA device, not ", t.device());
#if !defined(MTP_KERNELS_WITH_CUDA)
  TORCH_CHECK(false, op, ": got a CUDA tensor, but mtp_kernels was built without CUDA kernels");
#endif
  return true;
}

void check_same_device(const at::Tensor& a, const at::Tensor& b, const char* op) {
  TORCH_CHECK(a.device() == b.device(), op, ": tensors on different devices: ", a.device(), " and ",
              b.device());
}

#if defined(MTP_KERNELS_WITH_CUDA)
/// Device workspace of `bytes` bytes from LibTorch's caching allocator on the current stream.
at::Tensor workspace(const at::Tensor& like, size_t bytes) {
  return uninitialized({static_cast<int64_t>(bytes)}, like.options().dtype(at::kByte));
}
cudaStream_t current_stream() { return at::cuda::getCurrentCUDAStream().stream(); }
#endif

// --- embedding ---------------------------------------------------------------------------------

struct EmbeddingLookupFn : public torch::autograd::Function<EmbeddingLookupFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& ids, const at::Tensor& table) {
    constexpr const char* kOp = "mtp::kernels::embedding_lookup";
    TORCH_CHECK(ids.dim() == 2 && ids.scalar_type() == at::kLong, kOp,
                ": ids must be [b, s] int64, got ", ids.sizes(), " ", ids.scalar_type());
    TORCH_CHECK(table.dim() == 2, kOp, ": table must be [V, H], got ", table.sizes());
    check_same_device(ids, table, kOp);
    use_cuda(table, kOp);
    dispatch_dtype(table.scalar_type(), kOp, [](auto) {});
    ctx->save_for_backward({ids});
    ctx->saved_data["vocab"] = table.size(0);
    const int64_t b = ids.size(0);
    const int64_t s = ids.size(1);
    auto rows = at::index_select(table, 0, ids.reshape({-1}));
    return rows.view({b, s, table.size(1)}).transpose(0, 1).contiguous();
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    constexpr const char* kOp = "mtp::kernels::embedding_lookup backward";
    const at::Tensor ids = ctx->get_saved_variables()[0].reshape({-1}).contiguous();
    const int64_t vocab = ctx->saved_data["vocab"].toInt();
    const int64_t hidden = grad_outputs[0].size(2);
    // [s, b, H] → [b, s, H]: row t of the kernel input is flat position t of ids [b, s].
    const at::Tensor grad = grad_outputs[0].transpose(0, 1).contiguous().view({-1, hidden});
    const int64_t tokens = grad.size(0);
    at::Tensor grad_table = uninitialized({vocab, hidden}, grad.options());
    const bool cuda = use_cuda(grad, kOp);
    dispatch_dtype(grad.scalar_type(), kOp, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if (!cuda) {
        cpu::embedding_backward<T>(data<T>(grad), ids.data_ptr<int64_t>(), tokens, hidden, vocab,
                                   data<T>(grad_table));
        return;
      }
#if defined(MTP_KERNELS_WITH_CUDA)
      const c10::cuda::CUDAGuard guard(grad.device());
      const size_t bytes = cuda::embedding_backward_workspace_bytes(tokens, vocab);
      at::Tensor ws = workspace(grad, bytes);
      cuda::embedding_backward<T>(data<T>(grad), ids.data_ptr<int64_t>(), tokens, hidden, vocab,
                                  data<T>(grad_table), ws.data_ptr(), bytes, current_stream());
#endif
    });
    return {at::Tensor(), grad_table};
  }
};

// --- RMSNorm -----------------------------------------------------------------------------------

struct RmsNormFn : public torch::autograd::Function<RmsNormFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            double eps) {
    constexpr const char* kOp = "mtp::kernels::rms_norm";
    TORCH_CHECK(weight.dim() == 1 && x.dim() >= 1 && x.size(-1) == weight.size(0), kOp,
                ": x must be [..., H] and weight [H], got ", x.sizes(), " and ", weight.sizes());
    TORCH_CHECK(x.scalar_type() == weight.scalar_type(), kOp, ": x is ", x.scalar_type(),
                " but weight is ", weight.scalar_type());
    check_same_device(x, weight, kOp);
    const at::Tensor xc = x.contiguous();
    const at::Tensor wc = weight.contiguous();
    const int64_t hidden = weight.size(0);
    const int64_t rows = hidden == 0 ? 0 : xc.numel() / hidden;
    at::Tensor y = uninitialized(xc.sizes(), xc.options());
    at::Tensor rstd = uninitialized({rows}, xc.options().dtype(acc_dtype(xc.scalar_type())));
    const bool cuda = use_cuda(xc, kOp);
    dispatch_dtype(xc.scalar_type(), kOp, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if (!cuda) {
        cpu::rms_norm_forward<T>(data<T>(xc), data<T>(wc), rows, hidden, eps, data<T>(y),
                                 data<Acc<T>>(rstd));
        return;
      }
#if defined(MTP_KERNELS_WITH_CUDA)
      const c10::cuda::CUDAGuard guard(xc.device());
      cuda::rms_norm_forward<T>(data<T>(xc), data<T>(wc), rows, hidden, eps, data<T>(y),
                                data<Acc<T>>(rstd), current_stream());
#endif
    });
    ctx->save_for_backward({xc, wc, rstd});
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    constexpr const char* kOp = "mtp::kernels::rms_norm backward";
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& weight = saved[1];
    const at::Tensor& rstd = saved[2];
    const at::Tensor dy = grad_outputs[0].contiguous();
    const int64_t hidden = weight.size(0);
    const int64_t rows = rstd.size(0);
    at::Tensor dx = uninitialized(x.sizes(), x.options());
    at::Tensor dweight = uninitialized(weight.sizes(), weight.options());
    const bool cuda = use_cuda(x, kOp);
    dispatch_dtype(x.scalar_type(), kOp, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if (!cuda) {
        cpu::rms_norm_backward<T>(data<T>(dy), data<T>(x), data<T>(weight), data<Acc<T>>(rstd),
                                  rows, hidden, data<T>(dx), data<T>(dweight));
        return;
      }
#if defined(MTP_KERNELS_WITH_CUDA)
      const c10::cuda::CUDAGuard guard(x.device());
      const size_t bytes =
          cuda::rms_norm_backward_workspace_bytes(rows, hidden, sizeof(Acc<T>) == 8);
      at::Tensor ws = workspace(x, bytes);
      cuda::rms_norm_backward<T>(data<T>(dy), data<T>(x), data<T>(weight), data<Acc<T>>(rstd), rows,
                                 hidden, data<T>(dx), data<T>(dweight), ws.data_ptr(), bytes,
                                 current_stream());
#endif
    });
    return {dx, dweight, at::Tensor()};
  }
};

// --- cross entropy -----------------------------------------------------------------------------

/// Checks logits [s, b, V] against labels [b, s] and returns the labels as [s, b] contiguous, so
/// that kernel row n = i·b + j is (sequence i, batch j) for both.
at::Tensor labels_sb(const at::Tensor& logits, const at::Tensor& labels, const char* op) {
  TORCH_CHECK(logits.dim() == 3, op, ": logits must be [s, b, V], got ", logits.sizes());
  TORCH_CHECK(labels.dim() == 2 && labels.scalar_type() == at::kLong &&
                  labels.size(0) == logits.size(1) && labels.size(1) == logits.size(0),
              op, ": labels must be [b, s] int64 for logits ", logits.sizes(), ", got ",
              labels.sizes(), " ", labels.scalar_type());
  check_same_device(logits, labels, op);
  return labels.t().contiguous();
}

/// Forward of both cross-entropy functions; `mask_sb` [s, b] in the loss dtype, or undefined.
at::Tensor cross_entropy_forward(AutogradContext* ctx, const at::Tensor& logits,
                                 const at::Tensor& labels, const at::Tensor& mask_sb,
                                 const char* op) {
  const at::Tensor lab = labels_sb(logits, labels, op);
  const at::Tensor lg = logits.contiguous();
  const int64_t s = lg.size(0);
  const int64_t b = lg.size(1);
  const int64_t vocab = lg.size(2);
  const int64_t rows = s * b;
  TORCH_CHECK(vocab > 0 || rows == 0, op, ": V = 0");
  const auto acc_opts = lg.options().dtype(acc_dtype(lg.scalar_type()));
  at::Tensor loss = uninitialized({s, b}, acc_opts);
  at::Tensor row_max = uninitialized({rows}, acc_opts);
  at::Tensor row_sum = uninitialized({rows}, acc_opts);
  const bool cuda = use_cuda(lg, op);
  dispatch_dtype(lg.scalar_type(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = Acc<T>;
    if (!cuda) {
      cpu::cross_entropy_forward<T>(data<T>(lg), lab.data_ptr<int64_t>(), data_or_null<A>(mask_sb),
                                    rows, vocab, data<A>(loss), data<A>(row_max), data<A>(row_sum));
      return;
    }
#if defined(MTP_KERNELS_WITH_CUDA)
    const c10::cuda::CUDAGuard guard(lg.device());
    cuda::cross_entropy_forward<T>(data<T>(lg), lab.data_ptr<int64_t>(), data_or_null<A>(mask_sb),
                                   rows, vocab, data<A>(loss), data<A>(row_max), data<A>(row_sum),
                                   current_stream());
#endif
  });
  if (mask_sb.defined()) {
    ctx->save_for_backward({lg, lab, row_max, row_sum, mask_sb});
  } else {
    ctx->save_for_backward({lg, lab, row_max, row_sum});
  }
  return loss.t();
}

/// Backward of both cross-entropy functions: d loss [b, s] → d logits [s, b, V].
at::Tensor cross_entropy_backward(AutogradContext* ctx, const at::Tensor& grad_loss,
                                  const char* op) {
  const auto saved = ctx->get_saved_variables();
  const at::Tensor& lg = saved[0];
  const at::Tensor& lab = saved[1];
  const at::Tensor& row_max = saved[2];
  const at::Tensor& row_sum = saved[3];
  const at::Tensor mask_sb = saved.size() > 4 ? saved[4] : at::Tensor();
  const int64_t vocab = lg.size(2);
  const int64_t rows = lg.size(0) * lg.size(1);
  const at::Tensor g = grad_loss.t().to(row_max.scalar_type()).contiguous();
  at::Tensor grad_logits = uninitialized(lg.sizes(), lg.options());
  const bool cuda = use_cuda(lg, op);
  dispatch_dtype(lg.scalar_type(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = Acc<T>;
    if (!cuda) {
      cpu::cross_entropy_backward<T>(data<T>(lg), lab.data_ptr<int64_t>(), data_or_null<A>(mask_sb),
                                     data<A>(g), data<A>(row_max), data<A>(row_sum), rows, vocab,
                                     data<T>(grad_logits));
      return;
    }
#if defined(MTP_KERNELS_WITH_CUDA)
    const c10::cuda::CUDAGuard guard(lg.device());
    cuda::cross_entropy_backward<T>(data<T>(lg), lab.data_ptr<int64_t>(), data_or_null<A>(mask_sb),
                                    data<A>(g), data<A>(row_max), data<A>(row_sum), rows, vocab,
                                    data<T>(grad_logits), current_stream());
#endif
  });
  return grad_logits;
}

struct CrossEntropyFn : public torch::autograd::Function<CrossEntropyFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits,
                            const at::Tensor& labels) {
    return cross_entropy_forward(ctx, logits, labels, at::Tensor(), "mtp::kernels::cross_entropy");
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    return {cross_entropy_backward(ctx, grad_outputs[0], "mtp::kernels::cross_entropy backward"),
            at::Tensor()};
  }
};

struct MaskedCrossEntropyFn : public torch::autograd::Function<MaskedCrossEntropyFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits,
                            const at::Tensor& labels, const at::Tensor& mask) {
    constexpr const char* kOp = "mtp::kernels::masked_cross_entropy";
    TORCH_CHECK(mask.sizes() == labels.sizes() && at::isFloatingType(mask.scalar_type()), kOp,
                ": mask must be floating with the shape of labels ", labels.sizes(), ", got ",
                mask.sizes(), " ", mask.scalar_type());
    check_same_device(logits, mask, kOp);
    const at::Tensor mask_sb = mask.t().to(acc_dtype(logits.scalar_type())).contiguous();
    return cross_entropy_forward(ctx, logits, labels, mask_sb, kOp);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    return {
        cross_entropy_backward(ctx, grad_outputs[0], "mtp::kernels::masked_cross_entropy backward"),
        at::Tensor(), at::Tensor()};
  }
};

// --- RoPE --------------------------------------------------------------------------------------

/// RopeDims of a [S, B, H, D] tensor whose last dimension is dense.
RopeDims rope_dims(const at::Tensor& t) {
  RopeDims d;
  d.s = t.size(0);
  d.b = t.size(1);
  d.heads = t.size(2);
  d.dim = t.size(3);
  d.stride_s = t.stride(0);
  d.stride_b = t.stride(1);
  d.stride_h = t.stride(2);
  return d;
}

/// `t` as the kernels read it: any strides with a dense last dimension, else a contiguous copy.
at::Tensor dense_last_dim(const at::Tensor& t) {
  return t.size(3) <= 1 || t.stride(3) == 1 ? t : t.contiguous();
}

/// Runs the forward (backward = false) or backward RoPE kernel on `in` into a new contiguous
/// [S, B, H, D] tensor.
at::Tensor run_rope(const at::Tensor& in, const at::Tensor& cos, const at::Tensor& sin,
                    bool backward, const char* op) {
  const at::Tensor src = dense_last_dim(in);
  at::Tensor out = uninitialized(src.sizes(), src.options());  // contiguous
  const RopeDims dims = rope_dims(src);
  const bool cuda = use_cuda(src, op);
  dispatch_dtype(src.scalar_type(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in_p = data<T>(src);
    const T* cos_p = data<T>(cos);
    const T* sin_p = data<T>(sin);
    T* out_p = data<T>(out);
    if (!cuda) {
      if (backward) {
        cpu::rope_backward<T>(in_p, dims, cos_p, sin_p, out_p);
      } else {
        cpu::rope_forward<T>(in_p, dims, cos_p, sin_p, out_p);
      }
      return;
    }
#if defined(MTP_KERNELS_WITH_CUDA)
    const c10::cuda::CUDAGuard guard(src.device());
    if (backward) {
      cuda::rope_backward<T>(in_p, dims, cos_p, sin_p, out_p, current_stream());
    } else {
      cuda::rope_forward<T>(in_p, dims, cos_p, sin_p, out_p, current_stream());
    }
#endif
  });
  return out;
}

struct RopeFn : public torch::autograd::Function<RopeFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& cos,
                            const at::Tensor& sin) {
    constexpr const char* kOp = "mtp::kernels::rope";
    TORCH_CHECK(x.dim() == 4 && x.size(3) % 2 == 0, kOp,
                ": x must be [s, b, heads, hn] with hn even, got ", x.sizes());
    TORCH_CHECK(cos.dim() == 2 && cos.size(0) == x.size(0) && cos.size(1) == x.size(3) &&
                    sin.sizes() == cos.sizes(),
                kOp, ": cos and sin must be [s, hn] = [", x.size(0), ", ", x.size(3), "], got ",
                cos.sizes(), " and ", sin.sizes());
    TORCH_CHECK(cos.scalar_type() == x.scalar_type() && sin.scalar_type() == x.scalar_type(), kOp,
                ": x is ", x.scalar_type(), " but cos/sin are ", cos.scalar_type(), "/",
                sin.scalar_type());
    check_same_device(x, cos, kOp);
    check_same_device(x, sin, kOp);
    const at::Tensor cc = cos.contiguous(), sc = sin.contiguous();
    ctx->save_for_backward({cc, sc});
    return run_rope(x, cc, sc, /*backward=*/false, kOp);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    return {run_rope(grad_outputs[0], saved[0], saved[1], /*backward=*/true,
                     "mtp::kernels::rope backward"),
            at::Tensor(), at::Tensor()};
  }
};

// --- SwiGLU ------------------------------------------------------------------------------------

/// LibTorch's composite, the CPU path (the torch kernel set runs the same two ops in
/// harness/model/layers.cc swiglu).
at::Tensor swiglu_composite(const at::Tensor& gate_up) {
  const auto halves = gate_up.chunk(2, -1);
  return at::silu(halves[0]) * halves[1];
}

/// Runs the forward (dy undefined) or backward SwiGLU kernel of contiguous CUDA `gate_up`.
at::Tensor run_swiglu(const at::Tensor& gate_up, const at::Tensor& dy, const char* op) {
  const int64_t f = gate_up.size(-1) / 2;
  const int64_t rows = f == 0 ? 0 : gate_up.numel() / (2 * f);
  std::vector<int64_t> sizes = gate_up.sizes().vec();
  if (!dy.defined()) sizes.back() = f;
  at::Tensor out = uninitialized(sizes, gate_up.options());
#if defined(MTP_KERNELS_WITH_CUDA)
  const at::Tensor g = dy.defined() ? dy.contiguous() : dy;
  const c10::cuda::CUDAGuard guard(gate_up.device());
  dispatch_dtype(gate_up.scalar_type(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (g.defined()) {
      cuda::swiglu_backward<T>(data<T>(g), data<T>(gate_up), rows, f, data<T>(out),
                               current_stream());
    } else {
      cuda::swiglu_forward<T>(data<T>(gate_up), rows, f, data<T>(out), current_stream());
    }
  });
#else
  (void)rows;
  TORCH_CHECK(false, op, ": no CUDA kernels in this build");
#endif
  return out;
}

struct SwigluFn : public torch::autograd::Function<SwigluFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& gate_up) {
    const at::Tensor x = gate_up.contiguous();
    ctx->save_for_backward({x});
    return run_swiglu(x, at::Tensor(), "mtp::kernels::swiglu");
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    return {run_swiglu(saved[0], grad_outputs[0], "mtp::kernels::swiglu backward")};
  }
};

// --- causal attention --------------------------------------------------------------------------

/// AttentionDims of [b, heads, s, hn] q.
AttentionDims attention_dims(const at::Tensor& q) {
  AttentionDims d;
  d.n = q.size(0) * q.size(1);
  d.s = q.size(2);
  d.hn = q.size(3);
  return d;
}

/// Acc<T> scratch of `sizes` on q's device.
at::Tensor acc_scratch(const at::Tensor& q, at::IntArrayRef sizes) {
  return uninitialized(sizes, q.options().dtype(acc_dtype(q.scalar_type())));
}

struct CausalAttentionFn : public torch::autograd::Function<CausalAttentionFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q_in, const at::Tensor& k_in,
                            const at::Tensor& v_in, double scale) {
    constexpr const char* kOp = "mtp::kernels::causal_attention";
    const at::Tensor q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous();
    const AttentionDims dims = attention_dims(q);
    at::Tensor o = uninitialized(q.sizes(), q.options());
    at::Tensor lse = acc_scratch(q, {q.size(0), q.size(1), dims.s});
    const at::Tensor probs = acc_scratch(q, {dims.n, dims.s, dims.s});
    const bool cuda = use_cuda(q, kOp);
    dispatch_dtype(q.scalar_type(), kOp, [&](auto tag) {
      using T = typename decltype(tag)::type;
      AttentionForwardBuffers<T> b;
      b.q = data<T>(q), b.k = data<T>(k), b.v = data<T>(v), b.o = data<T>(o);
      b.lse = data<Acc<T>>(lse), b.probs = data<Acc<T>>(probs);
      if (!cuda) return cpu::attention_forward<T>(b, dims, scale);
#if defined(MTP_KERNELS_WITH_CUDA)
      const c10::cuda::CUDAGuard guard(q.device());
      cuda::attention_forward<T>(b, dims, scale, current_stream());
#endif
    });
    ctx->save_for_backward({q, k, v, lse});  // not o: the backward's D is rowsum(P ∘ dP)
    ctx->saved_data["scale"] = scale;
    return o;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    constexpr const char* kOp = "mtp::kernels::causal_attention backward";
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &lse = saved[3];
    const at::Tensor d_o = grad_outputs[0].contiguous();
    const double scale = ctx->saved_data["scale"].toDouble();
    const AttentionDims dims = attention_dims(q);
    at::Tensor dq = uninitialized(q.sizes(), q.options());
    at::Tensor dk = uninitialized(q.sizes(), q.options());
    at::Tensor dv = uninitialized(q.sizes(), q.options());
    const at::Tensor probs = acc_scratch(q, {dims.n, dims.s, dims.s});
    const at::Tensor ds = acc_scratch(q, {dims.n, dims.s, dims.s});
    const at::Tensor delta = acc_scratch(q, {dims.n, dims.s});
    const bool cuda = use_cuda(q, kOp);
    dispatch_dtype(q.scalar_type(), kOp, [&](auto tag) {
      using T = typename decltype(tag)::type;
      AttentionBackwardBuffers<T> b;
      b.q = data<T>(q), b.k = data<T>(k), b.v = data<T>(v), b.d_o = data<T>(d_o);
      b.lse = data<Acc<T>>(lse);
      b.dq = data<T>(dq), b.dk = data<T>(dk), b.dv = data<T>(dv);
      b.probs = data<Acc<T>>(probs), b.ds = data<Acc<T>>(ds), b.delta = data<Acc<T>>(delta);
      if (!cuda) return cpu::attention_backward<T>(b, dims, scale);
#if defined(MTP_KERNELS_WITH_CUDA)
      const c10::cuda::CUDAGuard guard(q.device());
      cuda::attention_backward<T>(b, dims, scale, current_stream());
#endif
    });
    return {dq, dk, dv, at::Tensor()};
  }
};

}  // namespace

at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  return RopeFn::apply(x, cos, sin);
}

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            double scale) {
  constexpr const char* kOp = "mtp::kernels::causal_attention";
  TORCH_CHECK(q.dim() == 4 && k.sizes() == q.sizes() && v.sizes() == q.sizes(), kOp,
              ": q, k, v must be [b, heads, s, hn] of one shape, got ", q.sizes(), ", ", k.sizes(),
              ", ", v.sizes());
  TORCH_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(), kOp,
              ": q, k, v must have one dtype, got ", q.scalar_type(), ", ", k.scalar_type(), ", ",
              v.scalar_type());
  check_same_device(q, k, kOp);
  check_same_device(q, v, kOp);
  TORCH_CHECK(std::isfinite(scale), kOp, ": scale must be finite, got ", scale);
  dispatch_dtype(q.scalar_type(), kOp, [](auto) {});
  use_cuda(q, kOp);
  return CausalAttentionFn::apply(q, k, v, scale);
}

at::Tensor swiglu(const at::Tensor& gate_up) {
  constexpr const char* kOp = "mtp::kernels::swiglu";
  TORCH_CHECK(gate_up.dim() >= 1 && gate_up.size(-1) > 0 && gate_up.size(-1) % 2 == 0, kOp,
              ": gate_up must be [..., 2F] with F > 0 (gate then up), got ", gate_up.sizes());
  dispatch_dtype(gate_up.scalar_type(), kOp, [](auto) {});
  if (!use_cuda(gate_up, kOp)) return swiglu_composite(gate_up);
  return SwigluFn::apply(gate_up);
}

at::Tensor embedding_lookup(const at::Tensor& ids, const at::Tensor& table) {
  return EmbeddingLookupFn::apply(ids, table);
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  return RmsNormFn::apply(x, weight, eps);
}

at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& labels) {
  return CrossEntropyFn::apply(logits, labels);
}

at::Tensor masked_cross_entropy(const at::Tensor& logits, const at::Tensor& labels,
                                const at::Tensor& mask) {
  return MaskedCrossEntropyFn::apply(logits, labels, mask);
}

void accumulate_main_grad(at::Tensor& main_grad, const at::Tensor& grad) {
  constexpr const char* kOp = "mtp::kernels::accumulate_main_grad";
  TORCH_CHECK(main_grad.sizes() == grad.sizes(), kOp, ": main grad ", main_grad.sizes(),
              " and grad ", grad.sizes(), " differ in shape");
  check_same_device(main_grad, grad, kOp);
#if defined(MTP_KERNELS_WITH_CUDA)
  if (main_grad.is_cuda() && main_grad.scalar_type() == at::kFloat &&
      grad.scalar_type() == at::kBFloat16 && main_grad.is_contiguous() && grad.is_contiguous()) {
    const c10::cuda::CUDAGuard guard(main_grad.device());
    cuda::accumulate_bf16_into_fp32(main_grad.data_ptr<float>(), data<Bf16>(grad),
                                    main_grad.numel(), current_stream());
    return;
  }
#endif
  main_grad.add_(grad);
}

namespace {

/// The exponent field of t's dtype (kernels/nonfinite.h), 0 for integer and bool dtypes.
uint64_t exponent_bits_of(at::ScalarType dtype, const char* op) {
  switch (dtype) {
    case at::kHalf:
      return kExponentBitsF16;
    case at::kBFloat16:
      return kExponentBitsBf16;
    case at::kFloat:
      return kExponentBitsF32;
    case at::kDouble:
      return kExponentBitsF64;
    default:
      TORCH_CHECK(!at::isComplexType(dtype) && !at::isFloatingType(dtype), op, ": dtype ", dtype,
                  " has no non-finite rule here");
      return 0;
  }
}

/// Checks block_elements for `element_size`-byte elements (blocks of at most 512 KiB).
void check_block_elements(int64_t block_elements, int64_t element_size, const char* op) {
  TORCH_CHECK(block_elements > 0 &&
                  static_cast<uint64_t>(block_elements) * static_cast<uint64_t>(element_size) <=
                      internal::kMaxDigestBlockBytes,
              op, ": block_elements = ", block_elements, " of ", element_size,
              "-byte elements is outside [1, ", internal::kMaxDigestBlockBytes, " bytes]");
}

/// Blocks of n elements.
int64_t blocks_of(int64_t n, int64_t block_elements) {
  return (n + block_elements - 1) / block_elements;
}

}  // namespace

at::Tensor block_digests(const at::Tensor& t, int64_t block_elements) {
  constexpr const char* kOp = "mtp::kernels::block_digests";
  const int64_t element = static_cast<int64_t>(t.element_size());
  check_block_elements(block_elements, element, kOp);
  const bool cuda = use_cuda(t, kOp);
  const at::Tensor c = t.contiguous();
  at::Tensor out =
      uninitialized({blocks_of(c.numel(), block_elements), 2}, c.options().dtype(at::kLong));
  const uint64_t nbytes = static_cast<uint64_t>(c.numel()) * static_cast<uint64_t>(element);
  const uint64_t block_bytes = static_cast<uint64_t>(block_elements * element);
  auto* digests = reinterpret_cast<uint64_t*>(out.data_ptr<int64_t>());
  if (!cuda) {
    cpu::block_digests(c.data_ptr(), nbytes, block_bytes, digests);
    return out;
  }
#if defined(MTP_KERNELS_WITH_CUDA)
  const c10::cuda::CUDAGuard guard(c.device());
  cuda::block_digests(c.data_ptr(), nbytes, block_bytes, digests, current_stream());
#endif
  return out;
}

at::Tensor block_summaries(const at::Tensor& t, int64_t block_elements) {
  return block_summaries(at::TensorList(&t, 1), block_elements).rows;
}

BlockSummaryBatch block_summaries(at::TensorList ts, int64_t block_elements) {
  constexpr const char* kOp = "mtp::kernels::block_summaries";
  TORCH_CHECK(!ts.empty(), kOp, ": no tensors");
  BlockSummaryBatch batch;
  batch.first_row.push_back(0);
  std::vector<at::Tensor> contiguous;  // alive until the kernels are issued
  contiguous.reserve(ts.size());
  for (const at::Tensor& t : ts) {
    check_same_device(ts.front(), t, kOp);
    check_block_elements(block_elements, static_cast<int64_t>(t.element_size()), kOp);
    (void)exponent_bits_of(t.scalar_type(), kOp);
    contiguous.push_back(t.contiguous());
    batch.first_row.push_back(batch.first_row.back() +
                              blocks_of(contiguous.back().numel(), block_elements));
  }
  const bool cuda = use_cuda(ts.front(), kOp);
  constexpr int64_t kWidth = 5;
  batch.rows =
      uninitialized({batch.first_row.back(), kWidth}, ts.front().options().dtype(at::kLong));
  int64_t* values = batch.rows.data_ptr<int64_t>();
  if (!cuda) {
    for (size_t i = 0; i < contiguous.size(); ++i) {
      const at::Tensor& c = contiguous[i];
      const int64_t element = static_cast<int64_t>(c.element_size());
      int64_t* rows = values + kWidth * batch.first_row[i];
      cpu::block_digests(c.data_ptr(), static_cast<uint64_t>(c.numel() * element),
                         static_cast<uint64_t>(block_elements * element),
                         reinterpret_cast<uint64_t*>(rows), kWidth);
      cpu::nonfinite_blocks(c.data_ptr(), c.numel(), static_cast<int>(element),
                            exponent_bits_of(c.scalar_type(), kOp), block_elements, rows + 2,
                            kWidth);
    }
    return batch;
  }
#if defined(MTP_KERNELS_WITH_CUDA)
  const c10::cuda::CUDAGuard guard(ts.front().device());
  std::vector<cuda::BlockSpan> spans;
  spans.reserve(contiguous.size());
  for (const at::Tensor& c : contiguous) {
    spans.push_back({c.data_ptr(), c.numel(), static_cast<int>(c.element_size()),
                     exponent_bits_of(c.scalar_type(), kOp)});
  }
  cuda::block_summaries(spans.data(), static_cast<int>(spans.size()), block_elements, values,
                        current_stream());
#endif
  return batch;
}

bool flash_attention_available() {
#if TORCH_VERSION_MAJOR >= 2
  return at::hasCUDA();
#else
  return false;
#endif
}

at::Tensor flash_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  double scale) {
  constexpr const char* kOp = "mtp::kernels::flash_causal_attention";
  TORCH_CHECK(q.dim() == 4 && k.sizes() == q.sizes() && v.sizes() == q.sizes(), kOp,
              ": q, k, v must be [b, heads, s, hn] of one shape, got ", q.sizes(), ", ", k.sizes(),
              ", ", v.sizes());
  TORCH_CHECK(q.is_cuda() && k.device() == q.device() && v.device() == q.device(), kOp,
              ": needs CUDA tensors on one device, got ", q.device());
  TORCH_CHECK((q.scalar_type() == at::kBFloat16 || q.scalar_type() == at::kHalf) &&
                  k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(),
              kOp, ": needs bf16 or fp16, got ", q.scalar_type());
#if TORCH_VERSION_MAJOR >= 2
  auto one = [scale](const at::Tensor& qi, const at::Tensor& ki, const at::Tensor& vi) {
    return std::get<0>(at::_scaled_dot_product_flash_attention(qi, ki, vi, /*dropout_p=*/0.0,
                                                               /*is_causal=*/true,
                                                               /*return_debug_mask=*/false, scale));
  };
  if (q.size(0) == 1) return one(q, k, v);
  // One call per sample. LibTorch's deterministic flash backward splits dq's accumulation over
  // ceil(SMs / (b·heads)) partial buffers, so a batched call's dq depends on b (measured on an
  // H200: 103–133 of 2,097,152 elements one bf16 ulp apart). Per sample the split count is the
  // same whatever the batch. split's backward concatenates the samples' grads and cat's
  // backward narrows the output grad: copies only, no sums.
  const std::vector<at::Tensor> qs = q.split(1, 0), ks = k.split(1, 0), vs = v.split(1, 0);
  std::vector<at::Tensor> outs;
  outs.reserve(qs.size());
  for (size_t i = 0; i < qs.size(); ++i) outs.push_back(one(qs[i], ks[i], vs[i]));
  return at::cat(outs, 0);
#else
  TORCH_CHECK(false, kOp, ": needs LibTorch >= 2.0 (this is ", TORCH_VERSION, ")");
#endif
}

bool cuda_kernels_built() {
#if defined(MTP_KERNELS_WITH_CUDA)
  return true;
#else
  return false;
#endif
}

}  // namespace mtp::kernels
