// fault_info, all_faults (fault.h).

#include "harness/config/fault.h"

#include <fmt/format.h>

#include "harness/common/error.h"

namespace mtp::config {
namespace {

constexpr FaultInfo kFaults[] = {
    {Fault::kNone, "no planted bug", ""},
    {Fault::kMtpEmbeddingOutOfGroup,
     "the MTP stage's word-embedding copy is left out of the embedding group's all-reduce",
     "Megatron-Bridge #5380"},
    {Fault::kEmbeddingNormCountedTwice,
     "the word embedding is counted twice in the global gradient norm", "torchtitan #4488"},
    {Fault::kMtpLossMainMaskCount,
     "depth k's loss is normalised by the main mask's token count, not its rolled mask's",
     "Megatron-LM #2417"},
    {Fault::kMtpScaleWithoutOneOverM, "the MTP loss auto-scaler's scale lacks the 1/M",
     "own reading: schedules.py MTPLossAutoScaler.set_loss_scale(scale / num_microbatches)"},
    {Fault::kMtpScaleWithoutOneOverD, "the MTP terms are scaled by λ instead of λ/D",
     "own reading: multi_token_prediction.py mtp_loss_scaling_factor / mtp_num_layers"},
    {Fault::kMtpLabelsRolledOnceMore, "depth k's labels and mask are rolled k + 1 times",
     "own reading: multi_token_prediction.py roll_tensor once per depth"},
    {Fault::kGradsZeroedBetweenMicrobatches,
     "grads are zeroed before every microbatch's backward (only the last one's survives)",
     "the gradient-accumulation bug (zero_grad inside the microbatch loop)"},
    {Fault::kStandaloneStageFedZeros,
     "the standalone MTP stage receives zeros instead of the hidden state",
     "issue 21 (an unfilled receive buffer in the standalone stage)"},
    {Fault::kAdamBiasCorrectionOff, "Adam's moments are not bias-corrected (1 − β^t)",
     "own reading: torch.optim.AdamW / Megatron's optimizer (shared by both implementations)"},
    {Fault::kMtpLocalTokenCount,
     "per-token loss: depth k's MTP sum is rescaled by the data-parallel rank's own counts",
     "Megatron-LM #7452 (process_mtp_loss normalises by local token counts)"},
    {Fault::kMtpLossScaleWithoutCp,
     "context parallel: the MTP loss auto-scaler's scale lacks the x CP the main loss gets, so "
     "the MTP grads are divided by CP",
     "Megatron-LM #3943 (schedules.py MTPLossAutoScaler.set_loss_scale without cp_group_size)"},
};

}  // namespace

const FaultInfo& fault_info(Fault f) {
  for (const FaultInfo& i : kFaults) {
    if (i.fault == f) return i;
  }
  throw InternalError(fmt::format("fault {} has no description", static_cast<int>(f)));
}

std::vector<Fault> all_faults() {
  std::vector<Fault> out;
  for (const auto& [f, name] : EnumTable<Fault>::kValues) {
    if (f != Fault::kNone) out.push_back(f);
  }
  return out;
}

}  // namespace mtp::config
