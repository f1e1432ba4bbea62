"""Device-typed APIs the app calls at run time, at the user's line, under
scan's rule ids.

``torchport scan`` reads the source; this sees what ran while the app was
built and traced: a CUDA autocast or GradScaler (which turn themselves off
elsewhere), cuDNN and TF32 flag writes, pinned memory, CUDA streams and
events, and CUDA device-count logic.  Each call is recorded once per (rule,
user line) with a count; ``merge_with_scan`` folds them into scan's findings
for the app's files (one finding per line and rule, marked "seen at run
time" when it ran).

The interception is confined: :meth:`DeviceApiRecorder.recording` wraps the
entry points for its ``with`` block and restores every original on leaving.
A wrapper records and then calls the original with the same arguments, so
what the app computes is unchanged.  A call counts only when it comes from the
user's code: straight from a user frame (device counts, ``Tensor.pin_memory``,
streams by function), or for the classes through torch's own frames only
(``torch.cuda.amp.autocast`` reaches ``torch.amp.autocast.__init__`` that way);
a call made by another library, or by torch on its own behalf, is not the app's line.
"""
from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from torchport.records import AppScan, DeviceApiCall

# scan's rule ids (torchport.scan.rules), so one line found by both is one finding.
AUTOCAST, GRAD_SCALER, CUDNN, TF32 = "TP201", "TP202", "TP301", "TP302"
PIN_MEMORY, EVENT, STREAM, DEVICE_MANAGEMENT = "TP402", "TP106", "TP107", "TP004"
CUDNN_FLAGS = {"enabled": CUDNN, "deterministic": CUDNN, "benchmark": CUDNN, "benchmark_limit": CUDNN,
               "allow_tf32": TF32}
CUDA_DEVICE_FUNCTIONS = {"device_count": DEVICE_MANAGEMENT, "current_device": DEVICE_MANAGEMENT,
                         "set_device": DEVICE_MANAGEMENT, "stream": STREAM, "current_stream": STREAM,
                         "default_stream": STREAM, "set_stream": STREAM}
MAX_CALLS = 100


def _torch_root() -> str:
    import torch

    return os.path.dirname(os.path.realpath(torch.__file__)) + os.sep


# Frames between a user's call and the recording wrapper that are no one's decision: the standard library's
# and typing_extensions' deprecation wrappers, torchport's own (this module, the construction recorder).
# torch's own frames pass too for the classes only (a subclass calling super().__init__).
_STDLIB = os.path.realpath(sysconfig.get_paths()["stdlib"]) + os.sep
_SITE = tuple({os.path.realpath(sysconfig.get_paths()[key]) + os.sep for key in ("purelib", "platlib")})


_TORCHPORT = os.path.dirname(os.path.dirname(os.path.realpath(__file__))) + os.sep  # its own wrappers (construction)


def _passes_through(resolved: str) -> bool:
    return (resolved.startswith(_STDLIB) and not resolved.startswith(_SITE)) or resolved.startswith(_TORCHPORT) \
        or os.path.basename(resolved) == "typing_extensions.py"


class CallJson(TypedDict):
    """A device-typed call as the worker saves it (the parent reads it as ``records.DeviceApiCall``)."""

    id: str
    title: str
    location: str
    call: str
    count: int


class DeviceApiRecorder:
    """Record device-typed API calls from the user's code while ``recording()`` is active."""

    def __init__(self, is_user_file: Callable[[str], bool] | None = None):
        from torchport.app import is_user_file as app_user_file

        self.is_user_file = is_user_file or app_user_file
        self.found: dict[tuple[str, str], CallJson] = {}
        # The same entries, in order: a result that holds this list saves the latest counts.
        self.calls: list[CallJson] = []
        self._restore: list[tuple[Any, str, Any, bool]] = []

    # ---- where a call comes from --------------------------------------------------------
    def _user_line(self, frame: Any, direct: bool) -> str | None:
        torch_root = _torch_root()
        while frame is not None:
            filename = frame.f_code.co_filename
            if self.is_user_file(filename):
                return f"{filename}:{frame.f_lineno}"
            resolved = os.path.realpath(filename)
            passing = _passes_through(resolved)
            if direct and not passing or not (passing or resolved.startswith(torch_root)):
                return None  # torch, or another library, made the call on its own behalf
            frame = frame.f_back
        return None

    def record(self, rule: str, call: str, frame: Any, direct: bool = False) -> None:
        location = self._user_line(frame, direct)
        if location is None:
            return
        entry = self.found.get((rule, location))
        if entry is None:
            if len(self.found) >= MAX_CALLS:
                return
            from torchport.scan.catalogue import find

            entry = self.found[(rule, location)] = {"id": rule, "title": find(rule).title, "location": location,
                                                    "call": call, "count": 0}
            self.calls.append(entry)
        entry["count"] += 1

    # ---- interception -----------------------------------------------------------------------
    def _patch(self, owner: Any, name: str, replacement: Any) -> None:
        had = name in vars(owner)
        self._restore.append((owner, name, vars(owner).get(name), had))
        setattr(owner, name, replacement)

    @contextmanager
    def recording(self) -> Iterator[DeviceApiRecorder]:
        try:
            self._install()
            yield self
        finally:
            while self._restore:
                owner, name, original, had = self._restore.pop()
                if had:
                    setattr(owner, name, original)
                else:
                    delattr(owner, name)

    def _install(self) -> None:
        import torch
        import torch.utils.data
        from torch.amp.autocast_mode import autocast
        from torch.amp.grad_scaler import GradScaler

        recorder = self

        original_autocast = autocast.__init__

        def autocast_init(context: Any, *args: Any, **kwargs: Any) -> None:
            # The device asked for, before anything (script mode's redirects) changes it.
            device = kwargs.get("device_type", args[0] if args else None)
            if device == "cuda":
                dtype = kwargs.get("dtype", args[1] if len(args) > 1 else None)
                spelled = "torch.cuda.amp.autocast()" if type(context) is not autocast else (
                    "torch.autocast(device_type='cuda'" + (f", dtype={str(dtype).replace('torch.', '')}" if dtype else "")
                    + ")")
                recorder.record(AUTOCAST, spelled, sys._getframe(1))
            original_autocast(context, *args, **kwargs)

        self._patch(autocast, "__init__", autocast_init)

        original_scaler = GradScaler.__init__

        def scaler_init(scaler: Any, *args: Any, **kwargs: Any) -> None:
            device = kwargs.get("device", args[0] if args else "cuda")  # GradScaler's default device is CUDA
            if device == "cuda":
                spelled = "torch.cuda.amp.GradScaler()" if type(scaler) is not GradScaler else \
                    "torch.amp.GradScaler(device='cuda')"
                recorder.record(GRAD_SCALER, spelled, sys._getframe(1))
            original_scaler(scaler, *args, **kwargs)

        self._patch(GradScaler, "__init__", scaler_init)

        cudnn_module = type(torch.backends.cudnn)
        for name, rule in CUDNN_FLAGS.items():
            prop = vars(cudnn_module).get(name)
            if prop is not None and hasattr(prop, "__set__"):
                self._patch(cudnn_module, name, _RecordedFlag(prop, f"torch.backends.cudnn.{name}", rule, self))
        matmul_module = type(torch.backends.cuda.matmul)
        original_matmul_setattr = matmul_module.__setattr__

        def matmul_setattr(flags: Any, name: str, value: Any) -> None:
            if name.startswith("allow_"):
                recorder.record(TF32, f"torch.backends.cuda.matmul.{name} = {value!r}", sys._getframe(1), direct=True)
            original_matmul_setattr(flags, name, value)

        self._patch(matmul_module, "__setattr__", matmul_setattr)

        original_pin = torch.Tensor.pin_memory

        def pin_memory(tensor: Any, *args: Any, **kwargs: Any) -> Any:
            recorder.record(PIN_MEMORY, "Tensor.pin_memory()", sys._getframe(1), direct=True)
            return original_pin(tensor, *args, **kwargs)

        self._patch(torch.Tensor, "pin_memory", pin_memory)

        loader = torch.utils.data.DataLoader
        original_loader = loader.__init__

        def loader_init(data_loader: Any, *args: Any, **kwargs: Any) -> None:
            original_loader(data_loader, *args, **kwargs)
            if getattr(data_loader, "pin_memory", False):
                recorder.record(PIN_MEMORY, "DataLoader(pin_memory=True)", sys._getframe(1))

        self._patch(loader, "__init__", loader_init)

        for name, rule in (("Stream", STREAM), ("Event", EVENT)):
            made = getattr(torch.cuda, name, None)
            if isinstance(made, type) and "__new__" in vars(made):
                self._patch(made, "__new__", staticmethod(_recorded_new(made, rule, self)))
            elif callable(made):  # script mode's redirects put a function there
                self._patch(torch.cuda, name, _recorded_function(made, f"torch.cuda.{name}()", rule, self))
        for name, rule in CUDA_DEVICE_FUNCTIONS.items():
            function = getattr(torch.cuda, name, None)
            if callable(function):
                self._patch(torch.cuda, name, _recorded_function(function, f"torch.cuda.{name}()", rule, self))


class _RecordedFlag:
    """A cuDNN flag property that records writes and reads through to the original."""

    def __init__(self, prop: Any, name: str, rule: str, recorder: DeviceApiRecorder):
        self.prop, self.name, self.rule, self.recorder = prop, name, rule, recorder

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        return self.prop.__get__(instance, owner)

    def __set__(self, instance: Any, value: Any) -> None:
        self.recorder.record(self.rule, f"{self.name} = {value!r}", sys._getframe(1), direct=True)
        self.prop.__set__(instance, value)


def _recorded_new(cls: Any, rule: str, recorder: DeviceApiRecorder) -> Callable[..., Any]:
    original = vars(cls)["__new__"]
    original = original.__func__ if isinstance(original, staticmethod) else original

    def new(klass: Any, *args: Any, **kwargs: Any) -> Any:
        recorder.record(rule, f"torch.cuda.{cls.__name__}()", sys._getframe(1))
        return original(klass, *args, **kwargs)

    return new


def _recorded_function(function: Callable[..., Any], call: str, rule: str,
                       recorder: DeviceApiRecorder) -> Callable[..., Any]:
    def recorded(*args: Any, **kwargs: Any) -> Any:
        recorder.record(rule, call, sys._getframe(1), direct=True)
        return function(*args, **kwargs)

    recorded.__wrapped__ = function  # type: ignore[attr-defined]  # what inspect and functools look for
    recorded.__name__ = getattr(function, "__name__", "recorded")
    recorded.__doc__ = function.__doc__
    return recorded


def merge_with_scan(scanned: AppScan | None, calls: list[DeviceApiCall] | None) -> AppScan | None:
    """Scan's findings for the app's files with the calls seen at run time:
    a line found by both is one finding, marked ``seen_at_run_time`` with the
    call and its count; a call scan did not find is added with scan's texts
    for its rule.  ``scanned`` is left as it was."""
    if not calls:
        return scanned
    from torchport.records import AppScan, RunTimeSighting, ScanHit
    from torchport.scan.catalogue import find

    merged = replace(scanned) if scanned else AppScan()
    findings = [replace(f) for f in merged.findings]
    by_place = {(f.id, _place(f.location)): f for f in findings}
    for call in calls:
        held = by_place.get((call.id, _place(call.location)))
        if held is None:
            rule = find(call.id)
            held = ScanHit(id=call.id, title=rule.title, location=call.location,
                           detail=f"{call.call} ran here (seen at run time; not found by the scan)",
                           severity=dict(rule.severity), replacement=rule.replacement)
            held.key_order = ("id", "title", "location", "detail", "severity", "replacement")  # as always written
            findings.append(held)
            by_place[(call.id, _place(call.location))] = held
        held.put(seen_at_run_time=RunTimeSighting(call=call.call, count=call.count))
    merged.findings = findings
    return merged


def _place(location: str) -> tuple[str, str]:
    path, _, line = location.rpartition(":")
    return str(Path(path).resolve()), line
