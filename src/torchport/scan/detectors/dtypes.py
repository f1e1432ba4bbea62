"""TP7xx, dtypes: float64 tensors on the accelerator.  Most of this family is telling
host-side float64 (fine everywhere) from device-side float64: ``self.host`` holds the
nodes known to run on the host, filled as calls are visited."""
from __future__ import annotations

import ast

from torchport.scan.detectors.state import AnalyzerState
from torchport.scan.detectors.syntax import keyword_value, last_name, method_token, parameter_defaults, string_value, walk_nodes
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


_DEFAULT_ONLY = ("default only: the float64 {} is used only where tensors are made without a device "
                 "(on the CPU) or handed to another function")

# Tensor methods whose dtype argument keeps the tensor where it is (on the accelerator).
_IN_PLACE_DTYPE = {"to", "type", "new_zeros", "new_ones", "new_empty", "new_full", "new_tensor"}


def rule_for_name(qualname: str) -> str | None:
    return FLOAT64 if qualname in _FLOAT64 else None


def _numpy_name(node) -> str:
    """``np.float64`` -> "numpy.float64" (numpy's import is not resolved: torch names are)."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("np", "numpy"):
        return f"numpy.{node.attr}"
    return ""


def _makes_on_host(call: ast.Call) -> bool:
    """A call given a dtype that makes no accelerator tensor of it: no ``device``, not a
    tensor's own method, not a ``*_like`` factory (which follows its input's device)."""
    func = call.func
    name = last_name(func)
    device = keyword_value(call, "device")
    on_host = device is None or _cpu_device(device)
    return on_host and name not in _IN_PLACE_DTYPE and not name.endswith("_like") and name != "cuda"


def _cpu_device(node) -> bool:
    """``"cpu"`` or ``torch.device("cpu")``."""
    if isinstance(node, ast.Call) and node.args and getattr(node.func, "attr", getattr(node.func, "id", "")) == "device":
        node = node.args[0]
    return string_value(node) == "cpu"


def _method_chain_on(node, name: str) -> bool:
    """``w.double()``, ``w.float().abs()``: methods called on the name itself."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        node = node.func.value
    return isinstance(node, ast.Name) and node.id == name and not isinstance(node, ast.Call)


def _moves_nothing(node) -> bool:
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr in ("cuda", "pin_memory") or (node.func.attr in ("to", "type") and (node.args or node.keywords)
                                                        and not _dtype_only(node)):
            return False
        node = node.func.value
    return True


def _dtype_only(call: ast.Call) -> bool:
    """``.to(torch.float64)``: a dtype given, no device."""
    return (not call.keywords and len(call.args) == 1 and isinstance(call.args[0], ast.Attribute)
            and isinstance(call.args[0].value, ast.Name) and call.args[0].value.id == "torch")


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

    def _cap_host_dtype_defaults(self, function, findings) -> None:
        """``def __init__(self, bounds, dtype=torch.double)`` that makes
        ``torch.tensor(bounds, dtype=dtype)`` (no device: the CPU) or hands ``dtype`` on:
        the default puts no float64 on an accelerator.  Kept where the parameter reaches a
        call with a device, a tensor's own ``.to()``/``.new_*()`` or a ``*_like`` factory."""
        defaults = [(a.arg, d) for a, d in parameter_defaults(function.args) if self.qualname(d) in _FLOAT64]
        whole = self.whole_function(function) if defaults else None
        if whole is None:
            return
        for name, default in defaults:
            if self._dtype_only_on_host(whole, name):
                last = default.end_lineno or default.lineno
                self._cap([f for f in findings if f.rule_id == FLOAT64 and default.lineno <= f.line <= last],
                          _DEFAULT_ONLY.format(f"default of {name}"))

    def _dtype_only_on_host(self, function, name: str) -> bool:
        uses = [n for statement in function.body for n in walk_nodes(statement)
                if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]
        handed: set[int] = set()
        for statement in function.body:
            for node in walk_nodes(statement):
                if isinstance(node, ast.Call):
                    moved = node.func.value if isinstance(node.func, ast.Attribute) and node.func.attr in (
                        "to", "cuda") and (node.args or node.keywords) else None
                    if isinstance(moved, ast.Call) and any(isinstance(n, ast.Name) and n.id == name
                                                           for n in walk_nodes(moved)):
                        return False  # `torch.zeros(3, dtype=dtype).to(device)`
                    passed = [a for a in (*node.args, *(k.value for k in node.keywords))
                              if isinstance(a, ast.Name) and a.id == name]
                    if passed and not _makes_on_host(node):
                        return False
                    handed.update(map(id, passed))
                elif (isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id == name
                      and all(isinstance(t, ast.Attribute) for t in node.targets)):
                    # `self.dtype = dtype`: every call given `self.dtype` in the file must be host-side too
                    attributes = {t.attr for t in node.targets if isinstance(t, ast.Attribute)}
                    if not all(_makes_on_host(call) for calls in (self._calls or {}).values() for call in calls
                               if any(isinstance(a, ast.Attribute) and a.attr in attributes
                                      for a in (*call.args, *(k.value for k in call.keywords)))):
                        return False
                    handed.add(id(node.value))
        return all(id(use) in handed for use in uses)

    def dtype_collection(self, node) -> None:
        """``[torch.float32, torch.float64]``: a list of dtypes (accepted, supported) makes
        no tensor; nor does ``(torch.float64, np.float64)``, a row of a dtype table."""
        names = [self.qualname(element) or _numpy_name(element) for element in node.elts]
        if len(names) > 1 and all(name.startswith(("torch.", "numpy.")) and name.count(".") == 1
                                  for name in names) and any(name in _FLOAT64 for name in names):
            self.host.update(map(id, walk_nodes(node)))

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
            self.host.update(map(id, walk_nodes(node)))  # facts about a dtype: no tensor is made
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
            self.host.update(map(id, walk_nodes(node)))
        elif method in _HOST_METHODS and receiver is not None:
            self.host.update(map(id, walk_nodes(receiver)))
        elif (method and isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute)
              and receiver.func.attr == "cpu"):
            self.host.update(map(id, walk_nodes(node)))  # x.cpu().double()

    def _host_rebound(self, name: str, seen: frozenset) -> bool:
        """``w = torch.from_numpy(a)`` then ``w = w.double()``: a name rebound only to
        itself through methods that move nothing, after a host tensor."""
        values = self.bound_values(name)
        if not values or any(v is None or id(v) in seen for v in values):
            return False
        seen = seen | {id(v) for v in values}
        rebound = [v for v in values if _method_chain_on(v, name)]
        others = [v for v in values if not _method_chain_on(v, name)]
        return bool(others) and all(self._host_tensor(v, seen) for v in others) and all(
            _moves_nothing(v) for v in rebound)

    def _host_tensor(self, node, seen: frozenset = frozenset()) -> bool:
        """Whether ``node`` is a tensor made on the host, followed through arithmetic,
        method calls and names assigned once: ``x = torch.arange(n, dtype=...)`` (no
        device), then ``d = (x - c).abs()``.  Arithmetic between a host tensor and an
        accelerator tensor fails in torch, so one host operand places the result."""
        if id(node) in self.host and isinstance(node, ast.Call):
            return True
        factory = self.qualname(node.func) if isinstance(node, ast.Call) else None
        if factory in _FACTORIES and keyword_value(node, "device") is None and not factory.endswith("_like"):
            return True  # `torch.from_numpy(weights)`: made on the host
        if isinstance(node, ast.Call) and _numpy_name(node.func):
            return True  # `np.array(weights)`: a NumPy array lives on the host
        if isinstance(node, ast.Call) and any(k.arg in ("map_location", "device") and _cpu_device(k.value)
                                              for k in node.keywords):
            return True  # `torch.load(path, map_location="cpu")`: loaded onto the host
        if isinstance(node, ast.Name):
            if node.id in self.host_names.get(self.scopes[-1], ()):
                return True
            value = self.resolve(node)
            if value is None:
                return self._host_rebound(node.id, seen)
            return id(value) not in seen and self._host_tensor(value, seen | {id(value)})
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
