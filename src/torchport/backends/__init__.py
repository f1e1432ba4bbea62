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

from torchport import glossary
from torchport.errors import UserError
from torchport.records import BackendDescription, DeviceMemory, EnvironmentPins, Record

# How a backend's hardware path has been verified.  Shown by `torchport backends`
# and in every report, so nobody mistakes "implemented from the docs" for "tested".
VERIFIED_HERE = "run by the test suite on this kind of machine"
NOT_VERIFIED = "implemented from the published API; not run on real hardware"

# What every backend's description holds, None included; one with an environment adds its pins.
_DESCRIBED = ("name", "title", "device_type", "compiles", "environment", "proxy_for", "verification")

# Where torch.compile's counters sit in a snapshot and in a phase's summary.
DYNAMO = "torch_compile"


@dataclass(frozen=True)
class Availability:
    available: bool
    reason: str = ""

    def as_dict(self) -> dict[str, bool | str]:
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
    # torch.distributed's process-group backend for this device (init_process_group).
    process_group_backend: ClassVar[str] = "gloo"
    # The device family (torchport.glossary): its trace and scan target names,
    # its dispatch key.  None: a plugin's own device that no other command names.
    family: ClassVar[glossary.Family | None] = None
    # Where the backend sorts in every listing; by default its family's place.
    order: ClassVar[int] = glossary.UNLISTED_ORDER

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.compile_backend is not None:
            cls.compiles = True
        if "order" not in vars(cls) and cls.family is not None:
            cls.order = cls.family.order

    @classmethod
    def trace_target(cls) -> str | None:
        """The name ``torchport trace`` gives this backend's device."""
        return cls.family.trace_target if cls.family else None

    @classmethod
    def scan_target(cls) -> str | None:
        """The name ``torchport scan`` gives this backend's device."""
        return cls.family.scan_target if cls.family else None

    @classmethod
    def dispatch_key(cls) -> str | None:
        """The dispatcher key whose kernels run on this backend's device."""
        return cls.family.dispatch_key if cls.family else None

    # ---- parent side -------------------------------------------------------------
    @classmethod
    def availability(cls) -> Availability:
        return Availability(True)

    @classmethod
    def describe(cls) -> BackendDescription:
        description = BackendDescription(name=cls.name, title=cls.title, device_type=cls.device_type,
                                         compiles=cls.compiles, environment=cls.environment,
                                         proxy_for=cls.proxy_for, verification=cls.verification,
                                         key_order=_DESCRIBED)
        if cls.environment is not None:  # the pins of the environment the workers run in
            from torchport import envs

            manifest = envs.read_manifest(cls.environment)
            description.put(environment_pins=EnvironmentPins(
                requirements=manifest.requirements, installed=manifest.installed, python=manifest.python,
                created=manifest.created) if manifest else None)
        return description

    # ---- worker side -------------------------------------------------------------
    def __init__(self) -> None:
        self.device: Any = None  # a torch.device once setup() ran (torch is imported lazily)

    def setup(self) -> None:
        """Create the device.  Called once, first thing in the worker."""
        import torch

        self.device = torch.device(self.device_type)

    def device_info(self) -> dict[str, str | int | None]:
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

    @classmethod
    def worker_imports(cls) -> tuple[str, ...]:
        """Modules this backend's worker imports in its import phase, before
        the job: the fork server imports them once, before it forks the first
        such worker (``torchport.forkserver``), and every such worker's import
        phase counts that time.  Inductor's import (about a second on a small
        host) otherwise fell into each compiled worker's app set-up; only where
        the device is the CPU, so that no process that forks imports a compiler
        that may probe a GPU driver."""
        if cls.compile_backend == "inductor" and cls.device_type == "cpu":
            return ("torch._inductor.compile_fx",)
        return ()

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

    def device_memory(self) -> DeviceMemory | None:
        """Peak device memory since the last reset, in the one shape every
        backend reports, or None when the device has no memory of its own (the CPU)."""
        return None

    def memory(self) -> dict[str, int | str | None] | None:
        """``device_memory()`` as the run record stores it."""
        record = self.device_memory()
        return record.to_dict() if record is not None else None

    # RNG and process group: what differs per device lives with the device.
    def device_rng_state(self) -> Any:
        """The device generator's state (weights_only-loadable), or None when
        the device has none of its own or no API to read it."""
        import torch

        if self.device_type == "cpu":
            return None
        getter = getattr(getattr(torch, self.device_type, None), "get_rng_state", None)
        return getter() if getter is not None else None

    def set_device_rng_state(self, state: Any) -> bool:
        """Restore what ``device_rng_state()`` returned; False when the device has no API for it."""
        import torch

        setter = getattr(getattr(torch, self.device_type, None), "set_rng_state", None)
        if setter is None:
            return False
        setter(state)
        return True

    @classmethod
    def distributed_unsupported(cls) -> str | None:
        """Why several processes of this backend cannot train together here
        (the distributed check is then not applicable), else None."""
        return None

    def init_process_group(self) -> None:
        """Join the torchrun launch this worker is a rank of (env:// rendezvous)."""
        import torch.distributed as dist

        dist.init_process_group(self.process_group_backend)

    # Counters.  The protocol calls the three public methods; a backend
    # overrides the ``*device*`` ones with its device's own counters.  Every
    # backend with a ``compile_backend`` gets torch.compile's (Dynamo's)
    # counters beside them, under DYNAMO, with nothing more to write.
    def counters(self) -> dict[str, Any]:
        """A snapshot to diff between phases; taken outside timed blocks."""
        snapshot: dict[str, Any] = self.device_counters()
        if self.compile_backend is not None:
            from torchport import dynamo_counters

            snapshot[DYNAMO] = dynamo_counters.snapshot()
        return snapshot

    def summarize_counters(self, before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
        """What happened between two ``counters()`` snapshots, as the run record holds it."""
        device = self.summarize_device_counters(before, after)
        # A plugin backend written before the records may still return a plain dictionary.
        summary = device.to_dict() if isinstance(device, Record) else dict(device or {})
        if DYNAMO in after:
            from torchport import dynamo_counters

            summary[DYNAMO] = dynamo_counters.summarize(before.get(DYNAMO, {}), after[DYNAMO]).to_dict()
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

    def device_counters(self) -> dict[str, float]:
        """The device's counters (compilations, fallbacks, transfers) by name.
        Empty when it has none."""
        return {}

    def summarize_device_counters(self, before: dict[str, float], after: dict[str, float]) -> Record | None:
        """The device's counters between two snapshots, or None when it has none."""
        return None

    def new_device_compilations(self, before: dict[str, float], after: dict[str, float]) -> int | None:
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


@dataclass(frozen=True)
class PluginProblem:
    """A backend plugin that could not be used: its module failed to import, or
    it defines a backend class torchport refuses.  Reported by `torchport
    backends` and in every result's environment, never dropped in silence."""

    source: str  # the plugin file, or the entry point
    problem: str  # one line

    def as_dict(self) -> dict[str, str]:
        return {"source": self.source, "problem": self.problem}


def _one_line(exc: BaseException) -> str:
    from torchport.failures import first_line

    return first_line(f"{type(exc).__name__}: {exc}")[0]


def _modules_from_path(path_text: str, problems: list[PluginProblem]) -> list[tuple[str, Any]]:
    """(file, module) of every plugin module in the folders; a file that fails
    to import is recorded in ``problems`` instead."""
    modules = []
    for folder in filter(None, path_text.split(os.pathsep)):
        for file in sorted(Path(folder).glob("*.py")):
            if file.name.startswith("_"):
                continue
            spec = importlib.util.spec_from_file_location(f"torchport_backend_plugin_{file.stem}", file)
            if spec is None or spec.loader is None:
                problems.append(PluginProblem(str(file), "cannot be loaded as a Python module"))
                continue
            module = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(module)
            except Exception as exc:  # the plugin's own bug: reported, and the other backends still load
                problems.append(PluginProblem(str(file), f"failed to import: {_one_line(exc)}"))
                continue
            modules.append((str(file), module))
    return modules


def _class_problem(cls: type[Backend], taken: dict[str, type[Backend]]) -> str | None:
    """Why a backend class from a plugin cannot be used, or None."""
    if not isinstance(cls.name, str) or cls.name != cls.name.strip():
        return f"class {cls.__name__}: name must be a string without surrounding blanks, got {cls.name!r}"
    if cls.name in taken and taken[cls.name] is not cls:
        other = taken[cls.name]
        return f"class {cls.__name__}: backend name {cls.name!r} is already {other.__module__}.{other.__qualname__}"
    if cls.family is not None and not isinstance(cls.family, glossary.Family):
        return f"class {cls.__name__}: family must be a torchport.glossary.Family, got {type(cls.family).__name__}"
    if not isinstance(cls.order, int):
        return f"class {cls.__name__}: order must be an integer, got {type(cls.order).__name__}"
    return None


def _discover() -> tuple[dict[str, type[Backend]], list[PluginProblem]]:
    found: dict[str, type[Backend]] = {}
    problems: list[PluginProblem] = []
    modules = [
        importlib.import_module(f"{__name__}.{info.name}")
        for info in pkgutil.iter_modules(__path__)
        if not info.name.startswith("_")
    ]
    for module in modules:
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Backend) and value.name:
                found.setdefault(value.name, value)
    plugins = _modules_from_path(os.environ.get(PLUGIN_PATH_VARIABLE, ""), problems)
    try:
        from importlib.metadata import entry_points

        entries = list(entry_points(group="torchport.backends"))
    except Exception as exc:  # a broken installed distribution must not hide the built-in backends
        entries = []
        problems.append(PluginProblem("entry points torchport.backends", f"cannot be listed: {_one_line(exc)}"))
    for entry in entries:
        try:
            plugins.append((f"entry point {entry.name} ({entry.value})", entry.load()))
        except Exception as exc:
            problems.append(PluginProblem(f"entry point {entry.name} ({entry.value})",
                                          f"failed to import: {_one_line(exc)}"))
    for source, module in plugins:
        for value in vars(module).values():
            if not (isinstance(value, type) and issubclass(value, Backend)):
                continue
            if value.__module__ != getattr(module, "__name__", None) or not value.name:
                continue  # imported into the plugin (the class it extends), or a base class without a name
            problem = _class_problem(value, found)
            if problem is not None:
                problems.append(PluginProblem(source, problem))
                continue
            found[value.name] = value
    return found, problems


@lru_cache(maxsize=1)
def _discovered() -> tuple[dict[str, type[Backend]], tuple[PluginProblem, ...]]:
    found, problems = _discover()
    ordered = dict(sorted(found.items(), key=lambda item: (item[1].order, item[0])))
    return ordered, tuple(problems)


def registry() -> dict[str, type[Backend]]:
    """Every backend, in listing order (each class's ``order``, then name)."""
    return dict(_discovered()[0])


def plugin_problems() -> list[PluginProblem]:
    """Backend plugins that could not be used, and why."""
    return list(_discovered()[1])


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
