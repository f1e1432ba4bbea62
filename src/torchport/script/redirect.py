"""``--redirect-cuda``: point a CUDA-written script at the backend it runs on.

Explicit and logged: every entry of ``TABLE`` says what a CUDA call becomes
(an equivalent on the target, a harmless no-op, or unsupported, which ends
the run with the reason), and every redirect that fires is recorded with the
user's file:line and a count.  Only the entry points are wrapped (no
``TorchFunctionMode``): a mode would add Python work to every op of every
step and change the timing being measured.
"""
from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass
from typing import Any
from collections.abc import Callable

from torchport.errors import UserError
from torchport.records import CpuBfloat16, FiredRedirect
from torchport.script import bfloat16

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
          "autocast on the backend's device type, bfloat16 where float16 (or no dtype) was asked; every spelling: "
          "torch.autocast(device_type='cuda'), torch.amp.autocast('cuda'), torch.cuda.amp.autocast()"),
    Entry("torch.cuda.amp.GradScaler(...) / torch.amp.GradScaler('cuda', ...)", EQUIVALENT,
          "a disabled GradScaler: loss scaling is for float16, and autocast off CUDA uses bfloat16; every spelling: "
          "torch.cuda.amp.GradScaler(), torch.amp.GradScaler('cuda' / device='cuda' / no device)"),
    Entry("torch.distributed.init_process_group('nccl')", EQUIVALENT, "the backend's process group (gloo on the CPU)"),
    Entry("DistributedDataParallel(..., device_ids=[N]) of a model not on CUDA", EQUIVALENT,
          "device_ids=None, as DDP requires for CPU (and other non-CUDA) modules"),
    Entry("torch.cuda.Stream / Event / stream()", UNSUPPORTED, "no stream or event model to map to on this backend"),
)

TABLE_AUTOCAST = "torch.cuda.amp.autocast(...) / torch.autocast('cuda', ...)"
TABLE_SCALER = "torch.cuda.amp.GradScaler(...) / torch.amp.GradScaler('cuda', ...)"

_FACTORIES = ("tensor", "as_tensor", "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm", "arange",
              "linspace", "eye", "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like")


def _is_cuda(value: Any) -> bool:
    import torch

    if isinstance(value, str):
        return value == "cuda" or value.startswith("cuda:")
    return isinstance(value, torch.device) and value.type == "cuda"


class Redirects:
    """The redirects of one run: installed into torch, undone after.

    Every redirected entry point answers differently only to a call from the
    user's own frames (``torchport.script.usercode``): torch's internals
    (Adam's capturable check, the DataLoader's pinning thread), and
    libraries, still see the truth, so a script that never mentions CUDA
    runs the same with and without the flag."""

    def __init__(self, backend: Any, script: str):
        from torchport.script import usercode

        usercode.set_script(script)
        self.backend = backend
        self.script = script
        self.counts: Counter[tuple[str, str | None]] = Counter()
        self.becomes: dict[tuple[str, str], str] = {}  # what a redirect at a line ended up as (autocast's dtype)
        self.cpu_bfloat16: CpuBfloat16 | None = None  # looked up once a redirected autocast runs bfloat16 on the CPU
        self._restore: list[tuple[Any, str, Any]] = []

    def _fire(self, entry: str, where: str | None = None) -> bool:
        """Count a redirect at the user's line; False (nothing redirected) for a call from a library."""
        where = where or user_line()
        if where is None:
            return False
        self.counts[(entry, where)] += 1
        return True

    def _patch(self, owner: Any, name: str, replacement: Any) -> None:
        if hasattr(owner, name):
            self._restore.append((owner, name, getattr(owner, name)))
        setattr(owner, name, replacement)

    def uninstall(self) -> None:
        for owner, name, original in reversed(self._restore):
            setattr(owner, name, original)

    def fired(self) -> list[FiredRedirect]:
        return [FiredRedirect(call=call, location=where, count=count, becomes=self.becomes.get((call, str(where))))
                for (call, where), count in sorted(self.counts.items(), key=lambda item: (str(item[0][1]), item[0][0]))]

    def _device(self, value: Any) -> Any:
        if _is_cuda(value) and self._fire(TABLE[0].call.split(" in ")[0]):
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
        from torch.amp.autocast_mode import autocast as autocast_class
        from torch.amp.grad_scaler import GradScaler

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

        original_tensor_cuda, original_module_cuda = torch.Tensor.cuda, torch.nn.Module.cuda

        def tensor_cuda(tensor, *args, **kwargs):
            if not self._fire("Tensor.cuda() / Module.cuda()"):
                return original_tensor_cuda(tensor, *args, **kwargs)
            return tensor.to(device, non_blocking=bool(kwargs.get("non_blocking", False)))

        def module_cuda(module, *args, **kwargs):
            if not self._fire("Tensor.cuda() / Module.cuda()"):
                return original_module_cuda(module, *args, **kwargs)
            return module.to(device)

        self._patch(torch.Tensor, "cuda", tensor_cuda)
        self._patch(torch.nn.Module, "cuda", module_cuda)

        original_pin = torch.Tensor.pin_memory

        def pin_memory(tensor, *args, **kwargs):
            if not self._fire("Tensor.pin_memory()"):
                return original_pin(tensor, *args, **kwargs)
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

        def constant(entry: str, value: Any, original: Callable | None) -> Callable:
            def call(*args, **kwargs):
                if not self._fire(entry) and original is not None:
                    return original(*args, **kwargs)  # torch's own (or a library's) question: the truth
                return value
            return call

        cuda = torch.cuda

        def answer(name: str, entry: str, value: Any) -> None:
            self._patch(cuda, name, constant(entry, value, getattr(cuda, name, None)))

        answer("is_available", "torch.cuda.is_available()", True)
        answer("device_count", "torch.cuda.device_count()", 1)
        answer("current_device", "torch.cuda.current_device()", 0)
        answer("get_device_name", "torch.cuda.get_device_name()", f"{self.backend.name} (redirected)")
        answer("set_device", "torch.cuda.set_device()", None)
        answer("manual_seed", "torch.cuda.manual_seed() / manual_seed_all()", None)
        answer("manual_seed_all", "torch.cuda.manual_seed() / manual_seed_all()", None)
        answer("empty_cache", "torch.cuda.empty_cache()", None)
        answer("is_bf16_supported", "torch.cuda.is_bf16_supported()", True)
        memory = "torch.cuda.memory_allocated() / max_memory_allocated() / reset_peak_memory_stats()"
        for name in ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved"):
            answer(name, memory, 0)
        answer("reset_peak_memory_stats", memory, None)
        original_synchronize = cuda.synchronize

        def synchronize(*args, **kwargs):
            if not self._fire("torch.cuda.synchronize()"):
                return original_synchronize(*args, **kwargs)
            self.backend.synchronize()

        self._patch(cuda, "synchronize", synchronize)

        def unsupported(entry: str, original: Any) -> Callable:
            def call(*args, **kwargs):
                if not self._fire(entry):
                    return original(*args, **kwargs)
                raise UserError(f"{entry} has no redirect to {self.backend.name}: no stream or event model there",
                                location=user_line(), kind="unsupported-op")
            return call

        for name in ("Stream", "Event", "stream"):
            if hasattr(cuda, name):
                self._patch(cuda, name, unsupported("torch.cuda.Stream / Event / stream()", getattr(cuda, name)))

        # Every autocast spelling (torch.autocast(device_type=...), positional, torch.amp.autocast,
        # torch.cuda.amp.autocast) constructs this one class: its __init__ is the one entry point.
        autocast_entry = TABLE_AUTOCAST
        original_autocast_init = autocast_class.__init__
        low_precision = torch.bfloat16
        # Looked up now, not inside the script's first (timed) step where its first autocast opens.
        cpu_bfloat16 = bfloat16.detect() if device_type == "cpu" else None

        def autocast_init(context, *args, **kwargs):
            requested = kwargs.get("device_type", args[0] if args else None)
            where = user_line()
            if requested == "cuda" and where is not None:
                self._fire(autocast_entry, where)
                context._torchport_requested = requested  # what the script asked for, for the run's record
                if "device_type" in kwargs:
                    kwargs["device_type"] = device_type
                else:
                    args = (device_type, *args[1:])
                # float16 autocast is CUDA's; off CUDA, bfloat16 (what the CPU and XLA autocast run)
                if len(args) > 1:
                    if args[1] in (None, torch.float16):
                        args = (args[0], low_precision, *args[2:])
                elif kwargs.get("dtype") in (None, torch.float16):
                    kwargs["dtype"] = low_precision
            original_autocast_init(context, *args, **kwargs)
            if requested == "cuda" and where is not None:
                enabled = getattr(context, "_enabled", True)
                became = (f"autocast('{device_type}', dtype={str(getattr(context, 'fast_dtype', '?')).replace('torch.', '')}), "
                          f"{'enabled' if enabled else 'disabled'}")
                if enabled and cpu_bfloat16 is not None and getattr(context, "fast_dtype", None) == low_precision:
                    # The step times are the emulation's where the CPU lacks bfloat16 instructions: said at the line.
                    self.cpu_bfloat16 = cpu_bfloat16
                    note = bfloat16.emulation_note(cpu_bfloat16)
                    became += f"; {note}" if note else ""
                self.becomes[(autocast_entry, where)] = became

        self._patch(autocast_class, "__init__", autocast_init)

        # Every GradScaler spelling (torch.cuda.amp.GradScaler(...), torch.amp.GradScaler('cuda' or device='cuda'
        # or no device at all, whose default is CUDA) reaches this __init__.
        scaler_entry = TABLE_SCALER
        original_scaler_init = GradScaler.__init__

        def scaler_init(scaler, *args, **kwargs):
            requested = kwargs.get("device", args[0] if args else "cuda")
            where = user_line()
            if requested == "cuda" and where is not None:
                self._fire(scaler_entry, where)
                args = args[1:]
                kwargs.pop("device", None)
                kwargs["enabled"] = False
                if len(args) >= 5:  # enabled given positionally (init_scale, growth, backoff, interval, enabled)
                    args = args[:4]
                original_scaler_init(scaler, device_type, *args, **kwargs)
                self.becomes[(scaler_entry, where)] = (f"GradScaler('{device_type}', enabled=False): no loss scaling "
                                                       "(bfloat16 autocast needs none)")
                return
            original_scaler_init(scaler, *args, **kwargs)

        self._patch(GradScaler, "__init__", scaler_init)

        original_init = dist.init_process_group

        def init_process_group(backend: Any = None, *args, **kwargs):
            if (backend == "nccl" or kwargs.get("backend") == "nccl") and \
                    self._fire("torch.distributed.init_process_group('nccl')"):
                kwargs.pop("backend", None)
                backend = self.backend.process_group_backend
            return original_init(backend, *args, **kwargs)

        self._patch(dist, "init_process_group", init_process_group)

        from torch.nn.parallel import DistributedDataParallel

        original_ddp_init = DistributedDataParallel.__init__
        ddp_entry = "DistributedDataParallel(..., device_ids=[N]) of a model not on CUDA"

        def ddp_init(wrapper, module, device_ids=None, *args, **kwargs):
            if device_ids is not None and device_type != "cuda" and self._fire(ddp_entry):
                device_ids = None
                kwargs.pop("output_device", None)
            original_ddp_init(wrapper, module, device_ids, *args, **kwargs)

        self._patch(DistributedDataParallel, "__init__", ddp_init)


# Frames of these modules are how a call reaches the entry point, not who made
# it: torch.cuda.amp.GradScaler(...) calls torch.amp.GradScaler.__init__ through
# a deprecation wrapper, and the caller is the frame outside all of them; the
# trace's device-API recorder wraps the redirects while a script is traced.
_PASS_THROUGH = ("torchport.script.", "torchport.trace.device_apis", "torch.amp", "torch.cuda.amp", "typing_extensions",
                 "warnings")


def user_line() -> str | None:
    """file:line of the call that reached a redirect when it came from the
    user's own code; None when it came from torch or a library
    (``torch.manual_seed`` calling ``torch.cuda.manual_seed_all``, Adam
    asking ``torch.cuda.is_available()``): those see the truth."""
    from torchport.script.usercode import is_user_file

    frame = sys._getframe(1)
    while frame is not None and str(frame.f_globals.get("__name__", "")).startswith(_PASS_THROUGH):
        frame = frame.f_back  # type: ignore[assignment]  # None ends the loop
    if frame is None:
        return None
    filename = frame.f_code.co_filename
    return f"{filename}:{frame.f_lineno}" if is_user_file(filename) else None
