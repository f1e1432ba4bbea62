"""TP3xx, backend flags: cuDNN switches, TF32 matmul flags, CUDA attention-kernel
switches (reading or setting a flag is the finding, so names are all these match),
and a compile backend pinned to inductor."""
from __future__ import annotations

import ast
import re

from torchport.scan.detectors.state import AnalyzerState
from torchport.scan.detectors.syntax import node_end, node_start, string_value
from torchport.scan.model import Edit
from torchport.scan.rules import (
    CUDA_SDP_KERNEL,
    CUDNN_FLAGS,
    INDUCTOR_COMPILE_BACKEND,
    OTHER_TORCH_CUDA_API,
    TF32_FLAGS,
)

RULE_IDS = (CUDNN_FLAGS, TF32_FLAGS, CUDA_SDP_KERNEL, INDUCTOR_COMPILE_BACKEND, OTHER_TORCH_CUDA_API)

_SDP = re.compile(r"(sdp_kernel|enable_\w+_sdp|\w+_sdp_enabled|SDPBackend)\Z")


def rule_for_name(qualname: str) -> str | None:
    if qualname.startswith("torch.backends.cudnn."):
        return TF32_FLAGS if qualname.endswith("allow_tf32") else CUDNN_FLAGS
    if qualname.startswith("torch.backends.cuda."):
        if qualname.startswith("torch.backends.cuda.matmul."):
            return TF32_FLAGS
        return CUDA_SDP_KERNEL if _SDP.search(qualname) else OTHER_TORCH_CUDA_API
    return None


class BackendFlagDetector(AnalyzerState):
    CALLS = {"torch.compile": "_compile_backend"}
    # No shared trigger word (cuda, nccl, ...) appears in `torch.compile(m, backend="inductor")`.
    TRIGGER_WORDS = ("inductor",)

    def _compile_backend(self, node: ast.Call, qualname: str) -> bool:
        for index, kw in enumerate(node.keywords):
            if kw.arg == "backend" and string_value(kw.value) == "inductor":
                self.report(INDUCTOR_COMPILE_BACKEND, kw, 'backend="inductor"',
                            [_without_keyword(node, index)] if _one_line(node) else None)
        return False


def _one_line(node: ast.Call) -> bool:
    return node.lineno == node.end_lineno


def _without_keyword(node: ast.Call, index: int) -> Edit:
    """Removes the keyword with its separating comma: from the end of the argument
    before it, else up to the start of the argument after it."""
    keyword = node.keywords[index]
    items: list[ast.expr | ast.keyword] = sorted([*node.args, *node.keywords], key=node_start)
    position = items.index(keyword)
    if position > 0:
        return Edit(node_end(items[position - 1]), node_end(keyword), "")
    if len(items) > 1:
        return Edit(node_start(keyword), node_start(items[1]), "")
    return Edit(node_start(keyword), node_end(keyword), "")
