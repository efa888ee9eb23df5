// File: kernels/testing/attention_problem.h
//
// Test support for the harness's causal attention (kernels/attention_math.h): a seeded problem,
// the CPU kernels run on it, and a float64 reference written from the textbook formulas, not from
// the kernel's phases (full masked score matrix with −∞ above the diagonal, softmax over every
// key, the backward through dP and the softmax Jacobian, all in float64). Header-only, no
// LibTorch; shared by the CPU and CUDA tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernels/attention_math.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/testing/testbed.h"

namespace mtp::kernels::testing {

/// AttentionProblem: q, k ~ N(0, 1.5²), v, d_o ~ N(0, 1) [n, s, hn] stored as T; scale 1/√hn.
template <typename T>
struct AttentionProblem {
  AttentionDims dims;
  double scale = 0;
  std::vector<T> q, k, v, d_o;
  static AttentionProblem make(int64_t n, int64_t s, int64_t hn, uint64_t seed) {
    std::mt19937_64 rng(seed);
    AttentionProblem p;
    p.dims.n = n, p.dims.s = s, p.dims.hn = hn;
    p.scale = 1.0 / std::sqrt(static_cast<double>(hn));
    const size_t e = static_cast<size_t>(n * s * hn);
    p.q = normal<T>(e, rng, 0.0, 1.5);
    p.k = normal<T>(e, rng, 0.0, 1.5);
    p.v = normal<T>(e, rng);
    p.d_o = normal<T>(e, rng);
    return p;
  }
  /// The problem of pair `p` alone (n = 1).
  AttentionProblem pair(int64_t p) const {
    AttentionProblem one = *this;
    one.dims.n = 1;
    const auto rows = [&](const std::vector<T>& x) {
      const int64_t e = dims.s * dims.hn;
      return std::vector<T>(x.begin() + p * e, x.begin() + (p + 1) * e);
    };
    one.q = rows(q), one.k = rows(k), one.v = rows(v), one.d_o = rows(d_o);
    return one;
  }
};

/// AttentionOutputs: o, dq, dk, dv [n, s, hn] and lse [n, s].
template <typename T>
struct AttentionOutputs {
  std::vector<T> o, dq, dk, dv;
  std::vector<Acc<T>> lse;
};

/// run_cpu: cpu::attention_forward then cpu::attention_backward, outputs and scratch pre-filled
/// with `poison` bytes.
template <typename T>
AttentionOutputs<T> run_cpu(const AttentionProblem<T>& p, unsigned char poison) {
  using A = Acc<T>;
  const AttentionDims& d = p.dims;
  const size_t e = static_cast<size_t>(d.n * d.s * d.hn), rows = static_cast<size_t>(d.n * d.s);
  const size_t sq = static_cast<size_t>(d.n * d.s * d.s);
  AttentionOutputs<T> out{poisoned<T>(e, poison), poisoned<T>(e, poison), poisoned<T>(e, poison),
                          poisoned<T>(e, poison), poisoned<A>(rows, poison)};
  std::vector<A> probs = poisoned<A>(sq, poison), ds = poisoned<A>(sq, poison);
  std::vector<A> delta = poisoned<A>(rows, poison);
  AttentionForwardBuffers<T> f;
  f.q = p.q.data(), f.k = p.k.data(), f.v = p.v.data(), f.o = out.o.data();
  f.lse = out.lse.data(), f.probs = probs.data();
  cpu::attention_forward<T>(f, d, p.scale);
  probs = poisoned<A>(sq, poison);
  AttentionBackwardBuffers<T> b;
  b.q = p.q.data(), b.k = p.k.data(), b.v = p.v.data(), b.d_o = p.d_o.data();
  b.lse = out.lse.data();
  b.dq = out.dq.data(), b.dk = out.dk.data(), b.dv = out.dv.data();
  b.probs = probs.data(), b.ds = ds.data(), b.delta = delta.data();
  cpu::attention_backward<T>(b, d, p.scale);
  return out;
}

/// AttentionRef: the float64 reference of every output.
struct AttentionRef {
  std::vector<double> o, lse, dq, dk, dv;
};

/// ref_attention: the reference on the stored (rounded) inputs of `p`.
template <typename T>
AttentionRef ref_attention(const AttentionProblem<T>& p) {
  const int64_t n = p.dims.n, s = p.dims.s, hn = p.dims.hn;
  const std::vector<double> q = widen(p.q), k = widen(p.k), v = widen(p.v), dout = widen(p.d_o);
  AttentionRef r;
  const size_t e = static_cast<size_t>(n * s * hn);
  r.o.assign(e, 0.0), r.dq.assign(e, 0.0), r.dk.assign(e, 0.0), r.dv.assign(e, 0.0);
  r.lse.assign(static_cast<size_t>(n * s), 0.0);
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> prob(static_cast<size_t>(s * s)), dprob(static_cast<size_t>(s * s));
  for (int64_t b = 0; b < n; ++b) {
    const auto at = [&](const std::vector<double>& x, int64_t i, int64_t d) {
      return x[static_cast<size_t>((b * s + i) * hn + d)];
    };
    for (int64_t i = 0; i < s; ++i) {
      std::vector<double> score(static_cast<size_t>(s));
      double mx = -inf;
      for (int64_t j = 0; j < s; ++j) {
        double dot = 0.0;
        for (int64_t d = 0; d < hn; ++d) dot += at(q, i, d) * at(k, j, d);
        score[j] = j > i ? -inf : dot * p.scale;
        mx = std::max(mx, score[j]);
      }
      double sum = 0.0;
      for (int64_t j = 0; j < s; ++j) sum += std::exp(score[j] - mx);
      r.lse[static_cast<size_t>(b * s + i)] = mx + std::log(sum);
      for (int64_t j = 0; j < s; ++j) prob[i * s + j] = std::exp(score[j] - mx) / sum;
      for (int64_t d = 0; d < hn; ++d) {
        double o = 0.0;
        for (int64_t j = 0; j < s; ++j) o += prob[i * s + j] * at(v, j, d);
        r.o[static_cast<size_t>((b * s + i) * hn + d)] = o;
      }
    }
    // dP = dO·Vᵀ; dS_ij = P_ij·(dP_ij − Σ_l P_il·dP_il); dQ = dS·K·scale; dK = dSᵀ·Q·scale;
    // dV = Pᵀ·dO.
    for (int64_t i = 0; i < s; ++i) {
      double row = 0.0;
      for (int64_t j = 0; j < s; ++j) {
        double dot = 0.0;
        for (int64_t d = 0; d < hn; ++d) dot += at(dout, i, d) * at(v, j, d);
        dprob[i * s + j] = dot;
        row += prob[i * s + j] * dot;
      }
      for (int64_t j = 0; j < s; ++j) dprob[i * s + j] = prob[i * s + j] * (dprob[i * s + j] - row);
    }
    for (int64_t x = 0; x < s; ++x) {
      for (int64_t d = 0; d < hn; ++d) {
        double dq = 0.0, dk = 0.0, dv = 0.0;
        for (int64_t y = 0; y < s; ++y) {
          dq += dprob[x * s + y] * at(k, y, d);
          dk += dprob[y * s + x] * at(q, y, d);
          dv += prob[y * s + x] * at(dout, y, d);
        }
        const size_t o = static_cast<size_t>((b * s + x) * hn + d);
        r.dq[o] = dq * p.scale, r.dk[o] = dk * p.scale, r.dv[o] = dv;
      }
    }
  }
  return r;
}

/// The shapes the attention tests sweep: one key, odd and power-of-two lengths and head
/// dimensions, more pairs than a warp.
inline std::vector<AttentionDims> attention_shapes() {
  return {{1, 1, 1}, {2, 7, 3}, {8, 32, 16}, {3, 33, 24}, {5, 64, 64}, {40, 17, 8}};
}

}  // namespace mtp::kernels::testing
