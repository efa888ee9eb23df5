// libFuzzer target for the scenario parser (ci/sanitize.sh runs it from the seed corpus in
// fuzz_corpus/scenario_fuzzer/: the repository's scenarios). Input: the TOML text. Every input
// must either parse into a scenario whose expectations name its variants, or throw InputError
// (with a "fuzz.toml" position); any other exception, a crash or a sanitizer report is a
// finding. The parser opens the corpus [data] names, so inputs may read files of this machine.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "harness/common/error.h"
#include "harness/scenario/scenario.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const mtp::scenario::Scenario sc = mtp::scenario::parse_scenario(text, "fuzz.toml");
    if (sc.variants.empty()) std::abort();
    for (const auto& e : sc.expectations) {
      for (const auto& v : e.variants) sc.variant(v);  // throws InputError if unknown: a finding
    }
    mtp::scenario::check_expectation_selections(sc);
  } catch (const mtp::InputError& e) {
    if (std::string(e.what()).empty()) std::abort();
  }
  return 0;
}
