"""Megatron-LM's GPTModel with an MTP block, its DDP wrapper and its optimizer, built from a
harness record's model (megatron/core only: local spec, no Transformer Engine, no Apex, fp32).

Every setting below is the harness's model as Megatron-LM spells it (megatron_conventions.md):
RMSNorm, SwiGLU without biases, RoPE over the whole head, no dropout, causal attention generated
by Megatron's own softmax (fused_softmax.py forward_torch_softmax), deterministic_mode.
"""

import torch
import torch.nn.functional as F

from megatron.core import parallel_state
from megatron.core.distributed import (DistributedDataParallel, DistributedDataParallelConfig,
                                       finalize_model_grads)
from megatron.core.models.gpt import GPTModel
from megatron.core.models.gpt.gpt_layer_specs import (get_gpt_layer_local_spec,
                                                      get_gpt_mtp_block_spec)
from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed
from megatron.core.transformer.transformer_config import TransformerConfig

INIT_METHOD_STD = 0.02  # Megatron's --init-method-std default (arguments.py)


def _without_transformer_engine_fix():
    """Megatron-LM d98e8a64dd without Transformer Engine: inference_layers.py derives its
    inference linears from TE classes that are then not types, so
    is_inference_column_parallel_linear (multi_token_prediction.py lines 1193 and 1243, building
    every MTP layer) raises TypeError. A TE-less build has no inference linears, so the answer
    is False; the recorder says so instead of letting the MTP block fail to build."""
    from megatron.core.transformer import multi_token_prediction as mtp
    try:
        mtp.is_inference_column_parallel_linear(torch.nn.Linear(1, 1))
    except TypeError:
        mtp.is_inference_column_parallel_linear = lambda module: False
        return True
    return False


PATCHED_TE_CHECK = _without_transformer_engine_fix()


def initialize(seed):
    """One process, one GPU: torch.distributed (NCCL, world size 1), Megatron's parallel state
    at TP = PP = CP = 1 and its CUDA RNG tracker seeded as `pretrain` seeds it."""
    torch.cuda.set_device(0)
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group(backend="nccl", init_method="tcp://127.0.0.1:29531",
                                             world_size=1, rank=0)
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=1,
                                             pipeline_model_parallel_size=1)
    model_parallel_cuda_manual_seed(seed)


def transformer_config(model):
    """TransformerConfig for the harness model `model` (SourceRecord.model)."""
    h, nh = model["hidden_size"], model["num_attention_heads"]
    return TransformerConfig(
        num_layers=model["num_layers"],
        hidden_size=h,
        ffn_hidden_size=model["ffn_hidden_size"],
        num_attention_heads=nh,
        num_query_groups=model["num_query_groups"],
        kv_channels=h // nh,
        normalization="RMSNorm",
        layernorm_epsilon=model["norm_epsilon"],
        gated_linear_unit=True,
        activation_func=F.silu,
        add_bias_linear=False,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        bias_activation_fusion=False,
        bias_dropout_fusion=False,
        apply_rope_fusion=False,
        masked_softmax_fusion=False,
        persist_layer_norm=False,
        gradient_accumulation_fusion=False,
        cross_entropy_loss_fusion=False,
        attention_softmax_in_fp32=True,
        init_method_std=INIT_METHOD_STD,
        params_dtype=torch.float32,
        pipeline_dtype=torch.float32,
        mtp_num_layers=model["mtp_num_layers"] or None,
        mtp_loss_scaling_factor=model["mtp_loss_scaling_factor"],
        calculate_per_token_loss=False,
        deterministic_mode=True,
    )


def build(model, optimizer):
    """GPTModel (+ MTP block) wrapped in Megatron's DDP, and Megatron's optimizer.

    model: SourceRecord.model; optimizer: SourceRecord.optimizer (lr, adam_beta1/2, adam_eps,
    weight_decay, clip_grad). Returns (config, ddp_model, megatron_optimizer). The weights are
    Megatron's initialisation (init_method_std 0.02, output-layer-scaled fc2/proj), drawn from
    the RNG tracker `initialize` seeded.
    """
    config = transformer_config(model)
    layer_spec = get_gpt_layer_local_spec(normalization="RMSNorm")
    mtp_spec = (get_gpt_mtp_block_spec(config, layer_spec, use_transformer_engine=False)
                if model["mtp_num_layers"] else None)
    rotary_base = model["rotary_base"]
    gpt = GPTModel(
        config=config,
        transformer_layer_spec=layer_spec,
        vocab_size=model["vocab_size"],
        max_sequence_length=model["seq_length"],
        pre_process=True,
        post_process=True,
        share_embeddings_and_output_weights=not model["untie_embeddings"],
        position_embedding_type="rope",
        rotary_percent=1.0,
        rotary_base=int(rotary_base) if float(rotary_base).is_integer() else rotary_base,
        mtp_block_spec=mtp_spec,
    ).cuda()
    ddp = DistributedDataParallel(
        config=config,
        ddp_config=DistributedDataParallelConfig(grad_reduce_in_fp32=True,
                                                 overlap_grad_reduce=False,
                                                 use_distributed_optimizer=False),
        module=gpt,
    )
    # What megatron/training/training.py wires for the schedule.
    config.no_sync_func = ddp.no_sync
    config.finalize_model_grads_func = finalize_model_grads
    opt = get_megatron_optimizer(
        OptimizerConfig(optimizer="adam", lr=optimizer["lr"], min_lr=optimizer["lr"],
                        weight_decay=optimizer["weight_decay"],
                        adam_beta1=optimizer["adam_beta1"], adam_beta2=optimizer["adam_beta2"],
                        adam_eps=optimizer["adam_eps"], clip_grad=optimizer["clip_grad"],
                        fp16=False, bf16=False, params_dtype=torch.float32,
                        use_distributed_optimizer=False),
        [ddp])
    return config, ddp, opt
