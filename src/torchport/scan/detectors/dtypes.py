"""TP7xx, dtypes: float64 tensors on the accelerator.  Most of this family is telling
host-side float64 (fine everywhere) from device-side float64: ``self.host`` holds the
nodes known to run on the host, filled as calls are visited."""
from __future__ import annotations

import ast

from torchport.scan.detectors.state import AnalyzerState
from torchport.scan.detectors.syntax import keyword_value, method_token, string_value
from torchport.scan.rules import FLOAT64

RULE_IDS = (FLOAT64,)

_FLOAT64 = {"torch.float64", "torch.double", "torch.complex128", "torch.cdouble",
            "torch.DoubleTensor"}
_HOST_METHODS = {"cpu", "numpy", "tolist", "item"}
# Tensor factories: with a dtype but no device= they create the tensor on the host.
_FACTORIES = {f"torch.{name}" for name in (
    "zeros", "ones", "empty", "full", "arange", "linspace", "logspace", "eye", "tensor", "as_tensor",
    "rand", "randn", "randint", "randperm", "zeros_like", "ones_like", "empty_like", "full_like",
    "from_numpy")}


def rule_for_name(qualname: str) -> str | None:
    return FLOAT64 if qualname in _FLOAT64 else None


def _numpy_name(node) -> str:
    """``np.float64`` -> "numpy.float64" (numpy's import is not resolved: torch names are)."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("np", "numpy"):
        return f"numpy.{node.attr}"
    return ""


class DtypeDetector(AnalyzerState):
    METHODS = {"double": "_dot_double"}
    CALL_OBSERVERS = ("_mark_host",)

    def _dot_double(self, node: ast.Call) -> None:
        if not node.args and not node.keywords and id(node) not in self.host:
            self.report(FLOAT64, node, ".double()", at=method_token(node))

    def _keeps_float64(self, node: ast.IfExp) -> bool:
        """``torch.float64 if x.dtype == torch.float64 else torch.float32``: float64 only
        where the caller already uses it; this line introduces none."""
        test, float64 = node.test, ("torch.float64", "torch.double")
        return (self.qualname(node.body) in float64 and isinstance(test, ast.Compare)
                and isinstance(test.ops[0], (ast.Eq, ast.Is))
                and any(self.qualname(side) in float64 for side in (test.left, *test.comparators)))

    def dtype_collection(self, node) -> None:
        """``[torch.float32, torch.float64]``: a list of dtypes (accepted, supported) makes
        no tensor; nor does ``(torch.float64, np.float64)``, a row of a dtype table."""
        names = [self.qualname(element) or _numpy_name(element) for element in node.elts]
        if len(names) > 1 and all(name.startswith(("torch.", "numpy.")) and name.count(".") == 1
                                  for name in names) and any(name in _FLOAT64 for name in names):
            self.host.update(map(id, ast.walk(node)))

    def _mark_host(self, node: ast.Call) -> None:
        """Float64 on the host is fine everywhere: ``device="cpu"``, ``.to("cpu", ...)``,
        and anything followed by ``.cpu()`` / ``.numpy()`` / ``.tolist()`` / ``.item()``."""
        func = node.func
        method = func.attr if isinstance(func, ast.Attribute) else None
        receiver = func.value if isinstance(func, ast.Attribute) else None  # what a method is called on
        device = keyword_value(node, "device")
        if method == "to" and node.args:
            device = node.args[0]
        if self.qualname(func) in ("torch.finfo", "torch.iinfo"):
            self.host.update(map(id, ast.walk(node)))  # facts about a dtype: no tensor is made
            return
        on_host = string_value(device) == "cpu" or (
            isinstance(device, ast.Call) and self.qualname(device.func) == "torch.device"
            and device.args and string_value(device.args[0]) == "cpu")
        if method in ("to", "cuda") and isinstance(receiver, ast.Call):
            self.moved.add(id(receiver))  # torch.ones(2, dtype=...).to(device): not the host
        if (device is None and keyword_value(node, "dtype") is not None and id(node) not in self.moved
                and self.qualname(func) in _FACTORIES):
            on_host = True  # no device=: the tensor is created on the host
        if method == "to" and device is not None and (self.qualname(device) or "").startswith("torch.") and (
                self.qualname(device) != "torch.device"):
            device = None  # .to(torch.float64): a dtype, not a device
        if not on_host and method in ("to", "double", "type") and device is None:
            # `(positions == positions.min()).to(torch.float64)` where `positions` was made
            # on the host: a dtype change keeps the tensor where it is.
            on_host = self._host_tensor(receiver)
        if on_host:
            self.host.update(map(id, ast.walk(node)))
        elif method in _HOST_METHODS and receiver is not None:
            self.host.update(map(id, ast.walk(receiver)))
        elif (method and isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute)
              and receiver.func.attr == "cpu"):
            self.host.update(map(id, ast.walk(node)))  # x.cpu().double()

    def _host_tensor(self, node, seen: frozenset = frozenset()) -> bool:
        """Whether ``node`` is a tensor made on the host, followed through arithmetic,
        method calls and names assigned once: ``x = torch.arange(n, dtype=...)`` (no
        device), then ``d = (x - c).abs()``.  Arithmetic between a host tensor and an
        accelerator tensor fails in torch, so one host operand places the result."""
        if id(node) in self.host and isinstance(node, ast.Call):
            return True
        if isinstance(node, ast.Name):
            if node.id in self.host_names.get(self.scopes[-1], ()):
                return True
            value = self.resolve(node)
            return value is not None and id(value) not in seen and self._host_tensor(value, seen | {id(value)})
        if isinstance(node, ast.BinOp):
            return self._host_tensor(node.left, seen) or self._host_tensor(node.right, seen)
        if isinstance(node, ast.UnaryOp):
            return self._host_tensor(node.operand, seen)
        if isinstance(node, ast.Compare):
            return any(self._host_tensor(side, seen) for side in (node.left, *node.comparators))
        if isinstance(node, ast.Subscript):
            return self._host_tensor(node.value, seen)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("to", "cuda", "type", "pin_memory") and (node.args or node.func.attr == "cuda"):
                return False  # may move it (a dtype-only .to() was marked above)
            return self._host_tensor(node.func.value, seen)
        return False
