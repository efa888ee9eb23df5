#include "candidate/candidate.h"

#include "harness/engine/standalone_chunk.h"

namespace mtp::candidate {

// The standalone family's stages (engine/standalone_chunk.h) on layouts whose `m` all sit in one
// stage (R7): embedding copies on the first stage, the MTP stage and (tied) the loss stage; FLN
// with decoder layer N; from the MTP stage on every stage sends [(1+D)·s, b, H].
std::unique_ptr<engine::Implementation> make_candidate() {
  return engine::make_standalone_implementation(config::Implementation::kCandidate);
}

}  // namespace mtp::candidate
