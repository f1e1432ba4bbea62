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

For TorchTPU (PrivateUse1) it reads the dispatcher's *computed* table
(``torch._C._dispatch_dump_table``): what actually runs for PrivateUse1, a
torch_tpu kernel, a composite, or torch_tpu's backend fallback, which the
registration lists alone do not say (``aten::mm`` has no PrivateUse1 kernel of
its own: its composite calls ``aten::mm.out``, which has one).  Nothing there
starts the TPU runtime: importing torch_tpu on a machine without a TPU loads
libtpu's PJRT entry points but initializes no device (``torch_tpu._loader.load``
initializes only when its PCI/VFIO scan finds a chip), and the answer says so.

On torch_xla it also runs a few real ops on an XLA device (``PJRT_DEVICE=CPU``
works anywhere) and reads torch_xla's own list of executed CPU fallbacks:
some ops have an XLA kernel that still falls back (``nonzero``, boolean-mask
indexing, ``.item()``), which the registrations alone would not show.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import re
import sys
from typing import Any, NotRequired, Required, TypedDict, cast

from torchport.records import OpKernels


class RegistrationRequest(TypedDict, total=False):
    """What ``python -m torchport.trace.registrations REQUEST.json`` is asked (see :func:`main`)."""

    key: Required[str]
    imports: list[str]
    ops: list[str]
    table: bool
    resolved_table: bool
    xla_probes: bool


class OpKernelsJson(TypedDict):
    exists: bool
    kernels: list[str]


class ResolvedTable(TypedDict):
    """Every op, sorted by what the dispatcher runs for a key (the op-table documents' groups)."""

    native: list[str]
    composite_explicit: list[str]
    composite_implicit: list[str]
    without_kernel: list[str]
    autograd_overrides: list[str]
    structured_delegates: dict[str, str]
    registered_namespaces: list[str]


class DispatchFallback(TypedDict, total=False):
    registered: Required[bool]
    registered_at: str
    cpu_fallback_enabled: bool
    switch: str
    messages_in_binary: dict[str, str | bool]  # the binary's path, and each message: found in it or not


class RuntimeState(TypedDict, total=False):
    privateuse1_name: Required[str]
    torch_tpu_loaded: bool
    torch_tpu_device_initialized: bool


class RegistrationAnswer(TypedDict):
    """What :func:`main` prints (one JSON line)."""

    key: str
    versions: dict[str, str]
    retrieved: str
    table: NotRequired[ResolvedTable | dict[str, list[str]]]
    fallback: NotRequired[DispatchFallback]
    ops: NotRequired[dict[str, OpKernelsJson]]
    conditional_fallbacks: NotRequired[dict[str, list[str]]]
    runtime: NotRequired[RuntimeState]

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


def kernels(op_names: list[str], keys: list[str]) -> dict[str, OpKernels]:
    """For each op: whether this torch knows it, and which of ``keys`` (plus
    the composite keys) have a kernel for it."""
    import torch

    known = set(torch._C._dispatch_get_all_op_names())
    answer: dict[str, OpKernels] = {}
    for name in op_names:
        if name not in known:
            answer[name] = OpKernels(exists=False, kernels=[])
            continue
        found = [key for key in (*keys, *COMPOSITE_EXPLICIT, *COMPOSITE_IMPLICIT) if _has_kernel(torch, name, key)]
        answer[name] = OpKernels(exists=True, kernels=found)
    return answer


def _has_kernel(torch: Any, name: str, key: str) -> bool:
    try:
        return bool(torch._C._dispatch_has_kernel_for_dispatch_key(name, key))
    except RuntimeError:  # a key this torch build does not know
        return False


# Tensors of these kinds dispatch to their own key for a device (SparseCUDA for a sparse CUDA tensor):
# kind -> the prefix of that key.  The op tables list the ops with a kernel there, per kind.
LAYOUT_KEY_PREFIXES = {"sparse": "Sparse", "quantized": "Quantized", "nested": "NestedTensor"}


def table(key: str) -> dict[str, list[str]]:
    """Every op this torch knows, sorted into native / composite / none for ``key``."""
    import torch

    names = sorted(torch._C._dispatch_get_all_op_names())
    sorted_ops: dict[str, list[str]] = {"native": [], "composite_explicit": [], "composite_implicit": [],
                                        "without_kernel": []}
    # An op with its own autograd kernel for the target never dispatches the
    # backward ops PyTorch's generic autograd would (native_layer_norm on XLA).
    sorted_ops["autograd_overrides"] = [name for name in names if _has_kernel(torch, name, f"Autograd{key}")]
    for kind, prefix in LAYOUT_KEY_PREFIXES.items():
        sorted_ops[f"{kind}_native"] = [name for name in names if _has_kernel(torch, name, prefix + key)]
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


# How the dispatcher's computed table names what it resolved a key to.
RESOLVED_GROUPS = {"kernel": "native", "default backend kernel": "composite_explicit",
                   "math kernel": "composite_implicit", "backend fallback": "without_kernel"}
# TorchTPU's backend fallback, as found in torch_tpu 0.2.0 (see dispatch_fallback).
TPU_FALLBACK_MESSAGES = ("' is not implemented for TPU. Please file a feature request",
                         "' is not implemented for TPU. Falling back to CPU")


def resolved_entry(torch: Any, name: str, key: str) -> tuple[str, str]:
    """(what runs, where it was registered) for ``name`` on ``key``, from the
    dispatcher's computed dispatch table."""
    for line in torch._C._dispatch_dump_table(name).splitlines():
        if line.startswith(f"{key}:"):
            found = re.search(r"registered (?:at|by) (.+?) \[(.+?)\]$", line)
            if found:
                return found.group(2), found.group(1)
    return "none", ""


def resolved_table(key: str) -> ResolvedTable:
    """Every op this torch knows, sorted by what the dispatcher runs for ``key``
    (native / composite / without a kernel, i.e. the backend fallback), plus
    the kernel the structured composites call (``aten::mm`` -> ``aten::mm.out``)."""
    import torch

    names = sorted(torch._C._dispatch_get_all_op_names())
    groups: dict[str, list[str]] = {"native": [], "composite_explicit": [], "composite_implicit": [],
                                     "without_kernel": []}
    autograd_overrides = [name for name in names if _has_kernel(torch, name, f"Autograd{key}")]
    for name in names:
        kind, _ = resolved_entry(torch, name, key)
        groups[RESOLVED_GROUPS.get(kind, "without_kernel")].append(name)
    composites = set(groups["composite_explicit"])
    namespace = {name.split("::")[0] for name in torch._C._dispatch_get_registrations_for_dispatch_key(key)}
    return ResolvedTable(native=groups["native"], composite_explicit=groups["composite_explicit"],
                         composite_implicit=groups["composite_implicit"], without_kernel=groups["without_kernel"],
                         autograd_overrides=autograd_overrides,
                         structured_delegates={op: delegate for op, delegate in structured_delegates(torch).items()
                                               if op in composites},
                         registered_namespaces=sorted(namespace))


def structured_delegates(torch: Any) -> dict[str, str]:
    """``aten::mm`` -> ``aten::mm.out``: the out= kernel a structured op's
    composite calls, from the native_functions.yaml that ships with torch."""
    import torchgen

    path = os.path.join(os.path.dirname(torchgen.__file__), "packaged/ATen/native/native_functions.yaml")
    delegates: dict[str, str] = {}
    current = None
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            func = re.match(r"- func: ([\w.]+)\(", line)
            if func:
                current = func.group(1)
                continue
            delegate = re.match(r"\s+structured_delegate: ([\w.]+)", line)
            if delegate and current:
                delegates[f"aten::{current}"] = f"aten::{delegate.group(1)}"
    return delegates


def dispatch_fallback(key: str) -> DispatchFallback:
    """What an op without a kernel does on ``key``: whether a backend fallback is
    registered and where; for TorchTPU also whether its CPU fallback is on and
    the messages its fallback prints, found in the torch_tpu binary."""
    import torch

    dispatch_key = getattr(torch._C.DispatchKey, key)
    answer: DispatchFallback = {"registered": bool(torch._C._dispatch_has_backend_fallback(dispatch_key))}
    # Where the fallback was registered, from the first op the dispatcher sends to it.
    for name in sorted(torch._C._dispatch_get_all_op_names()):
        kind, where = resolved_entry(torch, name, key)
        if kind == "backend fallback":
            answer["registered_at"] = where
            break
    if "torch_tpu" in sys.modules:
        from torch_tpu._internal import execution_mode

        # A getter of a static flag in torch_tpu's C++ (IsCpuFallbackEnabled): no device involved.
        answer["cpu_fallback_enabled"] = bool(execution_mode.enable_cpu_fallback)
        answer["switch"] = "torch_tpu._internal.execution_mode.enable_cpu_fallback (internal; default False)"
        answer["messages_in_binary"] = _messages_in(_torch_tpu_glue(torch), TPU_FALLBACK_MESSAGES)
    return answer


def _torch_tpu_glue(torch: Any) -> str:
    import torch_tpu

    version = "_".join(torch.__version__.split("+")[0].split(".")[:2]) + "_0"
    return os.path.join(os.path.dirname(torch_tpu.__file__), "csrc", "common", f"glue_{version}",
                        f"libpywrap_{version}_common.so")


def _messages_in(path: str, messages: tuple[str, ...]) -> dict[str, str | bool]:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        return {"binary": path, "error": str(exc)}
    return {"binary": os.path.join(*path.split(os.sep)[-5:]), **{m: m.encode() in data for m in messages}}


def runtime_state() -> RuntimeState:
    """Evidence that reading the registrations started nothing: torch_tpu's own
    flags (device initialized, backend loaded) and PrivateUse1's name."""
    import torch

    state: RuntimeState = {"privateuse1_name": torch._C._get_privateuse1_backend_name()}
    loader = sys.modules.get("torch_tpu._loader")
    if loader is not None:
        state["torch_tpu_loaded"] = bool(getattr(loader, "_LOADED", None))
        state["torch_tpu_device_initialized"] = bool(getattr(loader, "_DEVICE_INITIALIZED", None))
    return state


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

    found: dict[str, str] = {"torch": torch.__version__}
    from importlib import metadata

    for module, distribution in (("torch_xla", "torch_xla"), ("torch_tpu", "torch_tpu"),
                                 ("torch_neuronx", "torch-neuronx"), ("libtpu", "libtpu")):
        if module in sys.modules or (module == "libtpu" and "torch_tpu" in sys.modules):
            version = getattr(sys.modules.get(module), "__version__", None)
            if version is None:
                try:
                    version = metadata.version(distribution)
                except metadata.PackageNotFoundError:
                    version = "unknown"
            found[module] = version
    return found


def main(argv: list[str]) -> int:
    """``python -m torchport.trace.registrations REQUEST.json``: REQUEST holds
    ``key``, ``imports`` (modules that register the backend), and either
    ``ops`` (answer for these) or ``"table": true`` (every op); ``xla_probes``
    adds the probe run."""
    with open(argv[0], encoding="utf-8") as handle:
        request: RegistrationRequest = json.load(handle)
    import importlib

    for module in request.get("imports", []):
        importlib.import_module(module)
    answer: RegistrationAnswer = {
        "key": request["key"],
        "versions": versions(),
        "retrieved": _dt.date.today().isoformat(),
    }
    if request.get("resolved_table"):
        answer["table"] = resolved_table(request["key"])
        answer["fallback"] = dispatch_fallback(request["key"])
    elif request.get("table"):
        answer["table"] = table(request["key"])
    if request.get("ops") is not None:
        answer["ops"] = {name: cast(OpKernelsJson, found.to_dict())
                         for name, found in kernels(request["ops"], [request["key"]]).items()}
    if request.get("xla_probes"):
        answer["conditional_fallbacks"] = xla_probe_fallbacks()
    answer["versions"] = versions()
    answer["runtime"] = runtime_state()
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
