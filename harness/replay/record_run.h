// File: harness/replay/record_run.h
//
// The run a step record describes, read back for `mtp-harness replay`: the model, the training
// settings and the variant, from the record's root attributes (Megatron-LM argument names, as
// engine/step_recorder.cc writes them) and its contents. A record made elsewhere may lack some of
// them (Megatron-LM's own record, golden/oracle/megatron_selftest_fused.h5, has the model's sizes,
// M, P, V and the dtype): each missing one is derived from the record's contents (sizes and
// untied output layer from the weights' names and shapes, micro-batch and sequence length from
// the batch, the number of query groups from linear_qkv's rows, M from the batch and DP) or takes
// Megatron-LM's default where that cannot change the compared numbers, and a note says which;
// any other is an error naming the attribute. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/config/model_config.h"
#include "harness/config/run_config.h"
#include "harness/record/record.h"

namespace mtp::replay {

/// The steps a replay re-runs: first … last, starting from the weights (and, for first > 1, the
/// optimizer state) of step first − 1.
struct ReplaySteps {
  int first = 1;
  int last = 1;
};

/// What replaying a record needs.
struct RecordRun {
  config::ModelConfig model;
  config::TrainingConfig training;  ///< steps = last; num_microbatches = M; no global batch
  config::VariantSpec variant;      ///< implementation, layout, P, V, DP, schedule, optimizer…
  int64_t global_microbatches = 1;  ///< K = DP·M: microbatches per step in the record's batches
  /// One line per attribute derived or defaulted: "attribute: value used (why)".
  std::vector<std::string> notes;
};

/// Reads the run of `rec` to replay `steps`. `optimizer_matters`: what the replay compares
/// depends on an optimizer step (weights or optimizer state at a replayed step, or any step
/// after the first), so lr, adam_beta1, adam_beta2, adam_eps, weight_decay and clip_grad are
/// required; otherwise a missing one takes the harness default, noted. Throws RecordError naming
/// the record and the attribute: missing and not derivable; of the wrong type; a value this
/// build cannot run (dtype other than float32/float64, unknown kernels, implementation or
/// optimizer spelled otherwise, a router score function other than sigmoid, kv_channels other
/// than hidden_size / num_attention_heads, a layout that does not parse for P > 1); an integer
/// outside its range, named with its value and the range, before it is narrowed (P and
/// data_parallel_size in [1, 64], V in [1, 4096], M, num_microbatches and microbatch_group_size
/// up to 100,000, ddp_bucket_size ≥ 0, 0/1 flags); V other than the layout's number of virtual
/// stages for P; lr, weight_decay or clip_grad not finite and ≥ 0, adam_beta1/2 outside
/// [0, 1), adam_eps not finite and > 0; micro_batch_size or seq_length other than the batch's;
/// no weights at step first − 1 or no batch at step first; K ≠ DP·M or K outside [1, 100,000];
/// a model that fails validation. Throws RecordError naming the record and the weight: the
/// word embedding, decoder layer 0's linear_fc2 or linear_qkv not of rank 2, or (when it stands
/// in for a missing attribute) not of hidden_size rows (fc2) or columns (qkv); a decoder or MTP
/// layer index in a weight's name of 1024 or more.
RecordRun read_record_run(const record::RecordReader& rec, const ReplaySteps& steps,
                          bool optimizer_matters);

/// `--variant-like`: run the record with `like`'s implementation, layout, P, V, DP, schedule,
/// microbatch group size, overlap_p2p, optimizer, embedding_copy_update, ddp_bucket_size and
/// transport delays. The model, the hyperparameters and the global batch stay the record's:
/// `like`'s model overrides (λ, kernels, untie_embeddings) and clip_grad are ignored, and
/// M = K / like.DP. Throws InputError when like.DP does not divide K. Adds a note.
void apply_variant_like(RecordRun& run, const config::VariantSpec& like);

}  // namespace mtp::replay
