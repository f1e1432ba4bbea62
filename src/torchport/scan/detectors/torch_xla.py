"""TP8xx, torch_xla-era APIs: deprecated torch_xla calls, and torch_xla itself (which
TorchTPU replaces).  "xla" device strings are found with the other device strings
(``devices.py``)."""
from __future__ import annotations

from torchport.scan.detectors.state import AnalyzerState
from torchport.scan.rules import DEPRECATED_TORCH_XLA_API, TORCH_XLA_API

RULE_IDS = (DEPRECATED_TORCH_XLA_API, TORCH_XLA_API)
# Findings that a torch_xla availability check makes harmless.
GUARDED_BY_XLA_CHECK = RULE_IDS


def rule_for_name(qualname: str) -> str | None:
    if qualname in ("torch_xla.core.xla_model.xla_device", "torch_xla.core.xla_model.mark_step"):
        return DEPRECATED_TORCH_XLA_API
    return None


class TorchXlaDetector(AnalyzerState):
    IMPORTS = ("_torch_xla_import",)

    def _torch_xla_import(self, node, module: str) -> bool:
        if module.split(".", 1)[0] != "torch_xla":
            return False
        self.report(TORCH_XLA_API, node, f"import {module}")
        return True
