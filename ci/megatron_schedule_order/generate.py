#!/usr/bin/env python3
"""Every pipeline rank's op order, as Megatron-LM's own schedule code runs it (issue 21).

Runs megatron/core/pipeline_parallel/schedules.py — forward_backward_pipelining_without_interleaving
(1F1B), forward_backward_pipelining_with_interleaving (interleaved 1F1B, and with
overlap_moe_expert_parallel_comm its combined 1F1B path of combined_1f1b.py) — one pipeline rank at a
time in one process, with Megatron's forward_step and backward_step replaced by recorders and a
point-to-point communicator that sends nothing and receives placeholders (the schedule's order of
forward and backward steps does not depend on the data). Writes one line per (schedule, P, V, M,
rank) in the harness's op notation ("F<chunk>.<microbatch>", "B<chunk>.<microbatch>", space
separated), or "refused: <Megatron's message>" where Megatron rejects the configuration.
The committed output is golden/schedules/megatron_op_order.txt, checked by
harness/schedule/megatron_order_test.cc against schedule::rank_ops.

Usage (needs PyTorch with CUDA: Megatron allocates a token counter on the GPU):
  PYTHONPATH=<Megatron-LM checkout> python3 ci/megatron_schedule_order/generate.py OUT.txt
"""
import itertools
import subprocess
import sys
import types

import torch

from megatron.core.pipeline_parallel import combined_1f1b, schedules
from megatron.core.process_groups_config import ProcessGroupCollection

MAX_P, MAX_V, MAX_M = 8, 4, 32


class Group:
    """A process group of `size` ranks seen from `rank` (no communication)."""

    def __init__(self, rank, size):
        self._rank, self._size = rank, size

    def rank(self):
        return self._rank

    def size(self):
        return self._size


class Groups(ProcessGroupCollection):
    """pg_collection: the pipeline group as given, every other group of size 1."""

    def __init__(self, pp):  # the dataclass's fields are set after creation (init=False)
        object.__setattr__(self, "pp", pp)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Group(0, 1)


class Config:
    """The transformer config the schedules read: defaults off, the few sizes they need."""

    def __init__(self, pp, vp):
        self.pipeline_model_parallel_size = pp
        self.virtual_pipeline_model_parallel_size = vp
        self.microbatch_group_size_per_vp_stage = pp
        self.hidden_size = 8
        self.pipeline_dtype = torch.float32
        self.variable_seq_lengths = False
        self.overlap_p2p_comm = False
        self.batch_p2p_comm = False
        self.overlap_moe_expert_parallel_comm = False
        self.deallocate_pipeline_outputs = False

    def __getattr__(self, name):
        return None  # every other option off


def placeholder():
    return torch.zeros(1, device="cuda")


class P2P:
    """Megatron's P2PCommunicator interface: sends nothing, every receive a placeholder."""

    def __init__(self, pp_group, config):
        self.pp_group = pp_group
        self.config = config
        self.virtual_pipeline_model_parallel_size = config.virtual_pipeline_model_parallel_size
        self.total_stages = pp_group.size()
        self.current_stage = pp_group.rank()

    @property
    def is_pp_first_stage(self):
        return self.pp_group.rank() == 0

    @property
    def is_pp_last_stage(self):
        return self.pp_group.rank() == self.pp_group.size() - 1

    def __getattr__(self, name):
        if name.startswith("send_forward_backward_recv_forward_backward"):
            return lambda *a, **k: (placeholder(), placeholder())
        if "recv" in name:
            return lambda *a, **k: placeholder()
        if name.startswith("send"):
            return lambda *a, **k: None
        raise AttributeError(name)


class Chunk(torch.nn.Module):
    def __init__(self, chunk, config):
        super().__init__()
        self.chunk = chunk
        self.config = config
        self.model_type = None


def run_rank(kind, P, V, M, rank):
    """The op list of pipeline rank `rank`, or 'refused: …'."""
    ops = []
    seen = {}

    def forward(model):
        mb = seen.get(model.chunk, 0)
        seen[model.chunk] = mb + 1
        ops.append(f"F{model.chunk}.{mb}")
        out = placeholder()
        out.op = (model.chunk, mb)
        return out, torch.ones([], dtype=torch.int, device="cuda")

    def backward(output_tensor):
        chunk, mb = output_tensor.op
        ops.append(f"B{chunk}.{mb}")
        return placeholder()

    def forward_step(forward_step_func, data_iterator, model, *args, **kwargs):
        return forward(model)

    def backward_step(input_tensor, output_tensor, output_tensor_grad, config):
        return backward(output_tensor)

    # Combined 1F1B: one step runs a forward and a backward of two microbatches (layer by layer
    # in Megatron; recorded as the forward, then the backward).
    def combined_step(forward_step_func, data_iterator, f_model, num_microbatches, input_tensor,
                      forward_data_store, b_model, b_input_tensor, b_output_tensor,
                      b_output_tensor_grad, config, **kwargs):
        out, tokens, grad = None, torch.zeros([], dtype=torch.int, device="cuda"), None
        if f_model is not None:
            out, tokens = forward(f_model)
        if b_model is not None:
            grad = backward(b_output_tensor)
        return out, tokens, grad

    schedules.forward_step = forward_step
    schedules.backward_step = backward_step
    combined_1f1b.combined_forward_backward_step = combined_step
    config = Config(P, None if kind == "1f1b" else V)
    config.overlap_moe_expert_parallel_comm = kind == "combined_1f1b"
    pp = Group(rank, P)
    p2p = P2P(pp, config)
    model = [Chunk(c, config) for c in range(V)]
    try:
        if kind != "1f1b":
            schedules.forward_backward_pipelining_with_interleaving(
                forward_step_func=None,
                data_iterator=[None] * V,
                model=model,
                num_microbatches=M,
                seq_length=1,
                micro_batch_size=1,
                p2p_communicator=p2p,
                pg_collection=Groups(pp),
            )
        else:
            schedules.forward_backward_pipelining_without_interleaving(
                forward_step_func=None,
                data_iterator=None,
                model=model[0],
                num_microbatches=M,
                seq_length=1,
                micro_batch_size=1,
                p2p_communicator=p2p,
                pg_collection=Groups(pp),
            )
    except (AssertionError, ValueError, RuntimeError) as e:
        return "refused: " + " ".join(str(e).split())
    return " ".join(ops)


def main():
    out = sys.argv[1]
    root = schedules.__file__.rsplit("/megatron/", 1)[0]
    try:  # a source tree without git (carried to a GPU machine) names its commit in REVISION
        rev = open(root + "/REVISION").read().strip()
    except OSError:
        rev = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True,
                             text=True).stdout.strip() or "unknown"
    lines = [
        "# Every pipeline rank's op order as Megatron-LM's schedules.py runs it, made by",
        "# ci/megatron_schedule_order/generate.py from Megatron-LM " + rev + ".",
        "# <schedule> P=<P> V=<V> M=<M> rank=<r>: <ops>   (N = P microbatches per group)",
    ]
    for P, M in itertools.product(range(2, MAX_P + 1), range(1, MAX_M + 1)):
        for rank in range(P):
            lines.append(f"1f1b P={P} V=1 M={M} rank={rank}: {run_rank('1f1b', P, 1, M, rank)}")
    for P, V, M in itertools.product(range(2, MAX_P + 1), range(2, MAX_V + 1), range(1, MAX_M + 1)):
        for rank in range(P):
            lines.append(
                f"interleaved P={P} V={V} M={M} rank={rank}: {run_rank('interleaved', P, V, M, rank)}")
    for P, V, M in itertools.product(range(2, MAX_P + 1), range(1, MAX_V + 1), range(1, MAX_M + 1)):
        for rank in range(P):
            lines.append(f"combined_1f1b P={P} V={V} M={M} rank={rank}: "
                         f"{run_rank('combined_1f1b', P, V, M, rank)}")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{len(lines) - 3} rank orders written to {out}")


if __name__ == "__main__":
    main()
