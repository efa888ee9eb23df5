// File: harness/record/schema.h
//
// The one description of the step record (record.h): its groups, the tensors each step of a run
// holds with their dtypes and sizes, the dataset attributes, 6-digit step group names, and which
// dataset names are allowed. The writer, the reader, the trainer, the scenario checks, the
// resource estimate, compare, replay and equiv read it; no group name is spelled elsewhere.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness/record/tensor_data.h"

namespace mtp::record {

/// Dataset attributes of the step record (record.h): the tensor digest, the block digests, the
/// storage of a digest-only tensor and its shape.
inline constexpr const char* kDigestAttr = "xxh3_128";
inline constexpr const char* kBlockDigestsAttr = "xxh3_128_blocks";
inline constexpr const char* kStorageAttr = "storage";
inline constexpr const char* kShapeAttr = "shape";
/// Group attribute: the JSON index of the group's datasets (record.h).
inline constexpr const char* kTensorIndexAttr = "tensor_index";

/// Group: the groups of a step (record.h), in canonical order. kWeight holds the weights the
/// optimizer updates (the fp32 master weights of a bf16 run); kModelWeight (bf16 runs only) the
/// model's own bf16 weights, re-cast from the masters after each step; kOptimizer (opt-in,
/// engine/checkpoint.h) Adam's state after the step; kCopies (opt-in, [training] record_copies)
/// every parameter copy other than the recorded one (copy_name), in the model's dtype.
enum class Group { kBatch, kLoss, kGrad, kWeight, kModelWeight, kOptimizer, kCopies };
/// Every group, in canonical order.
inline constexpr std::array<Group, 7> kAllGroups{
    Group::kBatch,       Group::kLoss,      Group::kGrad,  Group::kWeight,
    Group::kModelWeight, Group::kOptimizer, Group::kCopies};
/// group_name(Group::kModelWeight) == "model_weight": the HDF5 group's name, and the name
/// scenarios (`records = [...]`) and the CLI (`--records`) use.
const char* group_name(Group g);
/// parse_group("grad") == Group::kGrad; nullopt for a name that is not a group.
std::optional<Group> parse_group(std::string_view name);
/// The names of every group, in canonical order ("batch", "loss", ...).
const std::vector<std::string>& record_groups();

/// The groups a comparison reads unless told otherwise (a scenario expectation's `records`,
/// compare --records): loss, grad, weight.
std::vector<std::string> default_compared_groups();

/// The batch group's tensors, each [K, b, s] with K = M · DP (microbatch-major, data-parallel
/// rank minor): token ids (int32), labels (int32), loss mask (uint8).
inline constexpr std::array<const char*, 3> kBatchTensorNames{"tokens", "labels", "loss_mask"};
/// The loss group's scalars: the LM loss, each MTP depth's loss ("mtp_1" .. "mtp_D") and the
/// total L = lm + λ/D · Σ mtp_k, all in the main dtype (fp32 for bf16 runs).
inline constexpr const char* kLmLossName = "lm";
inline constexpr const char* kTotalLossName = "total";

/// Step attributes of a run with clipping on (/steps/NNNNNN attributes): the global gradient
/// norm the clip used and its coefficient (engine/grad_clip.h).
inline constexpr const char* kGradNormAttr = "grad_norm";
inline constexpr const char* kClipCoeffAttr = "clip_coeff";
/// mtp_loss_name(1) == "mtp_1" (depth k, 1-based).
std::string mtp_loss_name(int64_t depth);
/// "lm", "mtp_1" .. "mtp_D", "total" for D = mtp_num_layers.
std::vector<std::string> loss_names(int64_t mtp_num_layers);

/// The optimizer group: the step count (float64 scalar) and each parameter's Adam moments,
/// "<param>.exp_avg" and "<param>.exp_avg_sq" (main dtype, the parameter's shape).
inline constexpr const char* kOptimizerStepName = "step";
inline std::string exp_avg_name(const std::string& param) { return param + ".exp_avg"; }
inline std::string exp_avg_sq_name(const std::string& param) { return param + ".exp_avg_sq"; }

/// The copies group: copy_name("embedding.word_embeddings.weight", 0, 3) ==
/// "embedding.word_embeddings.weight@dp0.stage3", the copy of data-parallel rank 0's stage 3 (the
/// record's stage_coords give its pipeline rank). Every copy but the recorded one (data-parallel
/// rank 0, the owner stage) has one; it holds the copy's weight in the model's dtype (bf16 runs:
/// the bf16 weights, so it is compared with model_weight; else with weight).
std::string copy_name(const std::string& param, int data_parallel_rank, int stage);
/// The parameter a copy_name names ("" when `name` is not of that form).
std::string copied_param(const std::string& name);

/// What a run's steps hold, as the plan decides it (engine/step_recorder.h writes it).
struct StepContents {
  struct Param {
    std::string name;  ///< global name (config::parameter_specs)
    int64_t numel = 0;
  };
  std::vector<Param> params;         ///< in canonical order
  int64_t mtp_num_layers = 0;        ///< D: loss scalars mtp_1..mtp_D
  int64_t batch_samples = 0;         ///< K = M · DP microbatches per step
  int64_t tokens_per_sample = 0;     ///< b · s of one microbatch
  DType main_dtype = DType::kF32;    ///< grads, masters, Adam moments, losses
  std::optional<DType> model_dtype;  ///< bf16 runs: the model's own weights (kModelWeight)
  bool optimizer_state = false;      ///< [training] save_optimizer_state
  /// [training] record_copies: the copies (copy_name, the parameter's numel), placement order.
  std::vector<Param> copies;
};

/// One tensor a step holds: its group, name, dtype and element count.
struct StepTensor {
  Group group = Group::kBatch;
  std::string name;
  DType dtype = DType::kF32;
  int64_t numel = 0;
  /// Bytes of its contents when stored in full.
  uint64_t nbytes() const;
};

/// The tensors of the start step (`start` = true: the initial weights, plus the bf16 model
/// weights) or of a trained step (batch, losses, grads, weights, model weights, optimizer), in
/// the order the trainer writes them. Throws nothing.
std::vector<StepTensor> step_tensors(const StepContents& c, bool start);

/// The names a trained step holds in `g` (step_tensors' names for that group).
std::vector<std::string> step_tensor_names(const StepContents& c, Group g);

/// Largest step number a 6-digit step group name can hold.
inline constexpr int kMaxStep = 999999;

/// parse_step_group_name: the step of a 6-digit name ("000007" → 7), nullopt for anything else.
std::optional<int> parse_step_group_name(const std::string& name);

/// group_index: the position of `group` in record_groups(), or -1 when it is not a known group.
int group_index(const std::string& group);

/// parse_shape_attr: the dimensions of a `shape` attribute ("[8, 2, 32]", "[]"), nullopt when it
/// is not that form or a dimension is negative or over 2^62.
std::optional<std::vector<int64_t>> parse_shape_attr(const std::string& text);

/// dataset_name_problem: why `name` cannot be a dataset name (empty, ".", contains '/' or a NUL),
/// or "" when it can.
std::string dataset_name_problem(const std::string& name);

}  // namespace mtp::record
