// File: harness/engine/testing/random_microbatches.h
//
// For executor tests: M microbatches of random tokens for a model, labels the tokens shifted left
// by one (wrapping), every position counted in the loss.
#pragma once

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cstdint>
#include <vector>

#include "harness/config/model_config.h"
#include "harness/engine/executor.h"

namespace mtp::engine::testing {

/// M microbatches: tokens [b, s] int64 uniform in [0, vocab_size), microbatch i drawn from a
/// CPU generator seeded `seed` + i; labels = tokens rolled left by one; loss_mask [b, s] float32
/// ones. Throws nothing beyond LibTorch's.
inline std::vector<MicrobatchTensors> random_microbatches(const config::ModelConfig& cfg,
                                                          int64_t num_microbatches, uint64_t seed) {
  std::vector<MicrobatchTensors> mbs;
  for (int64_t i = 0; i < num_microbatches; ++i) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed + static_cast<uint64_t>(i));
    auto tokens =
        at::randint(cfg.vocab_size, {cfg.micro_batch_size, cfg.seq_length}, gen, at::kLong);
    MicrobatchTensors mb;
    mb.tokens = tokens;
    mb.labels = at::roll(tokens, -1, 1);
    mb.loss_mask = at::ones({cfg.micro_batch_size, cfg.seq_length}, at::kFloat);
    mb.num_microbatches = num_microbatches;
    mbs.push_back(mb);
  }
  return mbs;
}

/// random_microbatches on `device`, with position (0, 3) of every microbatch out of the loss
/// (loss_mask 0 there: a masked position exercised).
inline std::vector<MicrobatchTensors> random_masked_microbatches_on(const config::ModelConfig& cfg,
                                                                    int64_t num_microbatches,
                                                                    uint64_t seed,
                                                                    const at::Device& device) {
  std::vector<MicrobatchTensors> mbs = random_microbatches(cfg, num_microbatches, seed);
  for (MicrobatchTensors& mb : mbs) {
    mb.loss_mask[0][3] = 0;
    mb.tokens = mb.tokens.to(device);
    mb.labels = mb.labels.to(device);
    mb.loss_mask = mb.loss_mask.to(device);
  }
  return mbs;
}

}  // namespace mtp::engine::testing
