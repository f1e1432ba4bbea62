"""Backends: one module per accelerator path, discovered from this folder.

A backend module defines one or more subclasses of :class:`Backend` with a
``name``.  Dropping a module here (or registering one under the
``torchport.backends`` entry-point group from another package) is all it takes:
nothing else lists them.

Two sides, two rules:

* ``availability()`` runs in the parent process.  It must be cheap and must not
  start a device runtime or rename PyTorch's PrivateUse1 device, because the
  parent serves every backend.
* everything else runs inside that backend's own worker process
  (``torchport.worker``), on whichever torch that backend's environment holds
  (2.9 for torch_xla, the current one otherwise).
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

from torchport.errors import UserError

# How a backend's hardware path has been verified.  Shown by `torchport backends`
# and in every report, so nobody mistakes "implemented from the docs" for "tested".
VERIFIED_HERE = "run by the test suite on this kind of machine"
NOT_VERIFIED = "implemented from the published API; not run on real hardware"

# Where torch.compile's counters sit in a snapshot and in a phase's summary.
DYNAMO = "torch_compile"


@dataclass(frozen=True)
class Availability:
    available: bool
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"available": self.available, "reason": self.reason}


class Backend:
    """One way of running an app: a device plus how to drive it."""

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""
    device_type: ClassVar[str] = "cpu"
    compiles: ClassVar[bool] = False  # has a compilation phase (torch.compile, or a lazy-tensor compiler)
    # The torch.compile backend that ``compile`` wraps the model with; None: no torch.compile.
    compile_backend: ClassVar[str | None] = None
    # The torchport environment the worker runs in (see torchport.envs); None
    # means the interpreter torchport itself runs on.
    environment: ClassVar[str | None] = None
    # When this backend stands in for hardware it is not (XLA on a CPU for a
    # TPU), say so; every report prints it next to the figures.
    proxy_for: ClassVar[str | None] = None
    verification: ClassVar[str] = NOT_VERIFIED
    process_group_backend: ClassVar[str] = "gloo"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.compile_backend is not None:
            cls.compiles = True

    # ---- parent side -------------------------------------------------------------
    @classmethod
    def availability(cls) -> Availability:
        return Availability(True)

    @classmethod
    def describe(cls) -> dict[str, Any]:
        return {
            "name": cls.name,
            "title": cls.title,
            "device_type": cls.device_type,
            "compiles": cls.compiles,
            "environment": cls.environment,
            "proxy_for": cls.proxy_for,
            "verification": cls.verification,
        }

    # ---- worker side -------------------------------------------------------------
    def __init__(self) -> None:
        self.device: Any = None  # a torch.device once setup() ran (torch is imported lazily)

    def setup(self) -> None:
        """Create the device.  Called once, first thing in the worker."""
        import torch

        self.device = torch.device(self.device_type)

    def device_info(self) -> dict[str, Any]:
        """Names and versions of what runs the work (chip, driver, runtime)."""
        return {"device": str(self.device)}

    def to_device(self, obj: Any, dtype: Any = None) -> Any:
        """Move a batch (tensor or nested tuple/list/dict) to the device; floating
        tensors are cast to ``dtype`` when given."""
        import torch

        if isinstance(obj, torch.Tensor):
            if dtype is not None and obj.is_floating_point():
                return obj.to(device=self.device, dtype=dtype)
            return obj.to(device=self.device)
        if isinstance(obj, (list, tuple)):
            moved = [self.to_device(item, dtype) for item in obj]
            return type(obj)(moved) if not hasattr(obj, "_fields") else type(obj)(*moved)
        if isinstance(obj, dict):
            return {key: self.to_device(value, dtype) for key, value in obj.items()}
        return obj

    def prepare_model(self, model: Any, dtype: Any = None) -> Any:
        model = model.to(device=self.device)
        if dtype is not None:
            model = model.to(dtype=dtype)
        return model

    def compile(self, model: Any) -> Any:
        """Wrap the model in ``torch.compile(backend=compile_backend)``, or
        return it as it is when the backend does not use torch.compile."""
        if self.compile_backend is None:
            return model
        import torch

        from torchport import dynamo_counters

        dynamo_counters.start()  # graph breaks and recompiles are logged from the first compile on
        return torch.compile(model, backend=self.compile_backend)

    def after_step(self) -> None:
        """End of one training step: lazy backends cut the graph here."""

    def synchronize(self) -> None:
        """Wait until all queued device work is done.  Timing barriers only."""

    def reset_peak_memory(self) -> None:
        pass

    def memory(self) -> dict[str, Any] | None:
        """Peak device memory in bytes since the last reset, or None when the
        device has no memory of its own (the CPU)."""
        return None

    # Counters.  The protocol calls the three public methods; a backend
    # overrides the ``*device*`` ones with its device's own counters.  Every
    # backend with a ``compile_backend`` gets torch.compile's (Dynamo's)
    # counters beside them, under DYNAMO, with nothing more to write.
    def counters(self) -> dict[str, Any]:
        """A snapshot to diff between phases; taken outside timed blocks."""
        snapshot = self.device_counters()
        if self.compile_backend is not None:
            from torchport import dynamo_counters

            snapshot[DYNAMO] = dynamo_counters.snapshot()
        return snapshot

    def summarize_counters(self, before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
        """What happened between two ``counters()`` snapshots."""
        summary = self.summarize_device_counters(before, after)
        if DYNAMO in after:
            from torchport import dynamo_counters

            summary[DYNAMO] = dynamo_counters.summarize(before.get(DYNAMO, {}), after[DYNAMO])
        return summary

    def new_compilations(self, before: dict[str, Any], after: dict[str, Any]) -> int | None:
        """How many graphs were compiled between two snapshots (the device's
        compiler and torch.compile together), or None when the backend cannot
        tell.  Steady state requires zero."""
        counts = [self.new_device_compilations(before, after)]
        if DYNAMO in after:
            from torchport import dynamo_counters

            counts.append(dynamo_counters.new_compilations(before.get(DYNAMO, {}), after[DYNAMO]))
        known = [count for count in counts if count is not None]
        return sum(known) if known else None

    def device_counters(self) -> dict[str, Any]:
        """The device's counters (compilations, fallbacks, transfers).  Empty
        when it has none."""
        return {}

    def summarize_device_counters(self, before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
        return {}

    def new_device_compilations(self, before: dict[str, Any], after: dict[str, Any]) -> int | None:
        return None


def cpu_only_torch() -> str | None:
    """The installed torch's version when its wheel says it is a CPU-only
    build (``+cpu``), read from the package metadata: the parent process then
    knows there is no CUDA or ROCm without paying ~2 s to import torch."""
    from importlib import metadata

    try:
        version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None
    return version if version.endswith("+cpu") else None


# Folders (os.pathsep-separated) of backend modules outside the package: a
# backend of your own, or the test suite's, in one file, without installing it.
# Workers inherit the variable, so they find the same backends.
PLUGIN_PATH_VARIABLE = "TORCHPORT_BACKEND_PATH"


def _modules_from_path(path_text: str) -> list[Any]:
    modules = []
    for folder in filter(None, path_text.split(os.pathsep)):
        for file in sorted(Path(folder).glob("*.py")):
            if file.name.startswith("_"):
                continue
            spec = importlib.util.spec_from_file_location(f"torchport_backend_plugin_{file.stem}", file)
            if spec is None or spec.loader is None:
                continue
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            modules.append(module)
    return modules


def _discover() -> dict[str, type[Backend]]:
    found: dict[str, type[Backend]] = {}
    modules = [
        importlib.import_module(f"{__name__}.{info.name}")
        for info in pkgutil.iter_modules(__path__)
        if not info.name.startswith("_")
    ]
    modules += _modules_from_path(os.environ.get(PLUGIN_PATH_VARIABLE, ""))
    try:
        from importlib.metadata import entry_points

        for entry in entry_points(group="torchport.backends"):
            modules.append(entry.load())
    except Exception:  # a broken third-party plugin must not hide the built-in backends
        pass
    for module in modules:
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Backend) and value.name:
                found.setdefault(value.name, value)
    return found


@lru_cache(maxsize=1)
def registry() -> dict[str, type[Backend]]:
    return dict(sorted(_discover().items(), key=lambda item: _sort_key(item[0])))


def _sort_key(name: str) -> tuple[int, str]:
    order = ["cpu", "cuda", "mps", "xla", "tpu", "neuron"]
    family = name.split("-")[0]
    return (order.index(family) if family in order else len(order), name)


def get(name: str) -> type[Backend]:
    backends = registry()
    if name not in backends:
        raise UserError(f"unknown backend {name!r} (known: {', '.join(backends)})")
    return backends[name]


def availability(name: str) -> Availability:
    """A backend's availability; a crash in its check counts as unavailable."""
    try:
        return get(name).availability()
    except UserError:
        raise
    except Exception as exc:  # e.g. a vendor package that fails to import
        return Availability(False, f"availability check failed: {type(exc).__name__}: {exc}")
