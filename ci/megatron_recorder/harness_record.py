"""The harness's step record (architecture.md §6), read and written with h5py.

A record is an HDF5 file: root attributes (the model's hyperparameters under Megatron-LM's
argument names, the optimizer's, provenance) and one group per step, /steps/NNNNNN, holding
`batch/{tokens,labels,loss_mask}` ([K, b, s], int32/int32/uint8, K = M microbatches at DP = 1),
`loss/{lm,mtp_1..mtp_D,total}` (scalars), `grad/<name>` (the main grad after finalisation) and
`weight/<name>` (after the optimizer step; step 0: the initial weights). Names are the harness's
global names, which are Megatron-LM's except one (`MEGATRON_TO_HARNESS`).
Readers: harness/record/record_reader.cc; this module writes what it reads (no digests).
"""

import os

import h5py
import numpy as np

# Megatron-LM d98e8a64dd calls the MTP layer's inner transformer layer `mtp_model_layer`
# (megatron/core/transformer/multi_token_prediction.py, MultiTokenPredictionLayer.__init__);
# the harness keeps the earlier name `transformer_layer` (harness/config/parameter_specs).
MEGATRON_TO_HARNESS = (("mtp_model_layer.", "transformer_layer."),)

# Model attributes the recorder needs, all under Megatron's names (harness/config/hyperparameters.cc).
MODEL_INT_ATTRS = ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads",
                   "num_query_groups", "vocab_size", "seq_length", "micro_batch_size",
                   "mtp_num_layers")
MODEL_FLOAT_ATTRS = ("mtp_loss_scaling_factor", "rotary_base", "norm_epsilon")
# The model attributes a Megatron record carries over from its source record.
RECORDED_MODEL_ATTRS = MODEL_INT_ATTRS + MODEL_FLOAT_ATTRS + (
    "untie_embeddings_and_output_weights", "kv_channels", "num_moe_experts")
OPTIMIZER_ATTRS = ("lr", "adam_beta1", "adam_beta2", "adam_eps", "weight_decay", "clip_grad")


class RecordError(Exception):
    """Bad input: the message names the file and the rule broken."""


def harness_name(megatron_name):
    """Megatron-LM's parameter name -> the harness's global name."""
    for old, new in MEGATRON_TO_HARNESS:
        megatron_name = megatron_name.replace(old, new)
    return megatron_name


def step_group(step):
    return f"steps/{step:06d}"


def _scalar(value):
    """An attribute as a Python value: fixed-length strings (the harness's) come as bytes."""
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value[()]
    if isinstance(value, (bytes, np.bytes_)):
        return value.decode("utf-8")
    return value.item() if isinstance(value, np.generic) else value


class SourceRecord:
    """What the recorder takes from a harness record: the model, the optimizer settings, the
    batches of steps 1..N and the initial weights (step 0). Raises RecordError naming the file
    and what is missing or unsupported."""

    def __init__(self, path, steps):
        self.path = path
        if os.path.isdir(path):
            raise RecordError(f"{path}: is a directory, not a record")
        try:
            f = h5py.File(path, "r")
        except OSError as e:
            raise RecordError(f"{path}: not a readable HDF5 file ({e})") from e
        try:
            with f:
                self._read(f, path, steps)
        except (ValueError, TypeError, AttributeError, KeyError, UnicodeDecodeError) as e:
            # A record whose attributes or groups have another type or shape than the schema's.
            raise RecordError(f"{path}: not a harness step record ({type(e).__name__}: {e}); "
                              "architecture.md §6 gives the schema") from e

    def _read(self, f, path, steps):
        """Reads what __init__ promises from the open file `f`."""
        self.attrs = {k: _scalar(v) for k, v in f.attrs.items()}
        for key in MODEL_INT_ATTRS + MODEL_FLOAT_ATTRS + OPTIMIZER_ATTRS + ("M",):
            if key not in self.attrs:
                raise RecordError(f"{path}: root attribute '{key}' is missing (the recorder "
                                  "reads the model and Adam's settings from it)")
        self.model = {k: int(self.attrs[k]) for k in MODEL_INT_ATTRS}
        self.model.update({k: float(self.attrs[k]) for k in MODEL_FLOAT_ATTRS})
        self.model["untie_embeddings"] = bool(
            self.attrs.get("untie_embeddings_and_output_weights", 1))
        if int(self.attrs.get("calculate_per_token_loss", 0)) != 0:
            raise RecordError(f"{path}: calculate_per_token_loss is 1; the recorder trains "
                              "Megatron's default per-microbatch normalisation and needs a "
                              "record made with calculate_per_token_loss = false")
        self.optimizer = {k: float(self.attrs[k]) for k in OPTIMIZER_ATTRS}
        self.num_microbatches = int(self.attrs["M"])
        if int(self.attrs.get("data_parallel_size", 1)) != 1:
            raise RecordError(f"{path}: data_parallel_size is "
                              f"{self.attrs['data_parallel_size']}; the recorder runs "
                              "Megatron at DP = 1 and needs a DP = 1 record")
        if int(self.attrs.get("num_moe_experts", 0)) != 0:
            raise RecordError(f"{path}: num_moe_experts is {self.attrs['num_moe_experts']}; "
                              "the recorder builds dense models only")
        if self.attrs.get("dtype", "float32") != "float32":
            raise RecordError(f"{path}: dtype is {self.attrs['dtype']!r}; the recorder "
                              "trains in float32")
        if not isinstance(f.get("steps"), h5py.Group):
            raise RecordError(f"{path}: /steps is missing or not a group")
        self.batches = []
        b, s = self.model["micro_batch_size"], self.model["seq_length"]
        for step in range(1, steps + 1):
            group = f"{step_group(step)}/batch"
            if not isinstance(f.get(group), h5py.Group):
                raise RecordError(f"{path}: /{group} is missing: the recorder trains {steps} "
                                  "step(s) on the record's batches")
            batch = {}
            for name in ("tokens", "labels", "loss_mask"):
                d = f[group].get(name)
                if not isinstance(d, h5py.Dataset) or d.shape != (self.num_microbatches, b, s):
                    got = ("missing" if d is None else "not a dataset"
                           if not isinstance(d, h5py.Dataset) else
                           "digest-only (no values)" if d.shape is None else
                           f"shape {list(d.shape)}")
                    raise RecordError(f"{path}: /{group}/{name} is {got}, not "
                                      f"[M, b, s] = [{self.num_microbatches}, {b}, {s}]")
                batch[name] = d[()]
            self.batches.append(batch)
        weights = f.get(f"{step_group(0)}/weight")
        if not isinstance(weights, h5py.Group):
            raise RecordError(f"{path}: /{step_group(0)}/weight is missing or not a group "
                              "(the initial weights name the parameters)")
        self.weights0 = {}
        self.weight_shapes = {}
        self.not_float32 = []  # names whose step-0 values the recorder cannot take
        for name, d in weights.items():
            if not isinstance(d, h5py.Dataset):
                raise RecordError(f"{path}: /{step_group(0)}/weight/{name} is not a dataset")
            shape = d.attrs.get("shape") if d.shape is None else d.shape
            if d.shape is None:  # a digest-only tensor: its shape is an attribute
                shape = tuple(int(x) for x in str(_scalar(shape)).strip("[]").split(",")
                              if x.strip())
            self.weight_shapes[name] = tuple(shape)
            if d.shape is not None and d.dtype == np.float32:
                self.weights0[name] = d[()]
            else:
                self.not_float32.append(name)
        self.weights_complete = not self.not_float32


def write_record(path, attrs, steps):
    """Writes a record atomically (a temporary file renamed into place).

    attrs: root attributes (str, int, float). steps: {step: {group: {name: np.ndarray}}}, the
    groups of architecture.md §6. Raises OSError when the file cannot be written.
    """
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with h5py.File(tmp, "w") as f:
            for key, value in sorted(attrs.items()):
                # str subclasses (torch.__version__) would become numpy unicode, which HDF5
                # cannot store: plain str is written as UTF-8.
                f.attrs[key] = str(value) if isinstance(value, str) else value
            for step in sorted(steps):
                for group, tensors in steps[step].items():
                    g = f.require_group(f"{step_group(step)}/{group}")
                    for name in sorted(tensors):
                        g.create_dataset(name, data=tensors[name])
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
