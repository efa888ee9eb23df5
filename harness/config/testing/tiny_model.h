// File: harness/config/testing/tiny_model.h
//
// Test helper: the tiny model the engine, reference and candidate tests train (N = 8, D = 2,
// H = 16, 2 heads, F = 24, s = 8, micro-batch 2, V = 256, untied), small enough for a 2-core CI.
#pragma once

#include "harness/config/model_config.h"

namespace mtp::config::testing {

inline ModelConfig tiny_model() {
  ModelConfig c;
  c.hidden_size = 16;
  c.num_attention_heads = 2;
  c.num_query_groups = 2;
  c.ffn_hidden_size = 24;
  c.seq_length = 8;
  c.mtp_num_layers = 2;
  return c;
}

}  // namespace mtp::config::testing
