"""Worker side: one seeded training run of an app, and what the checks record
from it.

A :class:`TrainingRun` builds the app through the one step engine
(``torchport.engine``), as ``torchport.protocol.evaluate_job`` does (same
order: seed, import, model, optimizer, compile, data; same device placement
through the backend), and then trains step by step with the engine's step, so
that two runs with the same seed see the same batches in the same order.  The
checks add what the timing protocol must not: per-step loss values, gradient
norms, module outputs, checkpoints, RNG states.  Tensors go to files in the
job's work folder as float64 CPU copies (the parent compares them); scalars go
into the worker's JSON result.

Runs on torch 2.9 and newer.
"""
from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any
from collections.abc import Callable

from torchport.app import call_user
from torchport.check.savefile import TorchState
from torchport.engine import ImportedApp, StepHooks
from torchport.errors import UserError
from torchport.records import CoupledSite, OpSequence, OutsideState

CHECKPOINT_FORMAT = "torchport-check-1"


def to_cpu(value: Any) -> Any:
    """A (nested) state dict with every tensor copied to the CPU, dtype kept."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu").clone()
    if isinstance(value, dict):
        return {key: to_cpu(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_cpu(item) for item in value)
    return value


def as_float64(value: Any) -> Any:
    """Every floating tensor in an output, flattened into one float64 CPU vector."""
    import torch

    tensors: list[Any] = []

    def collect(item: Any) -> None:
        if isinstance(item, torch.Tensor):
            if item.is_floating_point() or item.is_complex():
                tensors.append(item.detach().to("cpu", torch.float64).reshape(-1))
        elif isinstance(item, (list, tuple)):
            for element in item:
                collect(element)
        elif isinstance(item, dict):
            for key in sorted(item):
                collect(item[key])
        elif hasattr(item, "__dict__") and not isinstance(item, type):  # e.g. a ModelOutput dataclass
            for key in sorted(vars(item)):
                collect(vars(item)[key])

    collect(value)
    return torch.cat(tensors) if tensors else None


# --- RNG state --------------------------------------------------------------------------------


def capture_rng(backend: Any) -> TorchState:
    """Every RNG a training step may draw from, as weights_only-loadable values."""
    import torch

    state: TorchState = {"torch_cpu": torch.get_rng_state(), "python": random.getstate()}
    try:
        import numpy

        legacy = numpy.random.get_state()
        assert isinstance(legacy, tuple), "the global RandomState (MT19937) gives a tuple"
        kind, keys, position, has_gauss, cached = legacy
        state["numpy"] = {"kind": kind, "keys": torch.from_numpy(keys.astype("int64")), "position": int(position),
                          "has_gauss": int(has_gauss), "cached": float(cached)}
    except ImportError:
        pass
    device_type = backend.device_type
    if device_type == "cpu":
        return state
    device_state = backend.device_rng_state()
    state["device"] = {"type": device_type, "state": device_state}
    return state


def restore_rng(state: TorchState, backend: Any) -> list[str]:
    """Restore what this backend can; return what could not be restored, in words."""
    import torch

    missing: list[str] = []
    torch.set_rng_state(state["torch_cpu"])
    random.setstate(_as_tuple(state["python"]))
    if "numpy" in state:
        try:
            import numpy

            numpy_state = state["numpy"]
            numpy.random.set_state((numpy_state["kind"], numpy_state["keys"].numpy().astype("uint32"),
                                    numpy_state["position"], numpy_state["has_gauss"], numpy_state["cached"]))
        except ImportError:
            missing.append("numpy RNG state (numpy not installed here)")
    saved = state.get("device")
    here = backend.device_type
    if saved is None:
        if here != "cpu":
            missing.append(f"{here} device RNG state (the checkpoint came from a CPU backend, which has none): "
                           f"the {here} generator keeps its own seed")
        return missing
    if saved["type"] != here:
        missing.append(f"{saved['type']} device RNG state (no {saved['type']} generator on {backend.name})")
        return missing
    if saved["state"] is None:
        missing.append(f"{here} device RNG state (not captured at save: no API found)")
        return missing
    if not backend.set_device_rng_state(saved["state"]):
        missing.append(f"{here} device RNG state (no API to restore it)")
    return missing


def _as_tuple(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_as_tuple(item) for item in value)
    if isinstance(value, tuple):
        return tuple(_as_tuple(item) for item in value)
    return value


def state_snapshot(model: Any, optimizer: Any = None) -> TorchState:
    """What may change in training without being in ``state_dict()``, as it is
    now: non-persistent buffers (CPU copies), number attributes of the modules
    and of the optimizer, the states of generators modules hold."""
    import torch

    values: TorchState = {}
    for path, owner in _owners(model, optimizer):
        non_persistent: set[str] = getattr(owner, "_non_persistent_buffers_set", set())
        for name in sorted(non_persistent):
            buffer = owner._buffers.get(name)
            if buffer is not None:
                values[f"{path}.{name}"] = buffer.detach().to("cpu").clone()
        for name, value in vars(owner).items():
            if name.startswith("_") or isinstance(value, bool):
                continue
            if isinstance(value, (int, float)):
                values[f"{path}.{name}"] = value
            elif isinstance(value, torch.Generator):
                values[f"{path}.{name}"] = value.get_state()
    return values


def _owners(model: Any, optimizer: Any) -> list[tuple[str, Any]]:
    owners = [(name or type(module).__name__, module) for name, module in model.named_modules()]
    return owners + ([("optimizer", optimizer)] if optimizer is not None else [])


def state_outside_state_dict(model: Any, optimizer: Any = None,
                             since: TorchState | None = None) -> list[OutsideState]:
    """State the model or optimizer carries that no checkpoint of
    ``state_dict()`` holds, each ``{"name", "kind", "line"}`` (line: where the
    app's class creates it, when found in its source).  Plain tensor
    attributes and module-held generators are always listed; non-persistent
    buffers and number attributes only when they changed since the ``since``
    snapshot (a constant mask or a configured rate is rebuilt the same way by
    the constructor, so it is no lost state)."""
    import torch

    found: list[OutsideState] = []
    now = state_snapshot(model, optimizer) if since is not None else {}
    for path, owner in _owners(model, optimizer):
        is_module = isinstance(owner, torch.nn.Module)
        non_persistent: set[str] = getattr(owner, "_non_persistent_buffers_set", set()) if is_module else set()
        for name in sorted(non_persistent):
            key = f"{path}.{name}"
            if key in now and key in (since or {}) and not torch.equal(now[key], since[key]):  # type: ignore[index]
                found.append(_outside(owner, name, key, "non-persistent buffer (persistent=False)"))
        for name, value in vars(owner).items():
            key = f"{path}.{name}"
            if is_module and isinstance(value, torch.Tensor):
                found.append(_outside(owner, name, key, "plain tensor attribute"))
            elif isinstance(value, torch.Generator) and not name.startswith("_"):
                found.append(_outside(owner, name, key, "generator held by the module"))
            elif (key in now and key in (since or {}) and not isinstance(now[key], torch.Tensor)
                  and now[key] != since[key]):  # type: ignore[index]
                kind = "number attribute" if is_module else "counter on the optimizer"
                found.append(_outside(owner, name, key, kind))
    return found


def _outside(owner: Any, name: str, key: str, kind: str) -> OutsideState:
    return OutsideState(name=key, kind=kind, line=creation_line(type(owner), name))


def creation_line(cls: type, attribute: str) -> str | None:
    """``file:line`` where a class of the app (not torch's) first assigns
    ``self.<attribute>`` or registers it as a buffer, else None."""
    import ast
    import inspect
    import textwrap

    for klass in cls.__mro__:
        if klass.__module__.split(".")[0] in ("torch", "builtins"):
            continue
        try:
            source, start = inspect.getsourcelines(klass)
            path = inspect.getsourcefile(klass)
            tree = ast.parse(textwrap.dedent("".join(source)))
        except (OSError, TypeError, SyntaxError):
            continue
        for node in ast.walk(tree):
            if _creates(node, attribute):
                return f"{path}:{start + getattr(node, 'lineno', 1) - 1}"
    return None


def submodule_line(model: Any, path: str) -> str | None:
    """Where the app's code creates the submodule at ``path`` (its parent's
    ``self.<name> = ...``), else None."""
    parent_path, _, name = path.rpartition(".")
    parent = model.get_submodule(parent_path) if parent_path else model
    return creation_line(type(parent), name)


def _creates(node: Any, attribute: str) -> bool:
    import ast

    def is_self_attribute(target: Any) -> bool:
        return (isinstance(target, ast.Attribute) and target.attr == attribute
                and isinstance(target.value, ast.Name) and target.value.id == "self")

    if isinstance(node, ast.Assign):
        return any(is_self_attribute(target) for target in node.targets)
    if isinstance(node, ast.AnnAssign):
        return is_self_attribute(node.target)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "register_buffer":
        first = node.args[0] if node.args else None
        return isinstance(first, ast.Constant) and first.value == attribute
    return False


# --- the float64 ground truth ------------------------------------------------------------------

LOWER_FLOATS = ("float32", "float16", "bfloat16")


def float64_hold() -> Any:
    """A torch function mode under which the app's own casts of a float64
    tensor to a lower float dtype (``.float()``, ``.half()``, ``.bfloat16()``,
    ``.to(torch.float32)``, ``.type(torch.float16)``) keep it in float64: the
    ground truth is the app's own graph in float64, not an app the cast breaks
    ("expected Float but found Double").  Autocast leaves float64 tensors
    alone by itself (they are not eligible).  ``casts_held`` counts them."""
    import torch
    from torch.overrides import TorchFunctionMode

    lower = {getattr(torch, name) for name in LOWER_FLOATS}
    shortcuts = {torch.Tensor.float, torch.Tensor.half, torch.Tensor.bfloat16}
    converters = {torch.Tensor.to, torch.Tensor.type}

    def _lowered(value: Any) -> bool:
        return isinstance(value, torch.dtype) and value in lower

    class Float64Hold(TorchFunctionMode):
        casts_held = 0

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            source = args[0] if args else None
            if isinstance(source, torch.Tensor) and source.dtype == torch.float64:
                if func in shortcuts:
                    self.casts_held += 1
                    return source
                if func in converters and any(_lowered(value) for value in (*args[1:], *kwargs.values())):
                    held = [torch.float64 if _lowered(arg) else arg for arg in args[1:]]
                    kept = {key: torch.float64 if _lowered(value) else value for key, value in kwargs.items()}
                    self.casts_held += 1
                    return func(source, *held, **kept)
            return func(*args, **kwargs)

    return Float64Hold()


# --- the run ----------------------------------------------------------------------------------


class TrainingRun:
    """One app, one backend, one dtype, from the seed: the engine's build and
    step, with what the checks add (a shard of each batch, the data wait, the
    step count, gradients between backward and the update)."""

    def __init__(self, imported: ImportedApp, backend: Any, *, dtype: str, seed: int, eager: bool = False):
        # eager: the reference's runs made in a compiling backend's worker (see check.runner)
        self.engine = imported.build(backend, dtype=dtype, seed=seed, compile=not eager)
        self.app = imported.app
        self.backend = backend
        self.dtype = dtype
        self.seed = seed
        self.cast = self.engine.cast
        self.loss_location = self.engine.loss_location
        self.model = self.engine.model
        self.optimizer = self.engine.optimizer
        self.stream = self.engine.stream
        self.step = 0
        self.data_wait_s = 0.0
        self.shard: tuple[int, int] | None = None  # (rank, world size): train on that slice of each batch
        self._hooks = _CheckHooks(self)
        self.hold = float64_hold() if dtype == "float64" else None
        self.initial_state = state_snapshot(self.model, self.optimizer)

    def outside_state(self) -> list[OutsideState]:
        """State outside state_dict, judged against this run as it was built."""
        return state_outside_state_dict(self.model, self.optimizer, since=self.initial_state)

    def _held(self, function: Callable[[], Any]) -> Any:
        if self.hold is None:
            return function()
        with self.hold:
            return function()

    @property
    def trainable(self) -> Any:
        return self.engine.trainable

    @trainable.setter
    def trainable(self, module: Any) -> None:  # DistributedDataParallel around the model (check.jobs)
        self.engine.trainable = module

    def first_batch(self) -> Any:
        """The batch step 1 trains on, fetched from a fresh iterator."""
        return self.engine.first_batch()

    def predict_output(self) -> Any:
        """The app's forward-only output on the first batch, before any training."""
        import torch

        batch = self.first_batch()
        self.model.eval()
        try:
            with torch.no_grad():
                return as_float64(self._held(lambda: self.engine.predict(batch)))
        finally:
            self.model.train()

    def train_step(self, after_backward: Callable[[], None] | None = None) -> Any:
        """One step of the engine; ``after_backward`` runs once the gradients
        exist, before the update (step 1's gradient norms)."""
        self._hooks.after_backward = after_backward
        loss, _, waited = self._held(lambda: self.engine.train_step(self._hooks))
        self.data_wait_s += waited
        self.step += 1
        return loss.detach()

    def gradient_norms(self) -> dict[str, float]:
        import torch

        return {
            name: (float(p.grad.detach().to("cpu", torch.float64).norm()) if p.grad is not None else 0.0)
            for name, p in self.model.named_parameters()
        }

    def metric(self) -> float | None:
        import torch

        if self.app.metric is None:
            return None
        batch = self.first_batch()
        self.model.eval()
        try:
            with torch.no_grad():
                return float(self._held(lambda: call_user(lambda: self.app.metric(self.trainable, batch),
                                                          "the app's metric raised")))
        finally:
            self.model.train()

    def skip_batches(self, count: int) -> None:
        """Move the data stream to where a run that trained ``count`` steps stood."""
        for _ in range(count):
            self.stream.next()

    # ---- checkpoints ----------------------------------------------------------------------
    def checkpoint_state(self) -> TorchState:
        return {
            "format": CHECKPOINT_FORMAT,
            "backend": self.backend.name,
            "dtype": self.dtype,
            "seed": self.seed,
            "step": self.step,
            "model": to_cpu(self.model.state_dict()),
            "optimizer": to_cpu(self.optimizer.state_dict()),
            "rng": capture_rng(self.backend),
        }

    def load_state(self, state: TorchState) -> list[str]:
        """Load a checkpoint's model and optimizer state into this run; return
        the model's entries that do not read back equal to what was saved."""
        import torch

        call_user(lambda: self.model.load_state_dict(state["model"]), "loading the model state failed")
        call_user(lambda: self.optimizer.load_state_dict(state["optimizer"]), "loading the optimizer state failed")
        changed = [
            key for key, value in to_cpu(self.model.state_dict()).items()
            if isinstance(value, torch.Tensor)
            and not (value.dtype == state["model"][key].dtype and torch.equal(value, state["model"][key]))
        ]
        self.step = int(state["step"])
        return changed

    def parameters_cpu(self) -> TorchState:
        return to_cpu(dict(self.model.named_parameters()))


class _CheckHooks(StepHooks):
    def __init__(self, run: TrainingRun):
        self.run = run
        self.on_batch = self.shard

    def shard(self, batch: Any) -> Any:
        return batch if self.run.shard is None else shard_batch(batch, *self.run.shard)


def shard_batch(batch: Any, rank: int, world: int) -> Any:
    """Rank ``rank``'s equal slice of every tensor's leading dimension."""
    import torch

    if isinstance(batch, torch.Tensor):
        if batch.dim() == 0 or batch.shape[0] % world:
            raise UserError(f"cannot split a batch of leading size {tuple(batch.shape)[:1]} evenly over {world} "
                            "processes: the distributed check needs a global batch divisible by the process count")
        size = batch.shape[0] // world
        return batch[rank * size:(rank + 1) * size]
    if isinstance(batch, (list, tuple)):
        sliced = [shard_batch(item, rank, world) for item in batch]
        return type(batch)(*sliced) if hasattr(batch, "_fields") else type(batch)(sliced)
    if isinstance(batch, dict):
        return {key: shard_batch(value, rank, world) for key, value in batch.items()}
    return batch


def record_module_outputs(model: Any) -> tuple[TorchState, Callable[[], None]]:
    """Forward hooks on every submodule; the returned dict fills in the order
    the modules finish (children before their parent), first call only."""
    outputs: TorchState = {}
    handles = []

    def hook_for(name: str) -> Callable[..., None]:
        def hook(module: Any, inputs: Any, output: Any) -> None:
            if name not in outputs:
                outputs[name] = as_float64(output)
        return hook

    for name, module in model.named_modules():
        handles.append(module.register_forward_hook(hook_for(name or "(top)")))

    def remove() -> None:
        for handle in handles:
            handle.remove()

    return outputs, remove


def timed(function: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    value = function()
    return value, time.perf_counter() - started


def ensure_folder(path: str | Path) -> Path:
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


MAX_RECORDED_OPS = 5000  # of one step's forward and backward, per rank (a result file stays small)
MAX_COUPLED_SITES = 10
# Reductions that, over the batch dimension of an activation, give statistics of this process's slice only.
BATCH_REDUCTIONS = frozenset({"mean", "var", "std", "var_mean", "std_mean", "sum", "amax", "amin", "logsumexp",
                              "norm", "linalg_vector_norm"})


def user_site() -> str | None:
    """``file:line`` of the innermost caller outside torch and torchport: the
    app's line that led to the op being dispatched now."""
    import sys

    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if not _library_file(name):
            return f"{name}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return None


def _library_file(name: str) -> bool:
    import os

    parts = name.replace("\\", "/").split("/")
    return (name.startswith("<") or "torch" in parts or "torchport" in parts or "site-packages" in parts
            or os.path.basename(name) in ("contextlib.py", "functools.py") or "/lib/python" in name)


def reduces_the_batch(name: str, args: Any, kwargs: dict[str, Any], batch_size: int) -> bool:
    """Whether an op computes per-feature statistics across the batch: a
    reduction whose input has the slice's batch size as its leading dimension
    and at least one more, over a set of dimensions that includes 0 and not
    all of them (a loss averaged over everything is not coupling: DDP's
    gradient average of equal slices reproduces it)."""
    import torch

    if name not in BATCH_REDUCTIONS or not args or not isinstance(args[0], torch.Tensor):
        return False
    tensor = args[0]
    if tensor.dim() < 2 or tensor.shape[0] != batch_size:
        return False
    dims = kwargs.get("dim", args[1] if len(args) > 1 and not isinstance(args[1], torch.Tensor) else None)
    if dims is None or isinstance(dims, (float, str)):
        return False
    dims = [dims] if isinstance(dims, int) else list(dims)
    normalised = {d % tensor.dim() for d in dims if isinstance(d, int)}
    return 0 in normalised and len(normalised) < tensor.dim()


def op_sequence(run: TrainingRun) -> OpSequence:
    """The aten ops one eager forward and backward of the model runs on this
    process's slice of the first batch, in order: what the distributed check
    compares across ranks.  Eager and outside DDP, so that a compiled
    backend's ranks are compared too; the gradients it leaves are cleared."""
    import hashlib

    from torch.utils._python_dispatch import TorchDispatchMode

    from torchport.engine import leading_dim

    names: list[str] = []
    sites: list[str | None] = []
    coupled: list[CoupledSite] = []
    batch = _CheckHooks(run).shard(run.first_batch())
    batch_size = leading_dim(batch)

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = str(func.overloadpacket.__name__)
            names.append(name)
            if len(sites) < MAX_RECORDED_OPS:
                sites.append(user_site())
            # Only ops the app's own lines call: the backward's bias-gradient sums reduce the batch too.
            if (len(coupled) < MAX_COUPLED_SITES and sites and sites[-1]
                    and reduces_the_batch(name, args, kwargs or {}, batch_size)):
                coupled.append(CoupledSite(op=name, line=sites[-1] if sites else None))
            return func(*args, **(kwargs or {}))

    run.model.zero_grad(set_to_none=True)
    with Recorder():
        loss = call_user(lambda: run.app.loss(run.model, batch), "the app's loss raised")
        call_user(loss.backward, "backward through the app's loss raised")
    run.model.zero_grad(set_to_none=True)
    digest = hashlib.sha256("\n".join(names).encode()).hexdigest()[:16]
    return OpSequence(count=len(names), digest=digest, ops=names[:MAX_RECORDED_OPS], sites=sites,
                      batch_coupled=_distinct_lines(coupled))


def _distinct_lines(coupled: list[CoupledSite]) -> list[CoupledSite]:
    seen: dict[str | None, CoupledSite] = {}
    for item in coupled:
        seen.setdefault(item.line, item)
    return list(seen.values())


def first_difference(sequences: dict[str, OpSequence]) -> str | None:
    """None when every rank ran the same op sequence; else where the first
    two that differ part (e.g. ``rank 0: 41 ops, rank 1: 44 ops; op 17:
    mul on rank 0, add on rank 1``)."""
    ranks = sorted(sequences, key=int)
    if len(ranks) < 2 or len({sequences[r].digest for r in ranks}) == 1:
        return None
    base = ranks[0]
    other = next(r for r in ranks if sequences[r].digest != sequences[base].digest)
    a, b = sequences[base].ops, sequences[other].ops
    counts = f"rank {base}: {sequences[base].count} ops, rank {other}: {sequences[other].count} ops"
    index = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    left = f"{a[index]} on rank {base}{_at(sequences[base], index)}" if index < len(a) else f"(end) on rank {base}"
    right = f"{b[index]} on rank {other}{_at(sequences[other], index)}" if index < len(b) else f"(end) on rank {other}"
    return f"{counts}; they part at op {index + 1}: {left}, {right}"


def _at(sequence: OpSequence, index: int) -> str:
    sites = sequence.sites
    return f" at {sites[index]}" if index < len(sites) and sites[index] else ""
