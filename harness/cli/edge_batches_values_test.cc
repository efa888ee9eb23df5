// Values of the edge_batches scenario's records (scenarios/edge_batches.toml), read after the
// CTest scenario.edge_batches wrote them to $MTP_EDGE_BATCHES_RECORDS. What must hold follows from
// each step's own recorded loss_mask [M, b, s]:
//   - every loss, gradient and weight is finite;
//   - MTP depth k has no valid token in a microbatch when mask[k..s−1] is 0 in every row (depth k
//     rolls the mask left k times, zero fill); when that holds for every microbatch of a step, the
//     recorded mtp_k is exactly 0 (the count is clamped to 1, Megatron process_mtp_loss), and
//     when it holds for every depth, every mtp.layers.* gradient is exactly 0;
//   - a step whose mask is 0 everywhere has lm, every mtp_k, total and every gradient exactly 0.
// The test also requires that the records contain such steps, so it cannot pass vacuously.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "harness/record/record.h"

namespace mtp {
namespace {

std::vector<double> values(const record::TensorData& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t.dtype == record::DType::kF32) {
      float f;
      std::memcpy(&f, t.bytes.data() + 4 * i, 4);
      v[i] = f;
    } else {
      EXPECT_EQ(t.dtype, record::DType::kF64) << t.name;
      std::memcpy(&v[i], t.bytes.data() + 8 * i, 8);
    }
  }
  return v;
}

/// Which MTP depths (1..D) have no valid token in any microbatch of the step, and whether the
/// whole mask is 0.
struct StepMask {
  std::vector<bool> depth_empty;  ///< [D + 1], index 0 unused
  bool all_masked = true;
};

StepMask step_mask(const record::RecordReader& rec, int step, int64_t depths) {
  const record::TensorData m = rec.read(step, "batch", "loss_mask");
  EXPECT_EQ(m.dtype, record::DType::kU8);
  EXPECT_EQ(m.shape.size(), 3u);
  const int64_t s = m.shape[2], rows = m.shape[0] * m.shape[1];
  StepMask out;
  out.depth_empty.assign(static_cast<size_t>(depths + 1), true);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < s; ++i) {
      if (m.bytes[static_cast<size_t>(r * s + i)] == 0) continue;
      out.all_masked = false;
      for (int64_t k = 1; k <= depths && k <= i; ++k) {
        out.depth_empty[static_cast<size_t>(k)] = false;
      }
    }
  }
  return out;
}

TEST(EdgeBatchesValuesTest, FiniteEverywhereAndExactZerosWhereNothingCounts) {
  const char* dir = std::getenv("MTP_EDGE_BATCHES_RECORDS");
  ASSERT_NE(dir, nullptr) << "run through CTest (scenario.edge_batches.values)";
  int records = 0, mtp_empty_steps = 0, masked_steps = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".h5") continue;
    ++records;
    const record::RecordReader rec(entry.path().string());
    const auto attrs = rec.attrs();
    const int64_t D = std::get<int64_t>(attrs.at("mtp_num_layers"));
    for (int step : rec.steps()) {
      const std::string where = entry.path().filename().string() + " step " + std::to_string(step);
      for (const auto& group : rec.groups(step)) {
        if (group == "batch") continue;
        for (const auto& name : rec.names(step, group)) {
          for (double v : values(rec.read(step, group, name))) {
            ASSERT_TRUE(std::isfinite(v)) << where << " " << group << "/" << name << " = " << v;
          }
        }
      }
      if (step == 0) continue;
      const StepMask mask = step_mask(rec, step, D);
      bool all_depths_empty = D > 0;
      for (int64_t k = 1; k <= D; ++k) {
        if (!mask.depth_empty[static_cast<size_t>(k)]) {
          all_depths_empty = false;
          continue;
        }
        const std::string mtp = "mtp_" + std::to_string(k);
        EXPECT_EQ(values(rec.read(step, "loss", mtp))[0], 0.0) << where << " " << mtp;
      }
      if (all_depths_empty) ++mtp_empty_steps;
      if (mask.all_masked) ++masked_steps;
      for (const auto& name : rec.names(step, "grad")) {
        const bool mtp_param = name.rfind("mtp.layers.", 0) == 0;
        if (!mask.all_masked && !(all_depths_empty && mtp_param)) continue;
        for (double v : values(rec.read(step, "grad", name))) {
          ASSERT_EQ(v, 0.0) << where << " grad/" << name << ": nothing counts, yet the gradient is "
                            << v;
        }
      }
      if (mask.all_masked) {
        for (const auto& name : rec.names(step, "loss")) {
          EXPECT_EQ(values(rec.read(step, "loss", name))[0], 0.0) << where << " loss/" << name;
        }
      } else {
        EXPECT_GT(values(rec.read(step, "loss", "lm"))[0], 0.0) << where << " lm";
      }
    }
  }
  EXPECT_GE(records, 2) << "no records in " << dir;
  // scenarios/edge_batches.toml: step 1 has no valid MTP token, step 3 no valid token at all.
  EXPECT_GE(mtp_empty_steps, records * 2);
  EXPECT_GE(masked_steps, records);
}

}  // namespace
}  // namespace mtp
