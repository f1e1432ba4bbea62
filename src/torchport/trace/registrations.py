"""Read PyTorch's own kernel registrations: which ops a dispatch key serves.

This is how torchport decides op support without guessing: an op runs natively
on a target when the target's dispatch key (``XLA``, ``CUDA``, ``MPS``,
``PrivateUse1``) has a kernel for it, and it runs by decomposition when a
``CompositeExplicitAutograd`` / ``CompositeImplicitAutograd`` kernel exists.

Runs in three places, so it imports only the standard library at module level
and needs nothing of torchport:

* in the parent, for the torch torchport itself runs on (CUDA, ROCm, MPS builds);
* as ``python -m torchport.trace.registrations`` in another interpreter (the
  xla environment, or one with ``torch_tpu`` / ``torch-neuronx`` installed),
  answering with one JSON document on stdout;
* from ``tools/gen_op_support.py``, which writes the shipped tables.

On torch_xla it also runs a few real ops on an XLA device (``PJRT_DEVICE=CPU``
works anywhere) and reads torch_xla's own list of executed CPU fallbacks:
some ops have an XLA kernel that still falls back (``nonzero``, boolean-mask
indexing, ``.item()``), which the registrations alone would not show.
"""
from __future__ import annotations

import datetime as _dt
import json
import sys
from typing import Any

COMPOSITE_EXPLICIT = ("CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")
COMPOSITE_IMPLICIT = ("CompositeImplicitAutograd",)

# Small real programs for the ops whose XLA support depends on their inputs;
# each runs on an XLA device and torch_xla reports which ops fell back to the
# CPU.  The key is how the tracer names the situation (see tracer.op_variant).
XLA_PROBES = {
    "aten::nonzero": "torch.nonzero(x)",
    "aten::masked_select": "torch.masked_select(x, x > 0)",
    "aten::index.Tensor[bool]": "x[x > 0]",
    "aten::_unique2": "torch.unique(i)",
    "aten::unique_dim": "torch.unique(x, dim=0)",
    "aten::unique_consecutive": "torch.unique_consecutive(i)",
    "aten::repeat_interleave.Tensor": "torch.repeat_interleave(i, i)",
    "aten::bincount": "torch.bincount(i)",
    "aten::_local_scalar_dense": "x.sum().item()",
    "aten::equal": "torch.equal(x, x)",
    "aten::allclose": "torch.allclose(x, x)",
    "aten::argwhere": "torch.argwhere(x)",
    "aten::histc": "torch.histc(x)",
}


def kernels(op_names: list[str], keys: list[str]) -> dict[str, Any]:
    """For each op: whether this torch knows it, and which of ``keys`` (plus
    the composite keys) have a kernel for it."""
    import torch

    known = set(torch._C._dispatch_get_all_op_names())
    answer: dict[str, Any] = {}
    for name in op_names:
        if name not in known:
            answer[name] = {"exists": False, "kernels": []}
            continue
        found = [key for key in (*keys, *COMPOSITE_EXPLICIT, *COMPOSITE_IMPLICIT) if _has_kernel(torch, name, key)]
        answer[name] = {"exists": True, "kernels": found}
    return answer


def _has_kernel(torch: Any, name: str, key: str) -> bool:
    try:
        return bool(torch._C._dispatch_has_kernel_for_dispatch_key(name, key))
    except RuntimeError:  # a key this torch build does not know
        return False


def table(key: str) -> dict[str, list[str]]:
    """Every op this torch knows, sorted into native / composite / none for ``key``."""
    import torch

    names = sorted(torch._C._dispatch_get_all_op_names())
    sorted_ops: dict[str, list[str]] = {"native": [], "composite_explicit": [], "composite_implicit": [],
                                        "without_kernel": []}
    # An op with its own autograd kernel for the target never dispatches the
    # backward ops PyTorch's generic autograd would (native_layer_norm on XLA).
    sorted_ops["autograd_overrides"] = [name for name in names if _has_kernel(torch, name, f"Autograd{key}")]
    for name in names:
        if _has_kernel(torch, name, key):
            sorted_ops["native"].append(name)
        elif any(_has_kernel(torch, name, k) for k in COMPOSITE_EXPLICIT):
            sorted_ops["composite_explicit"].append(name)
        elif any(_has_kernel(torch, name, k) for k in COMPOSITE_IMPLICIT):
            sorted_ops["composite_implicit"].append(name)
        else:
            sorted_ops["without_kernel"].append(name)
    return sorted_ops


def xla_probe_fallbacks() -> dict[str, list[str]]:
    """Run each probe on an XLA device; return the CPU fallbacks torch_xla executed."""
    import torch
    import torch_xla

    import torch_xla.debug.metrics as metrics

    device = torch_xla.device()
    namespace = {
        "torch": torch,
        "x": torch.tensor([[1.0, -2.0], [0.0, 3.0], [1.0, -2.0]], device=device),
        "i": torch.tensor([0, 1, 1, 3], device=device),
    }
    found: dict[str, list[str]] = {}
    for situation, code in XLA_PROBES.items():
        torch_xla.sync()
        metrics.clear_all()
        try:
            result = eval(code, namespace)  # noqa: S307 - fixed probe programs above
            torch_xla.sync()
            if isinstance(result, torch.Tensor):
                result.cpu()
            found[situation] = sorted(metrics.executed_fallback_ops())
        except Exception as exc:  # the op itself fails on XLA: record that, do not guess
            found[situation] = [f"error: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"]
    return found


def versions() -> dict[str, str]:
    import torch

    found = {"torch": torch.__version__}
    for module in ("torch_xla", "torch_tpu", "torch_neuronx"):
        if module in sys.modules:
            found[module] = getattr(sys.modules[module], "__version__", "unknown")
    return found


def main(argv: list[str]) -> int:
    """``python -m torchport.trace.registrations REQUEST.json``: REQUEST holds
    ``key``, ``imports`` (modules that register the backend), and either
    ``ops`` (answer for these) or ``"table": true`` (every op); ``xla_probes``
    adds the probe run."""
    with open(argv[0], encoding="utf-8") as handle:
        request = json.load(handle)
    import importlib

    for module in request.get("imports", []):
        importlib.import_module(module)
    answer: dict[str, Any] = {
        "key": request["key"],
        "versions": versions(),
        "retrieved": _dt.date.today().isoformat(),
    }
    if request.get("table"):
        answer["table"] = table(request["key"])
    if request.get("ops") is not None:
        answer["ops"] = kernels(request["ops"], [request["key"]])
    if request.get("xla_probes"):
        answer["conditional_fallbacks"] = xla_probe_fallbacks()
    answer["versions"] = versions()
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
