// File: harness/record/testing/small_step_record.h
//
// For the record and compare benchmarks: one step of issue 8's "small" model (8 layers, H 1024,
// F 2816, 16 heads, V 32768, D 1, untied: 185M parameters, shapes from config::parameter_specs)
// written as a record — the grad and the weight group, float32 — and where benchmarks put their
// files. Header-only; the program links harness_record and harness_config.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "harness/config/param_specs.h"
#include "harness/record/record.h"

namespace mtp::record::testing {

/// $TMPDIR, else /tmp.
inline std::string bench_tmp_dir() {
  const char* t = std::getenv("TMPDIR");
  return t && *t ? t : "/tmp";
}

/// The small model's parameter shapes in canonical order.
inline std::vector<std::vector<int64_t>> small_model_shapes() {
  config::ModelConfig m;
  m.num_layers = 8;
  m.hidden_size = 1024;
  m.ffn_hidden_size = 2816;
  m.num_attention_heads = 16;
  m.num_query_groups = 16;
  m.vocab_size = 32768;
  m.seq_length = 2048;
  m.micro_batch_size = 1;
  m.mtp_num_layers = 1;
  m.untie_embeddings = true;
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& spec : config::parameter_specs(m)) shapes.push_back(spec.shape);
  return shapes;
}

/// Writes step 1's grad and weight groups of the small model to `path` (fixed float32 values,
/// kept with `storage`; digests on default_digest_threads() threads, as the step recorder's
/// writer) and commits. Returns the tensor bytes written (both groups).
inline uint64_t write_small_model_step(const std::string& path, Storage storage) {
  const auto shapes = small_model_shapes();
  size_t largest = 0;
  for (const auto& s : shapes) {
    size_t n = 1;
    for (int64_t d : s) n *= static_cast<size_t>(d);
    largest = std::max(largest, n);
  }
  std::vector<float> values(largest);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 9973) * 1e-4f;
  uint64_t bytes = 0;
  RecordWriter w(path);
  for (const char* group : {"grad", "weight"}) {
    for (size_t i = 0; i < shapes.size(); ++i) {
      size_t n = 1;
      for (int64_t d : shapes[i]) n *= static_cast<size_t>(d);
      w.write(1, group,
              TensorView{"t" + std::to_string(i), DType::kF32, shapes[i], values.data(), n * 4},
              storage, nullptr, default_digest_threads());
      bytes += n * 4;
    }
  }
  w.commit();
  return bytes;
}

}  // namespace mtp::record::testing
