#include "candidate/split/split.h"

#include "harness/engine/standalone_chunk.h"

namespace mtp::split {

// The standalone family's stages (engine/standalone_chunk.h) on layouts read with
// layout::MtpRule::kSplit (config::mtp_rule(kSplit)): each MTP stage holds its own depths'
// parameters and an embedding copy, receives cat(h0 … h_{a−1}) and sends cat(h0 … h_b).
std::unique_ptr<engine::Implementation> make_split() {
  return engine::make_standalone_implementation(config::Implementation::kSplit);
}

}  // namespace mtp::split
