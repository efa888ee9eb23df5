// File: reference/reference.h
//
// The established design: MTP co-located with the loss in the last pipeline stage (Megatron-LM
// before "MTP standalone", PR 5247a1f460). Every `m` must sit in the loss stage; the trunk final
// layernorm runs on the loss stage; the embedding group is {first stage, last stage} (the last
// stage's embedding copy feeds the MTP depths, and the head when embeddings are tied); only
// [s, b, H] crosses the pipeline.
#pragma once

#include <memory>

#include "harness/engine/chunk.h"

namespace mtp::reference {

/// The reference implementation. check_layout() rejects standalone layouts with an InputError
/// that names the layout and the MTP stage.
std::unique_ptr<engine::Implementation> make_reference();

}  // namespace mtp::reference
