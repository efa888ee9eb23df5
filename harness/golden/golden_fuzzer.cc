// libFuzzer target for the goldens parser (ci/sanitize.sh runs it from the seed corpus in
// fuzz_corpus/golden_fuzzer/: small goldens of format 1 and 2, one with the scenario text whose
// digest matches, and broken ones). Input: the file's text. Every input must either parse or
// throw InputError naming "fuzz.txt:<line>"; a file of format 2 that parses must also survive a
// round trip: format_golden of it parses again, formats to the same text, and compares equal to
// it (diff_goldens: no tensor, loss or fingerprint change). Any other exception, a broken round
// trip (abort), a crash or a sanitizer report is a finding.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "harness/common/error.h"
#include "harness/golden/golden.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  using namespace mtp::golden;
  try {
    const GoldenFile g = parse_golden(text, "fuzz.txt");
    if (g.scenario.empty() || g.scenario_line < 1) std::abort();
    if (text.compare(0, 22, "mtp-harness-goldens 2\n") != 0) return 0;  // format 1: no text
    const std::string once = format_golden(g);
    const GoldenFile back = parse_golden(once, "fuzz.txt");  // an InputError here is a finding
    if (format_golden(back) != once) std::abort();
    const GoldenDiff d = diff_goldens(g, back);
    if (!d.equal() || !d.loss_changes.empty() || d.scenario_changed ||
        !d.fingerprint_bits.empty() || !d.fingerprint_info.empty()) {
      std::abort();
    }
  } catch (const mtp::InputError& e) {
    if (std::string(e.what()).compare(0, 9, "fuzz.txt:") != 0) std::abort();
  }
  return 0;
}
