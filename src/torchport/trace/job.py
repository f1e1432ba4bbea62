"""Worker side of ``torchport trace``: trace K training steps of the app on the CPU.

Runs as ``torchport.trace.job:trace_job`` in a ``cpu`` worker (see
``torchport.launch.run_worker``), so the user's code never runs in the
torchport process.  The raw trace is saved after every step: a step that hangs
past ``--timeout`` leaves everything traced before it.
"""
from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any
from collections.abc import Callable

from torchport import glossary
from torchport.app import call_user
from torchport.engine import StepHooks
from torchport.records import BatchSignature, DataScan, OpKernels, StepGraph, StepMemory

if TYPE_CHECKING:
    from torchport.trace.device_apis import DeviceApiRecorder

DEFAULT_STEPS = 3
# Reading one epoch's batch shapes is cheap for synthetic data and bounded for
# real data: the shapes seen so far are reported with how far the scan got.
SCAN_MAX_BATCHES = 2000
SCAN_MAX_SECONDS = 10.0
_END = object()


def batch_leaves(batch: Any, path: str = "batch") -> list[tuple[str, str, list[int]]]:
    """Every tensor of a batch as (path, dtype, shape), e.g. ("batch[0]", "float32", [64, 128])."""
    import torch

    if isinstance(batch, torch.Tensor):
        return [(path, str(batch.dtype).replace("torch.", ""), list(batch.shape))]
    if isinstance(batch, (list, tuple)):
        return [leaf for i, item in enumerate(batch) for leaf in batch_leaves(item, f"{path}[{i}]")]
    if isinstance(batch, dict):
        return [leaf for key, value in sorted(batch.items()) for leaf in batch_leaves(value, f"{path}[{key!r}]")]
    return []


def signature_text(batch: Any) -> str:
    return ", ".join(f"{path}: {dtype}[{','.join(map(str, shape))}]" for path, dtype, shape in batch_leaves(batch))


def _tensor_bytes(tensors: Any) -> int:
    import torch

    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def trace_job(context: Any) -> None:
    """Trace the app's construction and first steps, with the device-typed API
    calls its code makes meanwhile (``trace["device_apis"]``)."""
    from torchport.trace.device_apis import DeviceApiRecorder

    recorder = DeviceApiRecorder()
    with recorder.recording():
        _trace_app(context, recorder)


def _trace_app(context: Any, api_calls: DeviceApiRecorder) -> None:
    """Fills ``context.result["trace"]``, the worker's JSON answer (read in the parent as a
    ``records.WorkerTrace``), and saves it after every step."""
    import torch

    from torchport.engine import function_location
    from torchport.trace.construction import ConstructionRecorder
    from torchport.trace.tracer import OpTracer

    config = context.config
    steps = int(config.get("steps", DEFAULT_STEPS))
    # With until_repeated K, ``steps`` is a bound: tracing stops once the last
    # K steps ran the same op sequence (a branch that flips at step 3 is seen).
    until_repeated = int(config.get("until_repeated") or 0)
    trace: dict[str, Any] = {"steps_requested": steps, "steps_done": 0, "step_batches": [], "torch": torch.__version__,
                             "until_repeated": until_repeated or None, "stopped": None,
                             "device_apis": api_calls.calls}
    context.result.put(trace=trace)

    context.progress("trace:init")
    # Construction is traced too: the lines that built the model, set dtypes
    # and made the DataLoader are the causes the findings point at.
    built = ConstructionRecorder()
    engine = build_for_trace(context.app_spec, context.backend, int(config.get("seed", 0)), built)
    app, model, optimizer, stream = engine.app, engine.model, engine.optimizer, engine.stream
    data_factory = engine.data_factory
    trace["construction"] = built.summary(model)
    loss_location = engine.loss_location
    phase_locations = {
        "data": function_location(app.data), "forward": loss_location, "loss": loss_location,
        "backward": loss_location, "optimizer": function_location(app.optimizer),
    }
    trace["phase_locations"] = phase_locations

    def save() -> None:
        trace["memory"] = memory.to_dict()
        context.save()

    def checkpoint() -> None:
        trace.update(tracer.snapshot().to_dict())
        trace.pop("activation_bytes", None)
        save()

    tracer = OpTracer(model, phase_locations, checkpoint=checkpoint)
    phases = TracedPhases(tracer)
    parameters = list(model.parameters())
    memory = StepMemory(parameter_bytes=_tensor_bytes(parameters), parameters=sum(p.numel() for p in parameters),
                        trainable_bytes=_tensor_bytes(p for p in parameters if p.requires_grad),
                        optimizer=type(optimizer).__name__)
    trace["memory"] = memory.to_dict()

    for index in range(1, steps + 1):
        context.progress(f"trace:step {index}/{steps}")
        batch = traced_step(engine, tracer, phases, index)
        trace["step_batches"].append(signature_text(batch))
        memory.batch_bytes = max(memory.batch_bytes, sum(_nbytes_of(leaf) for leaf in batch_leaves(batch)))
        memory.gradient_bytes = max(memory.gradient_bytes, _tensor_bytes(
            p.grad for p in parameters if p.grad is not None))
        memory.optimizer_state_bytes = _tensor_bytes(
            value for state in optimizer.state.values() for value in state.values())
        trace.update(tracer.snapshot().to_dict())
        memory.activation_bytes = trace.pop("activation_bytes")
        trace["steps_done"] = index
        if until_repeated and index >= until_repeated and repeated(tracer.step_graphs(), until_repeated):
            trace["stopped"] = f"the op sequence was unchanged for {until_repeated} steps"
            save()
            break
        save()
    else:
        if until_repeated:
            trace["stopped"] = f"bound of {steps} steps reached before the op sequence repeated for {until_repeated} steps"

    context.progress("trace:data shapes")
    trace["data_scan"] = scan_data_shapes(data_factory, stream.steps_per_epoch).to_dict()
    trace["construction"] = built.summary(model)
    kernels = custom_op_kernels(record["op"] for record in trace.get("ops", []))
    trace["custom_op_kernels"] = {name: found.to_dict() for name, found in kernels.items()}
    save()


def build_for_trace(app_spec: Any, backend: Any, seed: int, recorder: Any = None) -> Any:
    """The engine's fixed order; the model stays where the app makes it (the
    CPU), eager, and a failure anywhere in the step is the app's.  With a
    ``ConstructionRecorder``, the import and every factory call run under it."""
    from torchport.app import load_app
    from torchport.engine import ImportedApp, build_app, seed_everything

    if recorder is None:
        return build_app(app_spec, backend, seed=seed, compile=False, on_device=False, app_owns_failures=True)
    seed_everything(seed)
    with recorder.recording("app"):
        app = load_app(app_spec)
    return ImportedApp(app, seed).build(backend, compile=False, on_device=False, app_owns_failures=True,
                                        hooks=RecordedConstruction(recorder))


class RecordedConstruction(StepHooks):
    """Trace's addition to the engine's build: each factory runs under the
    construction recorder, in the role of what it builds."""

    def __init__(self, recorder: Any):
        self.recorder = recorder
        self.open: contextlib.ExitStack | None = None
        self.enter_phase = self.enter
        self.data_factory = recorder.data_factory  # records every call, and catches a reused iterator

    def enter(self, name: str | None) -> None:
        if self.open is not None:
            self.open.close()
            self.open = None
        role = (name or "").removeprefix("build:")
        if role in ("model", "optimizer"):
            self.open = contextlib.ExitStack()
            self.open.enter_context(self.recorder.recording(role))


def traced_step(engine: Any, tracer: Any, phases: TracedPhases, index: int) -> Any:
    """One engine step under the tracer; returns the host batch it trained on."""
    with tracer.step(index):
        _, batch, _ = engine.train_step(phases)
    return batch


class TracedPhases(StepHooks):
    """Trace's addition to the engine's step: each part runs in the tracer's
    phase of the same name, so its dispatched ops are recorded under it."""

    def __init__(self, tracer: Any):
        self.tracer = tracer
        self.outside = tracer.phase  # the tracer's phase between parts ("data", as tracer.in_phase leaves it)
        self.enter_phase = self.enter

    def enter(self, name: str | None) -> None:
        self.tracer.phase = self.outside if name is None else name


def repeated(step_graphs: list[StepGraph], count: int) -> bool:
    """Whether the last ``count`` traced steps ran the same op sequence."""
    return len(step_graphs) >= count and len({g.graph for g in step_graphs[-count:]}) == 1


def _nbytes_of(leaf: tuple[str, str, list[int]]) -> int:
    import torch

    _, dtype, shape = leaf
    count = 1
    for size in shape:
        count *= size
    return count * torch.empty((), dtype=getattr(torch, dtype)).element_size()


def scan_data_shapes(factory: Callable[[], Any], steps_per_epoch: int | None) -> DataScan:
    """The shapes of one epoch's batches (no model, no tracing): how many
    distinct input signatures an XLA-style backend would compile for."""
    data = call_user(factory, "the app's data factory raised")
    started = time.perf_counter()
    signatures: dict[str, BatchSignature] = {}
    batches = 0
    complete = True
    iterator = iter(data)
    while True:
        if batches >= SCAN_MAX_BATCHES or time.perf_counter() - started > SCAN_MAX_SECONDS:
            complete = False
            break
        batch = call_user(lambda: next(iterator, _END), "the app's data raised")
        if batch is _END:
            break
        batches += 1
        text = signature_text(batch)
        if text not in signatures:
            signatures[text] = BatchSignature(signature=text, leaves=[list(leaf) for leaf in batch_leaves(batch)],
                                              first_batch=batches)
        signatures[text].count += 1
    return DataScan(batches=batches, steps_per_epoch=steps_per_epoch, complete_epoch=complete,
                    seconds=time.perf_counter() - started, signatures=list(signatures.values()))


def custom_op_kernels(op_names: Any) -> dict[str, OpKernels]:
    """Ops outside PyTorch's own namespaces exist only where the app registered
    them, i.e. in this process: look up their kernels here."""
    from torchport.trace.registrations import kernels

    custom = sorted({name.split("[")[0] for name in op_names if name.split("::")[0] not in ("aten", "prim", "prims")})
    if not custom:
        return {}
    return kernels(custom, glossary.dispatch_keys())
