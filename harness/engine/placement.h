// File: harness/engine/placement.h
//
// Which stages hold which parameters, for the whole model, without building any chunk: the
// implementation's stage_param_names for every stage, checked against the model's parameter
// list. Every rank derives the same placement, so the recording rank knows which rank owns each
// tensor it must record, and every rank knows the embedding group.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/config/model_config.h"
#include "harness/engine/chunk.h"
#include "harness/layout/layout.h"

namespace mtp::engine {

/// One parameter of the model and the stages holding a copy of it.
struct PlacedParam {
  std::string name;  ///< global name
  std::vector<int64_t> shape;
  std::vector<int> stages;  ///< ascending; stages[0] owns it (its copy is recorded)
};

struct ParamPlacement {
  std::vector<PlacedParam> params;  ///< canonical order (config::parameter_specs)
  /// Stages holding the word-embedding table when it has more than one copy (the embedding
  /// group, spec §3.6), else empty.
  std::vector<int> embedding_group;
  /// Index of `name` in params. Throws InternalError when absent.
  size_t index_of(const std::string& name) const;
};

/// The placement of `cfg`'s parameters in `layout` by `impl`. Throws InternalError when a stage
/// names an unknown parameter, a parameter has no stage, or a parameter other than the word
/// embedding has several copies (a bug in the implementation).
ParamPlacement place_params(const Implementation& impl, const layout::PipelineLayout& layout,
                            const config::ModelConfig& cfg);

/// One copy of a parameter that is not the recorded one (data-parallel rank 0, owner stage): a
/// data-parallel replica, or a word-embedding copy of another stage.
struct ParamCopy {
  size_t param = 0;  ///< index into ParamPlacement::params
  int data_parallel_rank = 0;
  int stage = 0;
  std::string name;  ///< record::copy_name(param's name, data_parallel_rank, stage)
};

/// Every copy but the recorded one, by parameter (canonical order), then data-parallel rank,
/// then stage: what [training] record_copies writes to the record's "copies" group. Throws
/// nothing.
std::vector<ParamCopy> param_copies(const ParamPlacement& placement, int data_parallel_size);

}  // namespace mtp::engine
