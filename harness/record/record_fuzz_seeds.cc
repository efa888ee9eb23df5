// Writes the seed corpus of record_reader_fuzzer: small records that cover every dtype, scalar
// and empty tensors, root and step attributes, several steps and every group. All in the file
// format RecordWriter writes (superblock 2, checksummed metadata): HDF5 1.10.8 itself crashes on
// some corrupt files of its earliest format (no checksums; fuzz_findings/README.md), which the
// reader accepts (h5py, the Megatron oracle), so seeding that format fails this job on HDF5's bug.
// Usage: record_fuzz_seeds DIR   (ci/sanitize.sh's build has it; the output is checked in at
// harness/record/fuzz_corpus/record_reader_fuzzer/).
#include <cstdio>
#include <string>
#include <vector>

#include "harness/record/record.h"

using mtp::record::DType;
using mtp::record::RecordWriter;
using mtp::record::TensorData;

namespace {

TensorData pattern(const std::string& name, DType dtype, std::vector<int64_t> shape) {
  TensorData t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.bytes.resize(static_cast<size_t>(t.numel() * mtp::record::dtype_size(dtype)));
  for (size_t i = 0; i < t.bytes.size(); ++i) t.bytes[i] = static_cast<uint8_t>(i * 37 + 11);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  {
    RecordWriter w(dir + "/training.h5");
    w.set_attr("layout", std::string("E|tt|L"));
    w.set_attr("num_layers", int64_t{2});
    w.set_attr("lr", 1e-3);
    w.write(0, "weight", TensorData::from_f32("w_zeta", {2, 2}, {1, 2, 3, 4}));
    w.write(0, "weight", TensorData::from_f32("w_alpha", {3}, {0.5f, -1, 0}));
    for (int step = 1; step <= 2; ++step) {
      w.write(step, "batch", TensorData::from_i32("tokens", {1, 1, 4}, {3, 1, 4, 1}));
      w.write(step, "batch", TensorData::from_u8("loss_mask", {1, 1, 4}, {1, 1, 0, 1}));
      w.write(step, "loss", TensorData::from_f64("lm", {}, {2.5 / step}));
      w.write(step, "grad", TensorData::from_f32("w_zeta", {2, 2}, {0.1f, 0.2f, 0.3f, 0.4f}));
      w.write(step, "weight", TensorData::from_f32("w_zeta", {2, 2}, {1, 2, 3, 4}));
      w.set_step_attr(step, "grad_norm", 0.5 * step);
    }
    w.commit();
  }
  {
    RecordWriter w(dir + "/dtypes.h5");
    const DType all[] = {DType::kF32, DType::kF64, DType::kBF16, DType::kF16,
                         DType::kI32, DType::kI64, DType::kU8};
    for (DType d : all) w.write(1, "grad", pattern(mtp::record::dtype_name(d), d, {3, 2}));
    w.write(1, "loss", pattern("scalar", DType::kF32, {}));
    w.write(1, "loss", pattern("empty", DType::kF32, {0, 4}));
    w.commit();
  }
  {
    RecordWriter w(dir + "/empty.h5");
    w.set_attr("note", std::string("no steps"));
    w.commit();
  }
  return 0;
}
