"""``--redirect-cuda``: point a CUDA-written script at the backend it runs on.

Explicit and logged: every entry of ``TABLE`` says what a CUDA call becomes
(an equivalent on the target, a harmless no-op, or unsupported, which ends
the run with the reason), and every redirect that fires is recorded with the
user's file:line and a count.  Only the entry points are wrapped (no
``TorchFunctionMode``): a mode would add Python work to every op of every
step and change the timing being measured.
"""
from __future__ import annotations

import os
import traceback
from collections import Counter
from dataclasses import dataclass
from typing import Any
from collections.abc import Callable

from torchport.errors import UserError

EQUIVALENT, NO_OP, UNSUPPORTED = "equivalent", "no-op", "unsupported"


@dataclass(frozen=True)
class Entry:
    call: str  # the CUDA-specific call, as the script writes it
    becomes: str  # EQUIVALENT, NO_OP or UNSUPPORTED
    note: str  # what it does instead, or why it cannot


TABLE = (
    Entry("device strings 'cuda', 'cuda:N' and torch.device('cuda...') in .to(), .cuda() and factory functions",
          EQUIVALENT, "the backend's device"),
    Entry("Tensor.cuda() / Module.cuda()", EQUIVALENT, ".to(the backend's device)"),
    Entry("Tensor.pin_memory()", NO_OP, "returns the tensor (pinned host memory is a CUDA transfer optimisation)"),
    Entry("torch.cuda.is_available()", EQUIVALENT, "True: the script takes its accelerator path, which is redirected"),
    Entry("torch.cuda.device_count()", EQUIVALENT, "1"),
    Entry("torch.cuda.current_device()", EQUIVALENT, "0"),
    Entry("torch.cuda.get_device_name()", EQUIVALENT, "the backend's name"),
    Entry("torch.cuda.set_device()", NO_OP, "one device per process"),
    Entry("torch.cuda.synchronize()", EQUIVALENT, "the backend's own synchronize"),
    Entry("torch.cuda.manual_seed() / manual_seed_all()", NO_OP, "torch.manual_seed already seeds every device"),
    Entry("torch.cuda.empty_cache()", NO_OP, "nothing to release"),
    Entry("torch.cuda.memory_allocated() / max_memory_allocated() / reset_peak_memory_stats()", EQUIVALENT,
          "0 / no-op (torchport records memory itself)"),
    Entry("torch.cuda.is_bf16_supported()", EQUIVALENT, "True"),
    Entry("torch.cuda.amp.autocast(...) / torch.autocast('cuda', ...)", EQUIVALENT,
          "autocast on the backend's device type (bfloat16 on the CPU)"),
    Entry("torch.cuda.amp.GradScaler(...) / torch.amp.GradScaler('cuda', ...)", EQUIVALENT,
          "a disabled GradScaler: loss scaling is for float16, and autocast off CUDA uses bfloat16"),
    Entry("torch.distributed.init_process_group('nccl')", EQUIVALENT, "the backend's process group (gloo on the CPU)"),
    Entry("DistributedDataParallel(..., device_ids=[N]) of a model not on CUDA", EQUIVALENT,
          "device_ids=None, as DDP requires for CPU (and other non-CUDA) modules"),
    Entry("torch.cuda.Stream / Event / stream()", UNSUPPORTED, "no stream or event model to map to on this backend"),
)

_FACTORIES = ("tensor", "as_tensor", "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm", "arange",
              "linspace", "eye", "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like")


def _is_cuda(value: Any) -> bool:
    import torch

    if isinstance(value, str):
        return value == "cuda" or value.startswith("cuda:")
    return isinstance(value, torch.device) and value.type == "cuda"


class Redirects:
    """The redirects of one run: installed into torch, undone after."""

    def __init__(self, backend: Any, script: str):
        self.backend = backend
        self.script = script
        self.counts: Counter[tuple[str, str | None]] = Counter()
        self._restore: list[tuple[Any, str, Any]] = []

    def _fire(self, entry: str) -> None:
        where = _user_line()
        if where is not None:
            self.counts[(entry, where)] += 1

    def _patch(self, owner: Any, name: str, replacement: Any) -> None:
        if hasattr(owner, name):
            self._restore.append((owner, name, getattr(owner, name)))
        setattr(owner, name, replacement)

    def uninstall(self) -> None:
        for owner, name, original in reversed(self._restore):
            setattr(owner, name, original)

    def fired(self) -> list[dict[str, Any]]:
        return [{"call": call, "location": where, "count": count} for (call, where), count in sorted(
            self.counts.items(), key=lambda item: (str(item[0][1]), item[0][0]))]

    def _device(self, value: Any) -> Any:
        if _is_cuda(value):
            self._fire(TABLE[0].call.split(" in ")[0])
            return self.backend.device
        return value

    def _rewrite(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        args = tuple(self._device(a) for a in args)
        if "device" in kwargs:
            kwargs = {**kwargs, "device": self._device(kwargs["device"])}
        return args, kwargs

    def install(self) -> None:
        import torch
        import torch.distributed as dist

        redirects = self
        device = self.backend.device
        device_type = device.type

        def wrap_to(original: Callable) -> Callable:
            def to(obj, *args, **kwargs):
                args, kwargs = redirects._rewrite(args, kwargs)
                return original(obj, *args, **kwargs)
            return to

        self._patch(torch.Tensor, "to", wrap_to(torch.Tensor.to))
        self._patch(torch.nn.Module, "to", wrap_to(torch.nn.Module.to))

        def tensor_cuda(tensor, *args, **kwargs):
            self._fire("Tensor.cuda() / Module.cuda()")
            return tensor.to(device, non_blocking=bool(kwargs.get("non_blocking", False)))

        def module_cuda(module, *args, **kwargs):
            self._fire("Tensor.cuda() / Module.cuda()")
            return module.to(device)

        self._patch(torch.Tensor, "cuda", tensor_cuda)
        self._patch(torch.nn.Module, "cuda", module_cuda)

        def pin_memory(tensor, *args, **kwargs):
            self._fire("Tensor.pin_memory()")
            return tensor

        self._patch(torch.Tensor, "pin_memory", pin_memory)

        for name in _FACTORIES:
            original = getattr(torch, name, None)
            if original is None:
                continue

            def factory(*args, _original=original, **kwargs):
                if "device" in kwargs:
                    kwargs = {**kwargs, "device": redirects._device(kwargs["device"])}
                return _original(*args, **kwargs)

            self._patch(torch, name, factory)

        def constant(entry: str, value: Any) -> Callable:
            def call(*args, **kwargs):
                self._fire(entry)
                return value
            return call

        cuda = torch.cuda
        self._patch(cuda, "is_available", constant("torch.cuda.is_available()", True))
        self._patch(cuda, "device_count", constant("torch.cuda.device_count()", 1))
        self._patch(cuda, "current_device", constant("torch.cuda.current_device()", 0))
        self._patch(cuda, "get_device_name", constant("torch.cuda.get_device_name()", f"{self.backend.name} (redirected)"))
        self._patch(cuda, "set_device", constant("torch.cuda.set_device()", None))
        self._patch(cuda, "manual_seed", constant("torch.cuda.manual_seed() / manual_seed_all()", None))
        self._patch(cuda, "manual_seed_all", constant("torch.cuda.manual_seed() / manual_seed_all()", None))
        self._patch(cuda, "empty_cache", constant("torch.cuda.empty_cache()", None))
        self._patch(cuda, "is_bf16_supported", constant("torch.cuda.is_bf16_supported()", True))
        memory = "torch.cuda.memory_allocated() / max_memory_allocated() / reset_peak_memory_stats()"
        for name in ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved"):
            self._patch(cuda, name, constant(memory, 0))
        self._patch(cuda, "reset_peak_memory_stats", constant(memory, None))

        def synchronize(*args, **kwargs):
            self._fire("torch.cuda.synchronize()")
            self.backend.synchronize()

        self._patch(cuda, "synchronize", synchronize)

        def unsupported(entry: str) -> Callable:
            def call(*args, **kwargs):
                self._fire(entry)
                raise UserError(f"{entry} has no redirect to {self.backend.name}: no stream or event model there",
                                location=_user_line(), kind="unsupported-op")
            return call

        for name in ("Stream", "Event", "stream"):
            self._patch(cuda, name, unsupported("torch.cuda.Stream / Event / stream()"))

        autocast_entry = "torch.cuda.amp.autocast(...) / torch.autocast('cuda', ...)"
        original_autocast = torch.autocast
        low_precision = torch.bfloat16 if device_type == "cpu" else None

        def autocast(device_type_arg: str = "cuda", *args, **kwargs):
            if device_type_arg == "cuda":
                self._fire(autocast_entry)
                device_type_arg = device_type
                if low_precision is not None and kwargs.get("dtype") in (None, torch.float16):
                    kwargs["dtype"] = low_precision
            return original_autocast(device_type_arg, *args, **kwargs)

        def cuda_amp_autocast(enabled: bool = True, dtype: Any = None, cache_enabled: bool = True):
            return autocast("cuda", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)

        self._patch(torch, "autocast", autocast)
        self._patch(torch.cuda.amp, "autocast", cuda_amp_autocast)

        scaler_entry = "torch.cuda.amp.GradScaler(...) / torch.amp.GradScaler('cuda', ...)"
        original_scaler = torch.amp.GradScaler

        def grad_scaler(device_arg: str = "cuda", *args, **kwargs):
            if device_arg == "cuda":
                self._fire(scaler_entry)
                return original_scaler(device_type, enabled=False)
            return original_scaler(device_arg, *args, **kwargs)

        def cuda_amp_grad_scaler(*args, **kwargs):
            return grad_scaler("cuda")

        self._patch(torch.amp, "GradScaler", grad_scaler)
        self._patch(torch.cuda.amp, "GradScaler", cuda_amp_grad_scaler)

        original_init = dist.init_process_group

        def init_process_group(backend: Any = None, *args, **kwargs):
            if backend == "nccl" or kwargs.get("backend") == "nccl":
                self._fire("torch.distributed.init_process_group('nccl')")
                kwargs.pop("backend", None)
                backend = self.backend.process_group_backend
            return original_init(backend, *args, **kwargs)

        self._patch(dist, "init_process_group", init_process_group)

        from torch.nn.parallel import DistributedDataParallel

        original_ddp_init = DistributedDataParallel.__init__
        ddp_entry = "DistributedDataParallel(..., device_ids=[N]) of a model not on CUDA"

        def ddp_init(wrapper, module, device_ids=None, *args, **kwargs):
            if device_ids is not None and device_type != "cuda":
                self._fire(ddp_entry)
                device_ids = None
                kwargs.pop("output_device", None)
            original_ddp_init(wrapper, module, device_ids, *args, **kwargs)

        self._patch(DistributedDataParallel, "__init__", ddp_init)


def _user_line() -> str | None:
    """file:line of the script's call that reached a redirect, or None when
    the call came from inside torch (``torch.manual_seed`` calling
    ``torch.cuda.manual_seed_all``, say): that is not the script's CUDA use."""
    from torchport.app import is_user_file

    here = os.path.dirname(os.path.abspath(__file__))
    for frame in reversed(traceback.extract_stack()):
        if os.path.dirname(os.path.abspath(frame.filename)) == here:
            continue  # this module's own wrappers
        return f"{frame.filename}:{frame.lineno}" if is_user_file(frame.filename) else None
    return None
