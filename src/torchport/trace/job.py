"""Worker side of ``torchport trace``: trace K training steps of the app on the CPU.

Runs as ``torchport.trace.job:trace_job`` in a ``cpu`` worker (see
``torchport.launch.run_worker``), so the user's code never runs in the
torchport process.  The raw trace is saved after every step: a step that hangs
past ``--timeout`` leaves everything traced before it.
"""
from __future__ import annotations

import time
from typing import Any, Callable

from torchport.app import call_user
from torchport.errors import UserError

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
    import torch

    from torchport.app import load_app, make_optimizer
    from torchport.protocol import BatchStream, function_location, seed_everything
    from torchport.trace.construction import ConstructionRecorder
    from torchport.trace.tracer import OpTracer

    config = context.config
    steps = int(config.get("steps", DEFAULT_STEPS))
    # With until_repeated K, ``steps`` is a bound: tracing stops once the last
    # K steps ran the same op sequence (a branch that flips at step 3 is seen).
    until_repeated = int(config.get("until_repeated") or 0)
    trace: dict[str, Any] = {"steps_requested": steps, "steps_done": 0, "step_batches": [], "torch": torch.__version__,
                             "until_repeated": until_repeated or None, "stopped": None}
    context.result["trace"] = trace

    context.progress("trace:init")
    seed_everything(int(config.get("seed", 0)))
    # Construction is traced too: the lines that built the model, set dtypes
    # and made the DataLoader are the causes the findings point at.
    built = ConstructionRecorder()
    with built.recording("app"):
        app = load_app(context.app_spec)
    with built.recording("model"):
        model = call_user(app.model, "the app's model factory raised")
    with built.recording("optimizer"):
        optimizer = make_optimizer(app, model)
    data_factory = built.data_factory(app.data)
    stream = BatchStream(data_factory)
    trace["construction"] = built.summary(model)
    loss_location = function_location(app.loss)
    phase_locations = {
        "data": function_location(app.data), "forward": loss_location, "loss": loss_location,
        "backward": loss_location, "optimizer": function_location(app.optimizer),
    }
    trace["phase_locations"] = phase_locations

    def checkpoint() -> None:
        trace.update(tracer.snapshot())
        trace.pop("activation_bytes", None)
        context.save()

    tracer = OpTracer(model, phase_locations, checkpoint=checkpoint)
    parameters = list(model.parameters())
    memory = trace["memory"] = {
        "parameter_bytes": _tensor_bytes(parameters),
        "parameters": sum(p.numel() for p in parameters),
        "trainable_bytes": _tensor_bytes(p for p in parameters if p.requires_grad),
        "gradient_bytes": 0, "optimizer_state_bytes": 0, "activation_bytes": 0, "batch_bytes": 0,
        "optimizer": type(optimizer).__name__,
    }

    for index in range(1, steps + 1):
        context.progress(f"trace:step {index}/{steps}")
        with tracer.step(index):
            with tracer.in_phase("data"):
                batch, _ = stream.next()
            with tracer.in_phase("optimizer"):
                optimizer.zero_grad(set_to_none=True)
            with tracer.in_phase("loss"):
                loss = call_user(lambda: app.loss(model, batch), "the app's loss raised")
            if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
                got = type(loss).__name__ if not isinstance(loss, torch.Tensor) else f"shape {tuple(loss.shape)}"
                raise UserError(f"the loss must return a scalar tensor, got {got}", location=loss_location)
            with tracer.in_phase("backward"):
                call_user(loss.backward, "backward through the app's loss raised")
            with tracer.in_phase("optimizer"):
                call_user(optimizer.step, "the app's optimizer step raised")
        trace["step_batches"].append(signature_text(batch))
        memory["batch_bytes"] = max(memory["batch_bytes"], sum(
            _nbytes_of(leaf) for leaf in batch_leaves(batch)))
        memory["gradient_bytes"] = max(memory["gradient_bytes"], _tensor_bytes(
            p.grad for p in parameters if p.grad is not None))
        memory["optimizer_state_bytes"] = _tensor_bytes(
            value for state in optimizer.state.values() for value in state.values())
        trace.update(tracer.snapshot())
        memory["activation_bytes"] = trace.pop("activation_bytes")
        trace["steps_done"] = index
        if until_repeated and index >= until_repeated and repeated(trace["step_graphs"], until_repeated):
            trace["stopped"] = f"the op sequence was unchanged for {until_repeated} steps"
            context.save()
            break
        context.save()
    else:
        if until_repeated:
            trace["stopped"] = f"bound of {steps} steps reached before the op sequence repeated for {until_repeated} steps"

    context.progress("trace:data shapes")
    trace["data_scan"] = scan_data_shapes(data_factory, stream.steps_per_epoch)
    trace["construction"] = built.summary(model)
    trace["custom_op_kernels"] = custom_op_kernels(record["op"] for record in trace.get("ops", []))
    context.save()


def repeated(step_graphs: list[dict[str, Any]], count: int) -> bool:
    """Whether the last ``count`` traced steps ran the same op sequence."""
    return len(step_graphs) >= count and len({g["graph"] for g in step_graphs[-count:]}) == 1


def _nbytes_of(leaf: tuple[str, str, list[int]]) -> int:
    import torch

    _, dtype, shape = leaf
    count = 1
    for size in shape:
        count *= size
    return count * torch.empty((), dtype=getattr(torch, dtype)).element_size()


def scan_data_shapes(factory: Callable[[], Any], steps_per_epoch: int | None) -> dict[str, Any]:
    """The shapes of one epoch's batches (no model, no tracing): how many
    distinct input signatures an XLA-style backend would compile for."""
    data = call_user(factory, "the app's data factory raised")
    started = time.perf_counter()
    signatures: dict[str, dict[str, Any]] = {}
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
        entry = signatures.setdefault(text, {"signature": text, "leaves": batch_leaves(batch), "count": 0,
                                             "first_batch": batches})
        entry["count"] += 1
    return {"batches": batches, "steps_per_epoch": steps_per_epoch, "complete_epoch": complete,
            "seconds": time.perf_counter() - started,
            "signatures": [{**e, "leaves": [list(leaf) for leaf in e["leaves"]]} for e in signatures.values()]}


def custom_op_kernels(op_names: Any) -> dict[str, Any]:
    """Ops outside PyTorch's own namespaces exist only where the app registered
    them, i.e. in this process: look up their kernels here."""
    from torchport.trace.registrations import kernels

    custom = sorted({name.split("[")[0] for name in op_names if name.split("::")[0] not in ("aten", "prim", "prims")})
    if not custom:
        return {}
    return kernels(custom, ["CPU", "CUDA", "MPS", "XLA", "PrivateUse1"])
