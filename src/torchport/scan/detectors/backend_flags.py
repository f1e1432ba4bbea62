"""TP3xx, backend flags: cuDNN switches, TF32 matmul flags, CUDA attention-kernel
switches.  Reading or setting a flag is the finding, so names are all it matches."""
from __future__ import annotations

import re

from torchport.scan.rules import CUDA_SDP_KERNEL, CUDNN_FLAGS, OTHER_TORCH_CUDA_API, TF32_FLAGS

RULE_IDS = (CUDNN_FLAGS, TF32_FLAGS, CUDA_SDP_KERNEL, OTHER_TORCH_CUDA_API)

_SDP = re.compile(r"(sdp_kernel|enable_\w+_sdp|\w+_sdp_enabled|SDPBackend)\Z")


def rule_for_name(qualname: str) -> str | None:
    if qualname.startswith("torch.backends.cudnn."):
        return TF32_FLAGS if qualname.endswith("allow_tf32") else CUDNN_FLAGS
    if qualname.startswith("torch.backends.cuda."):
        if qualname.startswith("torch.backends.cuda.matmul."):
            return TF32_FLAGS
        return CUDA_SDP_KERNEL if _SDP.search(qualname) else OTHER_TORCH_CUDA_API
    return None
