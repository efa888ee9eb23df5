// File: reference/testing/p1_reference_losses.h
//
// For the standalone family's tests (candidate/, candidate/split/): the losses of one
// microbatch from a whole pipeline of chunks must be, bit for bit, those of the reference at
// P = 1 (every layer, the MTP depths and the loss in one chunk) from the same initial weights.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "harness/engine/chunk.h"
#include "harness/layout/layout.h"
#include "reference/reference.h"

namespace mtp::reference::testing {

/// Expects `loss` (the loss stage's forward output for `mb`) to equal the P = 1 reference's
/// forward of `mb` from `init` (layout `Et*N` + `m` × D + `L` of `cfg`): lm and every mtp_k loss
/// (double, exact) and the objective (a scalar tensor, at::equal). Throws nothing beyond
/// LibTorch's; failures are GoogleTest expectations.
inline void expect_p1_reference_losses(const engine::ChunkOutput& loss,
                                       const config::ModelConfig& cfg,
                                       const engine::InitialWeights& init,
                                       const engine::MicrobatchTensors& mb) {
  const std::string text =
      "Et*" + std::to_string(cfg.num_layers) + std::string(cfg.mtp_num_layers, 'm') + "L";
  auto ref = make_reference()->build_chunks(
      layout::build_layout(text, 1, cfg.num_layers, cfg.mtp_num_layers), cfg, init, at::kFloat);
  auto ref_loss = ref[0]->forward({}, mb);
  EXPECT_EQ(loss.lm, ref_loss.lm);
  EXPECT_EQ(loss.mtp, ref_loss.mtp);
  EXPECT_TRUE(at::equal(loss.objective, ref_loss.objective));
}

}  // namespace mtp::reference::testing
