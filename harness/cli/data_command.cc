// mtp-harness data prepare: text files → a byte-level Megatron indexed dataset (prepare.h).
#include <fmt/format.h>

#include <iostream>

#include "harness/cli/commands.h"
#include "harness/common/error.h"
#include "harness/data/prepare.h"

namespace mtp::cli {

int run_data_prepare(const DataPrepareOptions& opt) {
  if (opt.args.size() < 2) {
    throw InputError(
        "data prepare: expected TEXT... OUT_PREFIX (at least one text file and the "
        "output prefix)");
  }
  const std::vector<std::string> texts(opt.args.begin(), opt.args.end() - 1);
  const std::string& prefix = opt.args.back();
  const auto split = data::parse_document_split(opt.split);
  const auto sum = data::prepare_byte_dataset(texts, prefix, split);
  std::cout << fmt::format(
      "data prepare: wrote {0}.idx and {0}.bin: {1} documents from {2} "
      "file(s) (one per {3}), {4} tokens including the EOD (id {5}) after "
      "each document, dtype uint16\n",
      prefix, sum.documents, texts.size(),
      split == data::DocumentSplit::kFile ? "file" : "blank-line block", sum.tokens,
      data::kByteLevelEod);
  return kExitOk;
}

}  // namespace mtp::cli
