"""The harness's model (megatron_conventions.md) written in plain PyTorch, for the anchor.

One function computes one microbatch's share of the step objective J (conventions §8) from a
dict of parameters under the harness's names. Nothing here is Megatron's or the harness's code:
it is the conventions document read once more, so that `anchor.py check` can hold it against a
harness record (`mtp-harness compare`, rel_l2:1e-5) before `anchor.py time` times it.

Shapes: tokens, labels [b, s] int64; loss_mask [b, s] float32; activations [b, s, H].
"""

import math

import torch
import torch.nn.functional as F

# Convention mistakes (megatron_conventions.md, "Mistakes that each break 1e-5") that `check
# --fault` injects, so that its test proves the comparison catches them.
FAULTS = ("rope-interleaved", "eh-order", "mtp-unnormalized")


def parameter_shapes(m):
    """{harness name: shape} of model `m` (a dict under Megatron's argument names), in the
    harness's order (conventions "Parameter names and layouts")."""
    h, f, v = m["hidden_size"], m["ffn_hidden_size"], m["vocab_size"]
    nh, ng = m["num_attention_heads"], m["num_query_groups"]
    hn = h // nh
    layer = (("input_layernorm.weight", (h,)),
             ("self_attention.linear_qkv.weight", (ng * (nh // ng + 2) * hn, h)),
             ("self_attention.linear_proj.weight", (h, nh * hn)),
             ("pre_mlp_layernorm.weight", (h,)),
             ("mlp.linear_fc1.weight", (2 * f, h)),
             ("mlp.linear_fc2.weight", (h, f)))
    shapes = {"embedding.word_embeddings.weight": (v, h)}
    for i in range(m["num_layers"]):
        shapes.update({f"decoder.layers.{i}.{k}": s for k, s in layer})
    shapes["decoder.final_layernorm.weight"] = (h,)
    for k in range(m["mtp_num_layers"]):
        p = f"mtp.layers.{k}."
        shapes[p + "enorm.weight"] = (h,)
        shapes[p + "hnorm.weight"] = (h,)
        shapes[p + "eh_proj.weight"] = (h, 2 * h)
        shapes.update({f"{p}transformer_layer.{n}": s for n, s in layer})
        shapes[p + "final_layernorm.weight"] = (h,)
    if m["untie_embeddings"]:
        shapes["output_layer.weight"] = (v, h)
    return shapes


def init_parameters(m, dtype, device, seed):
    """Megatron's initialisation scale (conventions, last paragraph): N(0, 0.02), linear_proj
    and linear_fc2 N(0, 0.02/sqrt(2N)), norms 1; drawn from torch's generator seeded `seed`."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name, shape in parameter_shapes(m).items():
        if name.endswith("norm.weight"):
            t = torch.ones(shape)
        else:
            std = 0.02
            if name.endswith(("linear_proj.weight", "linear_fc2.weight")):
                std /= math.sqrt(2 * m["num_layers"])
            t = torch.randn(shape, generator=gen) * std
        out[name] = t.to(device=device, dtype=dtype).requires_grad_(True)
    return out


class Model:
    """J's microbatch share for model `m`. attention: "math" (scores in fp32, masked with
    -10000, softmax in the model dtype: conventions §4) or "flash" (torch's SDPA forced to its
    flash kernel, is_causal). fault: one of FAULTS or None."""

    def __init__(self, m, num_microbatches, device, attention="math", fault=None):
        if fault is not None and fault not in FAULTS:
            raise ValueError(f"fault {fault!r}: accepted: {', '.join(FAULTS)}")
        self.m, self.M, self.attention, self.fault = m, num_microbatches, attention, fault
        h, nh = m["hidden_size"], m["num_attention_heads"]
        self.hn = h // nh
        self.nq = nh // m["num_query_groups"]  # query heads per KV group
        s, hn = m["seq_length"], self.hn
        # RoPE tables in fp32 exactly so (conventions §3); positions 0..s-1 in every depth.
        inv_freq = 1.0 / (m["rotary_base"] ** (torch.arange(0, hn, 2, dtype=torch.float32) / hn))
        freqs = torch.outer(torch.arange(s, dtype=torch.float32), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.cos, self.sin = emb.cos().to(device), emb.sin().to(device)  # [s, hn]

    def _norm(self, x, w):
        eps = self.m["norm_epsilon"]
        if x.dtype != torch.float32 and hasattr(F, "rms_norm"):
            return F.rms_norm(x, (x.shape[-1],), w, eps)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w

    def _rope(self, x):  # x [b, s, heads, hn]
        cos, sin = self.cos.to(x.dtype)[:, None, :], self.sin.to(x.dtype)[:, None, :]
        if self.fault == "rope-interleaved":  # pairs d with d + 1
            x1, x2 = x[..., 0::2], x[..., 1::2]
            rot = torch.stack((-x2, x1), dim=-1).flatten(-2)
        else:  # rotate-half: d < hn/2 pairs with d + hn/2
            x1, x2 = x[..., : self.hn // 2], x[..., self.hn // 2:]
            rot = torch.cat((-x2, x1), dim=-1)
        return x * cos + rot * sin

    def _attention(self, q, k, v):  # [b, heads, s, hn] each, k and v already per query head
        if self.attention == "flash":
            from torch.nn.attention import SDPBackend, sdpa_kernel
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        s = q.shape[2]
        scores = torch.matmul(q.float(), k.float().transpose(-1, -2)) / math.sqrt(self.hn)
        causal = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
        probs = scores.masked_fill(causal, -10000.0).softmax(-1).to(q.dtype)
        return torch.matmul(probs, v)

    def _layer(self, p, prefix, x):
        b, s, _ = x.shape
        nh, ng, hn, nq = self.m["num_attention_heads"], self.m["num_query_groups"], self.hn, self.nq
        y = self._norm(x, p[prefix + "input_layernorm.weight"])
        qkv = F.linear(y, p[prefix + "self_attention.linear_qkv.weight"]).view(b, s, ng,
                                                                                (nq + 2) * hn)
        q = qkv[..., : nq * hn].reshape(b, s, nh, hn)
        k = qkv[..., nq * hn: (nq + 1) * hn]
        v = qkv[..., (nq + 1) * hn:]
        q, k = self._rope(q), self._rope(k)
        if nq > 1:  # GQA: query head i reads KV head i // nq
            k, v = k.repeat_interleave(nq, dim=2), v.repeat_interleave(nq, dim=2)
        o = self._attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        o = o.transpose(1, 2).reshape(b, s, nh * hn)
        x = x + F.linear(o, p[prefix + "self_attention.linear_proj.weight"])
        y = self._norm(x, p[prefix + "pre_mlp_layernorm.weight"])
        gate, up = F.linear(y, p[prefix + "mlp.linear_fc1.weight"]).chunk(2, dim=-1)
        return x + F.linear(F.silu(gate) * up, p[prefix + "mlp.linear_fc2.weight"])

    @staticmethod
    def _roll_left(t):  # [b, s]: one position left, 0 into the last slot
        return torch.cat((t[:, 1:], torch.zeros_like(t[:, :1])), dim=1)

    @staticmethod
    def _masked_mean_ce(logits, labels, mask):  # conventions §7-8, cross entropy in fp32
        ce = F.cross_entropy(logits.float().flatten(0, 1), labels.flatten(),
                             reduction="none").view(labels.shape)
        return (ce * mask).sum() / mask.sum().clamp(min=1.0)

    def __call__(self, p, tokens, labels, mask):
        """Returns (J's share of this microbatch, lm, [mtp_1..mtp_D]): the microbatch's masked
        means and (lm + λ/D Σ mtp_k) / M, every loss a 0-d fp32 tensor."""
        m = self.m
        emb = p["embedding.word_embeddings.weight"]
        out_w = p.get("output_layer.weight", emb)
        x = F.embedding(tokens, emb)
        for i in range(m["num_layers"]):
            x = self._layer(p, f"decoder.layers.{i}.", x)
        h = self._norm(x, p["decoder.final_layernorm.weight"])
        lm = self._masked_mean_ce(F.linear(h, out_w), labels, mask)
        ids, lab, msk, mtp = tokens, labels, mask, []
        for k in range(m["mtp_num_layers"]):
            prefix = f"mtp.layers.{k}."
            ids, lab, msk = self._roll_left(ids), self._roll_left(lab), self._roll_left(msk)
            e = self._norm(F.embedding(ids, emb), p[prefix + "enorm.weight"])
            hh = self._norm(h, p[prefix + "hnorm.weight"])
            z = F.linear(torch.cat((hh, e) if self.fault == "eh-order" else (e, hh), dim=-1),
                         p[prefix + "eh_proj.weight"])
            z = self._layer(p, prefix + "transformer_layer.", z)
            hk = self._norm(z, p[prefix + "final_layernorm.weight"])
            mtp.append(self._masked_mean_ce(F.linear(hk, out_w), lab, msk))
            h = z if self.fault == "mtp-unnormalized" else hk
        total = lm
        if mtp:
            total = lm + m["mtp_loss_scaling_factor"] / len(mtp) * torch.stack(mtp).sum()
        return total / self.M, lm, mtp
