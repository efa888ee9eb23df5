// `mtp-harness perf compare` and `mtp-harness perf merge` (harness/perf).
#include <fmt/format.h>

#include <iostream>

#include "harness/cli/commands.h"
#include "harness/common/error.h"
#include "harness/common/output_file.h"
#include "harness/common/utf8.h"
#include "harness/perf/benchmark_json.h"
#include "harness/perf/perf_compare.h"

namespace mtp::cli {

int run_perf_compare(const PerfCompareCommandOptions& opt) {
  if (!opt.json_path.empty()) {
    check_output_file("--json", opt.json_path);
    check_not_same_file("--json", opt.json_path, "the baseline", opt.baseline);
    check_not_same_file("--json", opt.json_path, "the contender", opt.contender);
    require_utf8("baseline", opt.baseline, "the JSON result holds it");
    require_utf8("contender", opt.contender, "the JSON result holds it");
  }
  perf::PerfCompareOptions options;
  options.threshold = opt.threshold;
  options.alpha = opt.alpha;
  perf::check_options(options);
  const perf::BenchmarkFile baseline = perf::read_benchmark_json(opt.baseline);
  const perf::BenchmarkFile contender = perf::read_benchmark_json(opt.contender);
  const std::vector<std::string> mismatch = perf::fingerprint_mismatches(baseline, contender);
  if (!mismatch.empty() && !opt.allow_fingerprint_mismatch) {
    throw InputError(fmt::format(
        "baseline {} and contender {} were measured on different machines ({}): a baseline "
        "holds only for the GPU and driver it was measured with. Make a new baseline on this "
        "machine, or pass --allow-fingerprint-mismatch to compare anyway",
        opt.baseline, opt.contender, fmt::join(mismatch, "; ")));
  }
  perf::PerfComparison c = perf::compare_perf(baseline, contender, options);
  if (!mismatch.empty()) {
    c.warnings.insert(c.warnings.begin(), fmt::format("different machines ({}), compared anyway "
                                                      "(--allow-fingerprint-mismatch)",
                                                      fmt::join(mismatch, "; ")));
  }
  std::cout << perf::format_perf_table(c);
  if (!opt.json_path.empty()) {
    write_file_atomically(opt.json_path, perf::perf_comparison_json(c).dump(2) + "\n");
  }
  return c.regressed() ? kExitMismatch : kExitOk;
}

int run_perf_merge(const PerfMergeOptions& opt) {
  check_output_file("--out", opt.out);
  for (const std::string& in : opt.inputs) {
    check_not_same_file("--out", opt.out, "input", in);
    require_utf8("input", in, "the merged JSON holds it");
  }
  const std::string merged = perf::merge_benchmark_json(opt.inputs);
  write_file_atomically(opt.out, merged);
  std::cout << fmt::format("wrote {} ({} files)\n", opt.out, opt.inputs.size());
  return kExitOk;
}

}  // namespace mtp::cli
