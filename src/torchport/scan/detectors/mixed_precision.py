"""TP2xx, mixed precision: CUDA autocast, a GradScaler bound to CUDA,
``torch.cuda.amp.custom_fwd`` / ``custom_bwd``."""
from __future__ import annotations

import ast

from torchport.scan.detectors.shared import CUDA_DEVICE, DEVICE_NAME
from torchport.scan.detectors.state import AnalyzerState
from torchport.scan.detectors.syntax import (
    call_argument,
    closing_paren,
    insert_at,
    node_end,
    node_start,
    plain_call,
    replace_node,
    string_value,
)
from torchport.scan.model import Edit
from torchport.scan.rules import CUDA_AUTOCAST, CUDA_CUSTOM_FWD, CUDA_GRAD_SCALER

RULE_IDS = (CUDA_AUTOCAST, CUDA_GRAD_SCALER, CUDA_CUSTOM_FWD)

# torch.cuda.amp.X -> rule; any other torch.cuda.amp name is autocast's.
AMP_NAMES = {"autocast": CUDA_AUTOCAST, "GradScaler": CUDA_GRAD_SCALER, "custom_fwd": CUDA_CUSTOM_FWD,
             "custom_bwd": CUDA_CUSTOM_FWD}
AMP_DEFAULT = CUDA_AUTOCAST

_AUTOCAST = {"torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast"}
_GRAD_SCALER = {"torch.amp.GradScaler", "torch.GradScaler", "torch.amp.grad_scaler.GradScaler"}
_DISABLED_SCALER = ("GradScaler(enabled=False) scales nothing: scale() returns the loss as it is and step() "
                    "calls the optimizer, on every device")


class MixedPrecisionDetector(AnalyzerState):
    CALLS = {**dict.fromkeys(_AUTOCAST, "_autocast"), **dict.fromkeys(_GRAD_SCALER, "_grad_scaler")}

    def _cuda_amp_autocast(self, node: ast.Call, qualname: str) -> bool:
        edits = None
        device, uses_device = self.device_type_expression(node)
        if plain_call(node) and len(node.args) <= 3:
            edits = [replace_node(node.func, f"{self.T}.amp.autocast")]
            # torch.cuda.amp.autocast(enabled, dtype, cache_enabled): positional
            # arguments become keywords after the new device_type argument.
            for keyword, argument in zip(("enabled", "dtype", "cache_enabled"), node.args):
                prefix = f"{device}, " if argument is node.args[0] else ""
                edits.append(insert_at(node_start(argument), f"{prefix}{keyword}="))
            has_dtype = len(node.args) >= 2 or any(kw.arg == "dtype" for kw in node.keywords)
            if not node.args and node.keywords:
                edits.append(insert_at(node_start(node.keywords[0]), f"{device}, "))
            dtype = "" if has_dtype else f"dtype={self.T}.float16"
            items = node.args + node.keywords
            if not items:
                edits.append(insert_at(closing_paren(node), f"{device}, {dtype}"))
            elif dtype:
                edits.append(insert_at(max(node_end(i) for i in items), f", {dtype}"))
        finding = self.report(CUDA_AUTOCAST, node, f"{qualname}()", edits, "2.4", uses_device=uses_device)
        self._disabling(finding, call_argument(node, 0, "enabled"))
        return True

    def _disabling(self, finding, enabled, reason: str = "autocast(enabled=False) only turns mixed precision off "
                                                            "for a region") -> None:
        """``autocast("cuda", enabled=False)`` turns mixed precision off for a region, and
        ``GradScaler(enabled=False)`` scales nothing: off CUDA nothing was turned on by either, so
        nothing differs silently."""
        if finding is not None and isinstance(enabled, ast.Constant) and enabled.value is False:
            self._cap([finding], reason)

    def _cuda_amp_grad_scaler(self, node: ast.Call, qualname: str) -> bool:
        device_type, uses_device = self.device_type_expression(node)
        edits: list[Edit] | None = [replace_node(node.func, f"{self.T}.amp.GradScaler"),
                                    self._first_argument(node, device_type)]
        finding = self.report(CUDA_GRAD_SCALER, node, f"{qualname}()", edits, "2.4", uses_device=uses_device)
        # torch.cuda.amp.GradScaler(init_scale, growth_factor, backoff_factor, growth_interval, enabled)
        self._disabling(finding, call_argument(node, 4, "enabled"), _DISABLED_SCALER)
        return True

    def _autocast(self, node: ast.Call, qualname: str) -> bool:
        device = call_argument(node, 0, "device_type")
        value = self.constant_value(device)
        if value != "cuda" and not (value and CUDA_DEVICE.match(value)):  # torchport: ignore
            return False
        has_dtype = call_argument(node, 1, "dtype") is not None
        edits = []
        if string_value(device) is not None:
            edits.append(replace_node(device, f"{DEVICE_NAME}.type"))
            self.claimed.add(id(device))
        if not has_dtype:
            last = max(node_end(i) for i in node.args + node.keywords)
            edits.append(insert_at(last, f", dtype={self.T}.float16"))
        fixable = value == "cuda" and plain_call(node)  # torchport: ignore
        finding = self.report(CUDA_AUTOCAST, node, f'autocast("{value}")', edits if fixable else None, "2.4",
                              uses_device=bool(edits))
        self._disabling(finding, call_argument(node, 2, "enabled"))
        return True

    def _grad_scaler(self, node: ast.Call, qualname: str) -> bool:
        device = call_argument(node, 0, "device")
        value = self.constant_value(device) if device is not None else None
        if device is not None and (value is None or not CUDA_DEVICE.match(value)):
            return False
        uses_device = True
        if device is None:
            device_type, uses_device = self.device_type_expression(node)
            edits = [self._first_argument(node, device_type)]
            detail = "GradScaler() defaults to device 'cuda'"
        elif string_value(device) is not None:
            device_type, uses_device = self.device_type_expression(node)
            edits = [replace_node(device, device_type)]
            detail = f'GradScaler("{value}")'
            self.claimed.add(id(device))
        else:
            edits, detail = [], f'GradScaler({device.id}="{value}")'
        finding = self.report(CUDA_GRAD_SCALER, node, detail, edits if plain_call(node) else None, "2.4",
                              uses_device=uses_device)
        # torch.amp.GradScaler(device, init_scale, growth_factor, backoff_factor, growth_interval, enabled)
        self._disabling(finding, call_argument(node, 5, "enabled"), _DISABLED_SCALER)
        return True
