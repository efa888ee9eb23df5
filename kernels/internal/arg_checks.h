// File: kernels/internal/arg_checks.h
//
// Host-side argument checks shared by the CPU and CUDA entry points: each throws
// std::invalid_argument naming the function and the argument. Private to kernels/.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace mtp::kernels::internal {

/// require_size: throws std::invalid_argument unless 0 ≤ value ≤ max.
inline void require_size(const char* fn, const char* name, int64_t value, int64_t max = INT64_MAX) {
  if (value < 0 || value > max) {
    throw std::invalid_argument(std::string(fn) + ": " + name + " = " + std::to_string(value) +
                                " is outside [0, " + std::to_string(max) + "]");
  }
}

/// require_ptr: throws std::invalid_argument when `needed` and `p` is null.
inline void require_ptr(const char* fn, const char* name, const void* p, bool needed) {
  if (needed && p == nullptr) {
    throw std::invalid_argument(std::string(fn) + ": " + name + " is null");
  }
}

/// index_error: the std::out_of_range thrown for an id or label outside [0, limit).
inline std::out_of_range index_error(const char* fn, const char* what, int64_t position,
                                     int64_t value, int64_t limit) {
  return std::out_of_range(std::string(fn) + ": " + what + "[" + std::to_string(position) +
                           "] = " + std::to_string(value) + " is outside [0, " +
                           std::to_string(limit) + ")");
}

// The argument contract of each kernel, checked the same way by its CPU and CUDA entry points
// (`fn` names the entry point in messages). Each returns whether there is any work.

/// embedding_backward: sizes in [0, max_index] (num_tokens, vocab), hidden ≥ 0; pointers needed
/// for non-empty operands.
inline bool check_embedding_backward(const char* fn, const void* grad_out, const void* ids,
                                     const void* grad_table, int64_t num_tokens, int64_t hidden,
                                     int64_t vocab, int64_t max_index = INT64_MAX) {
  require_size(fn, "num_tokens", num_tokens, max_index);
  require_size(fn, "hidden", hidden);
  require_size(fn, "vocab", vocab, max_index);
  require_ptr(fn, "grad_out", grad_out, num_tokens > 0 && hidden > 0);
  require_ptr(fn, "ids", ids, num_tokens > 0);
  require_ptr(fn, "grad_table", grad_table, vocab > 0 && hidden > 0);
  return vocab > 0 && hidden > 0;
}

/// rms_norm_forward: x, weight and y needed when rows·hidden > 0.
inline bool check_rms_norm_forward(const char* fn, const void* x, const void* weight, const void* y,
                                   int64_t rows, int64_t hidden) {
  require_size(fn, "rows", rows);
  require_size(fn, "hidden", hidden);
  const bool any = rows > 0 && hidden > 0;
  require_ptr(fn, "x", x, any);
  require_ptr(fn, "weight", weight, any);
  require_ptr(fn, "y", y, any);
  return any;
}

/// rms_norm_backward: dy, x and rstd needed when rows·hidden > 0; weight only when dx is asked.
inline bool check_rms_norm_backward(const char* fn, const void* dy, const void* x,
                                    const void* weight, const void* rstd, const void* dx,
                                    int64_t rows, int64_t hidden) {
  require_size(fn, "rows", rows);
  require_size(fn, "hidden", hidden);
  const bool any = rows > 0 && hidden > 0;
  require_ptr(fn, "dy", dy, any);
  require_ptr(fn, "x", x, any);
  require_ptr(fn, "weight", weight, any && dx != nullptr);
  require_ptr(fn, "rstd", rstd, any);
  return any;
}

/// cross_entropy_forward: vocab > 0 when rows > 0; logits, labels and loss needed when rows > 0.
inline bool check_cross_entropy_forward(const char* fn, const void* logits, const void* labels,
                                        const void* loss, int64_t rows, int64_t vocab) {
  require_size(fn, "rows", rows);
  require_size(fn, "vocab", vocab);
  if (rows > 0 && vocab == 0) {
    throw std::invalid_argument(std::string(fn) + ": vocab = 0 with rows > 0");
  }
  require_ptr(fn, "logits", logits, rows > 0);
  require_ptr(fn, "labels", labels, rows > 0);
  require_ptr(fn, "loss", loss, rows > 0);
  return rows > 0;
}

/// cross_entropy_backward: every operand needed when rows·vocab > 0.
inline bool check_cross_entropy_backward(const char* fn, const void* logits, const void* labels,
                                         const void* grad_loss, const void* row_max,
                                         const void* row_sum, const void* grad_logits, int64_t rows,
                                         int64_t vocab) {
  require_size(fn, "rows", rows);
  require_size(fn, "vocab", vocab);
  const bool any = rows > 0 && vocab > 0;
  require_ptr(fn, "logits", logits, any);
  require_ptr(fn, "labels", labels, any);
  require_ptr(fn, "grad_loss", grad_loss, any);
  require_ptr(fn, "row_max", row_max, any);
  require_ptr(fn, "row_sum", row_sum, any);
  require_ptr(fn, "grad_logits", grad_logits, any);
  return any;
}

/// Largest digest block: 65536 elements of 8 bytes (the CUDA kernel keeps one 64-byte sum per
/// KiB of a block in shared memory).
inline constexpr uint64_t kMaxDigestBlockBytes = uint64_t{1} << 19;

/// block_digests: block_bytes in [1, kMaxDigestBlockBytes]; data and out needed when nbytes > 0.
inline bool check_block_digests(const char* fn, const void* data, uint64_t nbytes,
                                uint64_t block_bytes, const void* out, uint64_t out_stride = 2) {
  if (out_stride < 2) {
    throw std::invalid_argument(std::string(fn) + ": out_stride = " + std::to_string(out_stride) +
                                " is below a digest's 2 values");
  }
  if (block_bytes == 0 || block_bytes > kMaxDigestBlockBytes) {
    throw std::invalid_argument(std::string(fn) + ": block_bytes = " + std::to_string(block_bytes) +
                                " is outside [1, " + std::to_string(kMaxDigestBlockBytes) + "]");
  }
  require_ptr(fn, "data", data, nbytes > 0);
  require_ptr(fn, "out", out, nbytes > 0);
  return nbytes > 0;
}

/// nonfinite_blocks: numel ≥ 0, element_size 1, 2, 4 or 8, block_elements ≥ 1, out_stride ≥ 3,
/// data and out needed when there are elements. Returns whether there is any.
inline bool check_nonfinite_blocks(const char* fn, const void* data, int64_t numel,
                                   int element_size, int64_t block_elements, const void* out,
                                   int64_t out_stride) {
  require_size(fn, "numel", numel);
  if (element_size != 1 && element_size != 2 && element_size != 4 && element_size != 8) {
    throw std::invalid_argument(std::string(fn) + ": element_size = " +
                                std::to_string(element_size) + " is not 1, 2, 4 or 8");
  }
  if (block_elements < 1) {
    throw std::invalid_argument(
        std::string(fn) + ": block_elements = " + std::to_string(block_elements) + " is below 1");
  }
  if (out_stride < 3) {
    throw std::invalid_argument(std::string(fn) + ": out_stride = " + std::to_string(out_stride) +
                                " is below the 3 values a block writes");
  }
  require_ptr(fn, "data", data, numel > 0);
  require_ptr(fn, "out", out, numel > 0);
  return numel > 0;
}

/// rope_forward / rope_backward: sizes ≥ 0, the head dim even; input, cos, sin and output needed
/// when there are elements.
inline bool check_rope(const char* fn, const void* in, const void* cos, const void* sin,
                       const void* out, int64_t s, int64_t b, int64_t heads, int64_t dim) {
  require_size(fn, "S", s);
  require_size(fn, "B", b);
  require_size(fn, "H", heads);
  require_size(fn, "D", dim);
  if (dim % 2 != 0) {
    throw std::invalid_argument(std::string(fn) + ": D = " + std::to_string(dim) +
                                " is odd (RoPE rotates halves)");
  }
  const bool any = s > 0 && b > 0 && heads > 0 && dim > 0;
  require_ptr(fn, "input", in, any);
  require_ptr(fn, "cos", cos, any);
  require_ptr(fn, "sin", sin, any);
  require_ptr(fn, "output", out, any);
  return any;
}

/// swiglu: rows, f ≥ 0 (gate_up [rows, 2f], output [rows, f] or [rows, 2f]); `dy` is checked
/// when `backward` (the output gradient [rows, f]).
inline bool check_swiglu(const char* fn, const void* gate_up, const void* dy, const void* out,
                         int64_t rows, int64_t f, bool backward) {
  require_size(fn, "rows", rows);
  require_size(fn, "F", f, INT64_MAX / 2);
  const bool any = rows > 0 && f > 0;
  require_ptr(fn, "gate_up", gate_up, any);
  require_ptr(fn, "output gradient", dy, any && backward);
  require_ptr(fn, "output", out, any);
  return any;
}

/// attention: n, s, hn ≥ 0, a finite scale, and every pointer of the buffer set
/// (AttentionForwardBuffers or AttentionBackwardBuffers, kernels/attention_math.h) non-null when
/// there is anything to compute.
template <typename Buffers>
inline bool check_attention(const char* fn, const Buffers& b, int64_t n, int64_t s, int64_t hn,
                            double scale) {
  require_size(fn, "n", n);
  require_size(fn, "s", s);
  require_size(fn, "hn", hn);
  if (!(scale == scale) || scale - scale != 0) {
    throw std::invalid_argument(std::string(fn) + ": scale = " + std::to_string(scale) +
                                " is not finite");
  }
  const bool any = n > 0 && s > 0 && hn > 0;
  b.for_each_pointer([&](const char* name, const void* p) { require_ptr(fn, name, p, any); });
  return any;
}

}  // namespace mtp::kernels::internal
