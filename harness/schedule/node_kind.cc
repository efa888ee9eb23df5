#include "harness/schedule/node_kind.h"

namespace mtp::schedule {

const char* node_kind_name(NodeKind kind) {
  switch (kind) {
    case NodeKind::kPreProcess:
      return "pre_process";
    case NodeKind::kAttention:
      return "attn";
    case NodeKind::kDispatch:
      return "dispatch";
    case NodeKind::kMlp:
      return "mlp";
    case NodeKind::kCombine:
      return "combine";
    case NodeKind::kMtpPost:
      return "mtp_post";
    case NodeKind::kFinalLayernorm:
      return "final_layernorm";
    case NodeKind::kPostProcess:
      return "post_process";
  }
  return "?";
}

}  // namespace mtp::schedule
