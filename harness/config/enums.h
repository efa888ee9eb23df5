// File: harness/config/enums.h
//
// The enum-like settings of scenarios and variants, each with its one name table: the spelling
// a scenario uses, the spelling records and reports print, and the list an error quotes all come
// from EnumTable<E>. Scenario values are parsed into these enums once, at load time; nothing
// downstream compares strings.
//
// Example:
//   config::Optimizer o = config::parse_enum<config::Optimizer>("distributed_adam", "optimizer");
//   config::enum_name(o) == "distributed_adam";
//   config::accepted_names<config::Optimizer>() == "\"adam\", \"distributed_adam\"";
//
// Torch-free.
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harness/common/error.h"

namespace mtp::config {

/// Which placement of MTP builds the model chunks.
enum class Implementation {
  kReference,  ///< reference/: MTP co-located with the loss in the last stage
  kCandidate,  ///< candidate/: MTP in any legal stage (Megatron-LM PR 5247a1f460)
  /// candidate/split/: MTP depths spread over consecutive stages (Megatron-LM #5329
  /// mtp_layer_split)
  kSplit,
};

/// Element type of parameters and activations. float32 and float64 keep main grads and the
/// optimizer in the same type; bfloat16 trains as Megatron-LM's --bf16 does: bf16 parameters,
/// activations and pipeline messages, fp32 main grads (accumulated after every backward pass),
/// fp32 master weights for clipping and Adam.
enum class DType { kFloat32, kFloat64, kBFloat16 };

/// Where tensors live.
enum class Device { kCpu, kCuda };

/// Kernels for RMSNorm, the word-embedding lookup and cross entropy: LibTorch ops with
/// deterministic algorithms, or the harness's fixed-order kernels (kernels/ops.h).
enum class Kernels { kTorch, kHarness };

/// How attention is computed (Megatron-LM's --attention-backend): the composite of matmuls,
/// scale, −10000 mask and softmax (Megatron's "unfused"/"local" DotProductAttention),
/// LibTorch's flash-attention kernel (bf16 on CUDA, LibTorch >= 2; Megatron's "flash"), or the
/// harness's own fused causal attention (kernels::causal_attention: one fixed order on the CPU
/// and the GPU, no partial-buffer reduction in its backward; for short sequences; no Megatron
/// counterpart).
enum class AttentionBackend { kUnfused, kFlash, kHarness };

/// The optimizer of a variant. Both run Adam with decoupled weight decay and identical
/// per-element arithmetic; the distributed one shards it over the data-parallel ranks as
/// Megatron-LM's DistributedOptimizer does (megatron/core/optimizer/distrib_optimizer.py).
enum class Optimizer { kAdam, kDistributedAdam };

/// How the copies of the word-embedding table (first stage, MTP stage, tied output head) stay
/// equal after the optimizer step. Both start from the same summed main grad.
enum class EmbeddingCopyUpdate {
  /// Every copy is a parameter with its own optimizer state, updated from the same summed grad
  /// (Megatron-LM: the embedding-group all-reduce in finalize_model_grads.py).
  kReplicated,
  /// Only the first stage's copy is updated; it is then broadcast over the embedding group.
  kBroadcast,
};

/// How a step's gradient contributions are summed. kMegatron: as Megatron-LM (autograd
/// accumulates each copy's .grad over its microbatches, then the data-parallel all-reduce and the
/// embedding group add the partial sums), so the association changes with P, V and DP.
/// kCanonical: every (global microbatch, use) contribution is kept apart and summed in one fixed
/// order — global microbatch ascending, then the use (the parameter itself; the word embedding's
/// input, MTP and tied-head uses) — whatever the placement (engine/canonical_grads.h).
enum class Accumulation { kMegatron, kCanonical };

/// What a record keeps of each grad, weight and optimizer tensor (batches and losses are always
/// kept in full): every byte, only digests (harness/record/digest.h), or full tensors while a
/// step's tensors are small (at most kAutoFullStepBytes) and digests otherwise. Steps named in
/// [training] dump_steps (--dump-steps) are kept in full in every mode.
enum class RecordMode { kFull, kDigest, kAuto };

/// Name table of an enum: kWhat names the setting in errors, kValues lists (value, spelling).
template <class E>
struct EnumTable;

template <>
struct EnumTable<Implementation> {
  static constexpr const char* kWhat = "implementation";
  static constexpr std::pair<Implementation, std::string_view> kValues[] = {
      {Implementation::kReference, "reference"},
      {Implementation::kCandidate, "candidate"},
      {Implementation::kSplit, "split"}};
};
template <>
struct EnumTable<DType> {
  static constexpr const char* kWhat = "dtype";
  static constexpr std::pair<DType, std::string_view> kValues[] = {
      {DType::kFloat32, "float32"}, {DType::kFloat64, "float64"}, {DType::kBFloat16, "bfloat16"}};
};
template <>
struct EnumTable<Device> {
  static constexpr const char* kWhat = "device";
  static constexpr std::pair<Device, std::string_view> kValues[] = {{Device::kCpu, "cpu"},
                                                                    {Device::kCuda, "cuda"}};
};
template <>
struct EnumTable<Kernels> {
  static constexpr const char* kWhat = "kernels";
  static constexpr std::pair<Kernels, std::string_view> kValues[] = {
      {Kernels::kTorch, "torch"}, {Kernels::kHarness, "harness"}};
};
template <>
struct EnumTable<AttentionBackend> {
  static constexpr const char* kWhat = "attention_backend";
  static constexpr std::pair<AttentionBackend, std::string_view> kValues[] = {
      {AttentionBackend::kUnfused, "unfused"},
      {AttentionBackend::kFlash, "flash"},
      {AttentionBackend::kHarness, "harness"}};
};
template <>
struct EnumTable<Optimizer> {
  static constexpr const char* kWhat = "optimizer";
  static constexpr std::pair<Optimizer, std::string_view> kValues[] = {
      {Optimizer::kAdam, "adam"}, {Optimizer::kDistributedAdam, "distributed_adam"}};
};
template <>
struct EnumTable<EmbeddingCopyUpdate> {
  static constexpr const char* kWhat = "embedding_copy_update";
  static constexpr std::pair<EmbeddingCopyUpdate, std::string_view> kValues[] = {
      {EmbeddingCopyUpdate::kReplicated, "replicated"},
      {EmbeddingCopyUpdate::kBroadcast, "broadcast"}};
};

template <>
struct EnumTable<Accumulation> {
  static constexpr const char* kWhat = "accumulation";
  static constexpr std::pair<Accumulation, std::string_view> kValues[] = {
      {Accumulation::kMegatron, "megatron"}, {Accumulation::kCanonical, "canonical"}};
};

template <>
struct EnumTable<RecordMode> {
  static constexpr const char* kWhat = "record";
  static constexpr std::pair<RecordMode, std::string_view> kValues[] = {
      {RecordMode::kFull, "full"}, {RecordMode::kDigest, "digest"}, {RecordMode::kAuto, "auto"}};
};

/// The spelling of `value` ("distributed_adam"). Throws InternalError for a value outside the
/// table (a bug).
template <class E>
std::string enum_name(E value) {
  for (const auto& [v, name] : EnumTable<E>::kValues) {
    if (v == value) return std::string(name);
  }
  throw InternalError(
      fmt::format("{}: value {} has no name", EnumTable<E>::kWhat, static_cast<int>(value)));
}

/// Every accepted spelling, in table order: {"adam", "distributed_adam"} (e.g. for a command-line
/// flag's list of allowed values).
template <class E>
std::vector<std::string> enum_names() {
  std::vector<std::string> out;
  for (const auto& [v, name] : EnumTable<E>::kValues) out.emplace_back(name);
  return out;
}

/// Every accepted spelling, quoted and comma-separated: "\"adam\", \"distributed_adam\"".
template <class E>
std::string accepted_names() {
  std::string out;
  for (const auto& [v, name] : EnumTable<E>::kValues) {
    if (!out.empty()) out += ", ";
    out += fmt::format("\"{}\"", name);
  }
  return out;
}

/// The value spelled `text`. Throws InputError "<key> = "<text>": accepted <names>" otherwise
/// (the text quoted and escaped as fmt's {:?} does);
/// `key` names the setting as the user wrote it (default: EnumTable<E>::kWhat).
template <class E>
E parse_enum(std::string_view text, std::string_view key = EnumTable<E>::kWhat) {
  for (const auto& [v, name] : EnumTable<E>::kValues) {
    if (name == text) return v;
  }
  // {:?}: quoted and escaped (a newline, a NUL or a quote in the value shows as \n, \x00, \").
  throw InputError(fmt::format("{} = {:?}: accepted {}", key, text, accepted_names<E>()));
}

}  // namespace mtp::config
