"""Input pipeline: can the data keep up with the training step?

Measured in the worker that trains the backend's run, right after it (so the
model is built, compiled and warm), in interleaved rounds: each round times
``PER_ROUND`` batches from the app's data alone (no model, no device), then
``PER_ROUND`` training steps on those same batches, already fetched (no
loading: the compute-only step).  Data and compute come from the same
process, the same moment and the same machine load, for every backend; the
reference ``cpu`` is measured with its eager model even where it shares the
``cpu-compile`` worker.

The figure judged is the share of a step spent waiting for data:

* loading in the training process (a list, a generator, a DataLoader with
  ``num_workers=0``): load / (load + compute);
* a DataLoader with worker processes overlaps loading with compute: the step
  waits only for what loading takes beyond compute, (load - compute) / load.

One share per round; the verdict is on their median, in a band, so that
noise near one threshold cannot flip it: **keeps up** below ``KEEPS_UP_BELOW``
(15%, status ``pass``), **input-bound** above ``INPUT_BOUND_ABOVE`` (25%,
status ``fail``), **borderline** between (status ``borderline``: shown as
such, never as a pass, and it does not fail the command); the rounds' range
is reported as the interval.  The host's load average is recorded before and
after; above ``HEAVY_LOAD_PER_CPU`` runnable tasks per CPU the reason says the
verdict is uncertain.  ``torchport check
--only pipeline``, the full check and evaluate's check stage all measure this
way, so they give the same verdict.

The suggestions name what applies to this app's data object.
"""
from __future__ import annotations

from typing import Any

from torchport.limits import HEAVY_LOAD_PER_CPU
from torchport.limits import INPUT_BOUND_SHARE as INPUT_BOUND_ABOVE
from torchport.limits import KEEPS_UP_SHARE as KEEPS_UP_BELOW
from torchport.records import (Check, CheckStatus, CollateFunction, DataDescription, HostLoad, PipelineBand,
                               PipelineFigures, PipelineMeasurement, PipelineVerdict)

ROUNDS = 5
PER_ROUND = 4
# A step that waits less than this for its data is not input-bound whatever the share: below it the
# figure is timer and scheduler noise of a loaded host, and a fast step's share of it swings.
MIN_WAIT_S = 0.001
PINNED_MEMORY_DEVICES = ("cuda",)  # page-locked host memory speeds up copies to these devices only


def suggestions(data: DataDescription, device_type: str) -> list[str]:
    found = []
    if not data.dataloader:
        found.append("wrap the data in a torch.utils.data.DataLoader with num_workers > 0 so loading overlaps "
                     "compute (the data is a " + (data.type or "plain iterable").rsplit(".", 1)[-1] + ")")
    else:
        if not data.num_workers:
            found.append("DataLoader(num_workers=N): it loads in the training process now (num_workers=0)")
        else:
            if not data.persistent_workers:
                found.append("DataLoader(persistent_workers=True): workers are restarted every epoch now")
            found.append(f"raise DataLoader(prefetch_factor=...) (now {data.prefetch_factor}) so more batches wait ready")
        if device_type in PINNED_MEMORY_DEVICES and not data.pin_memory:
            found.append(f"DataLoader(pin_memory=True): faster host-to-{device_type} copies")
    if device_type not in PINNED_MEMORY_DEVICES:
        found.append(f"pin_memory does not help on {device_type}")
    return found


def measure(run: Any, rounds: int = ROUNDS, per_round: int = PER_ROUND) -> PipelineMeasurement:
    """Worker side: time the app's data alone and the run's compute-only step
    in interleaved rounds (see the module docstring).  ``run`` is the
    backend's ``TrainingRun`` after its training steps; the steps taken here
    come after everything the other checks read from it."""
    import time

    import torch

    from torchport.engine import BatchStream, leading_dim

    load_before = host_load()
    app, backend, engine = run.app, run.backend, run.engine
    factory_started = time.perf_counter()
    stream = BatchStream(app.data)
    stream.next()  # the first batch starts the iterator (DataLoader workers): a one-off, not the rate
    factory_s = time.perf_counter() - factory_started
    loads, computes, samples, counted_s = [], [], 0, 0.0
    training_stream = engine.stream
    try:
        for _ in range(rounds):
            started = time.perf_counter()
            batches = [stream.next()[0] for _ in range(per_round)]
            load_s = time.perf_counter() - started
            counted_s += load_s
            samples += sum(app.samples(b) if app.samples else leading_dim(b) for b in batches)
            # The engine's own step, fed the batches already fetched: compute only.
            engine.stream = BatchStream(batches.copy)
            backend.synchronize()
            started = time.perf_counter()
            for _ in batches:
                engine.train_step()
            backend.synchronize()
            loads.append(load_s / per_round)
            computes.append((time.perf_counter() - started) / per_round)
    finally:
        engine.stream = training_stream
    return PipelineMeasurement(
        rounds=rounds, per_round=per_round, load_s=loads, compute_s=computes,
        batches_per_s=rounds * per_round / counted_s if counted_s > 0 else None,
        samples_per_s=samples / counted_s if counted_s > 0 else None, factory_s=factory_s,
        data=describe_data(stream.data, app.data),
        threads={"intra_op": torch.get_num_threads(), "inter_op": torch.get_num_interop_threads()},
        load=HostLoad(before=load_before, after=host_load(), cpus=host_cpus()))


def host_load() -> list[float] | None:
    """The host's 1, 5 and 15-minute load averages (None where the platform has none)."""
    import os

    try:
        return [round(value, 2) for value in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def host_cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def load_uncertainty(load: HostLoad | None) -> str | None:
    """Why load made the timings uncertain (None: it did not, or it was not recorded)."""
    if not load:
        return None
    minute = [sample[0] for sample in (load.before, load.after) if sample]
    cpus = load.cpus or 1
    if not minute or max(minute) <= HEAVY_LOAD_PER_CPU * cpus:
        return None
    return (f"uncertain: the host's load average was {max(minute):.1f} on {cpus} CPUs during the measurement "
            f"(above {HEAVY_LOAD_PER_CPU:g} per CPU), so data and compute shared the cores with other work; "
            "rerun on an idle machine to confirm")


def source_line(function: Any) -> str | None:
    """``file:line`` of a Python function's definition, else None."""
    import inspect

    try:
        return f"{inspect.getsourcefile(function)}:{inspect.getsourcelines(function)[1]}"
    except (OSError, TypeError):
        return None


def construction_line(factory: Any, name: str = "DataLoader") -> str | None:
    """Where the app's data factory calls ``name(...)`` (its own source only),
    else the factory's own line."""
    import ast
    import inspect
    import textwrap

    try:
        source, start = inspect.getsourcelines(factory)
        path = inspect.getsourcefile(factory)
        tree = ast.parse(textwrap.dedent("".join(source)))
    except (OSError, TypeError, SyntaxError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if called == name:
                return f"{path}:{start + node.lineno - 1}"
    return f"{path}:{start}"


def describe_data(data: Any, factory: Any = None) -> DataDescription:
    """What the input pipeline is made of, for the suggestions, and where the
    app builds it."""
    description = DataDescription(key_order=()).put(
        type=f"{type(data).__module__}.{type(data).__qualname__}",
        constructed_at=construction_line(factory) if factory is not None else None)
    try:
        from torch.utils.data import DataLoader
    except ImportError:
        return description
    if isinstance(data, DataLoader):
        description.put(
            dataloader=True,
            num_workers=data.num_workers,
            pin_memory=bool(data.pin_memory),
            prefetch_factor=data.prefetch_factor,
            persistent_workers=bool(data.persistent_workers),
            batch_size=data.batch_size,
        )
        collate = data.collate_fn
        if getattr(collate, "__module__", "").split(".")[0] != "torch":
            description.put(collate_fn=CollateFunction(name=getattr(collate, "__qualname__", type(collate).__name__),
                                                       line=source_line(collate)))
    else:
        description.put(dataloader=False)
    return description


def waiting_share(load_s: float, compute_s: float, overlapped: bool) -> float:
    """The share of a step spent waiting for data."""
    if overlapped:
        return max(0.0, load_s - compute_s) / load_s if load_s > 0 else 0.0
    total = load_s + compute_s
    return load_s / total if total > 0 else 0.0


def band(share: float) -> PipelineVerdict:
    if share < KEEPS_UP_BELOW:
        return PipelineVerdict.KEEPS_UP
    if share > INPUT_BOUND_ABOVE:
        return PipelineVerdict.INPUT_BOUND
    return PipelineVerdict.BORDERLINE


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def where_built(data: DataDescription) -> str:
    """The lines to change: the data's construction and its collate_fn."""
    parts = []
    if data.constructed_at:
        parts.append(f"{'DataLoader' if data.dataloader else 'the data'} built at {data.constructed_at}")
    collate = data.collate_fn
    if collate:
        parts.append(f"collate_fn {collate.name}" + (f" at {collate.line}" if collate.line else ""))
    return f"; {', '.join(parts)}" if parts else ""


def check(backend: str, device_type: str, measured: PipelineMeasurement | None,
          evaluation_step_s: float | None = None) -> Check:
    """The verdict for one backend from its own worker's measurement;
    ``evaluation_step_s`` (evaluate's sustained median) is shown beside it."""
    result = Check(name="pipeline", backend=backend, status=CheckStatus.ERROR)
    if not measured or not measured.load_s or not measured.compute_s:
        result.reason = "the data pipeline was not timed"
        return result
    data = measured.data
    overlapped = bool(data.dataloader and data.num_workers)
    shares = [waiting_share(load, compute, overlapped) for load, compute in zip(measured.load_s, measured.compute_s)]
    share = _median(shares)
    load_s, compute_s = _median(measured.load_s), _median(measured.compute_s)
    waits = [waiting_share(load, compute, overlapped) * (load if overlapped else load + compute)
             for load, compute in zip(measured.load_s, measured.compute_s)]
    wait_s = _median(waits)
    verdict = band(share) if wait_s >= MIN_WAIT_S else PipelineVerdict.KEEPS_UP
    input_bound = verdict == PipelineVerdict.INPUT_BOUND
    uncertain = load_uncertainty(measured.load)
    advice = suggestions(data, device_type) if verdict != PipelineVerdict.KEEPS_UP else []
    result.figures = PipelineFigures.begin().put(
        data_batches_per_s=measured.batches_per_s,
        data_samples_per_s=measured.samples_per_s,
        load_s=load_s,
        compute_step_s=compute_s,
        train_steps_per_s=1.0 / compute_s if compute_s > 0 else None,
        load_share=share,
        load_share_interval=[min(shares), max(shares)],
        wait_s=wait_s,
        min_wait_s=MIN_WAIT_S,
        threads=measured.threads,
        load=measured.load,
        uncertain=uncertain,
        rounds=len(shares),
        band=PipelineBand(keeps_up_below=KEEPS_UP_BELOW, input_bound_above=INPUT_BOUND_ABOVE),
        verdict=verdict,
        headroom=compute_s / load_s if load_s > 0 else None,
        overlapped=overlapped,
        input_bound=input_bound,
        step_time_source=(f"{len(shares)} rounds of {measured.per_round} compute-only steps in this "
                          "backend's worker, interleaved with the data timing"),
        evaluation_step_s=evaluation_step_s,
        data=data,
        suggestions=advice,
    )
    batches_per_s = measured.batches_per_s or 0.0
    rates = (f"data alone {batches_per_s:.1f} batches/s, compute {1.0 / compute_s:.1f} steps/s; "
             f"waiting for data {share:.0%} of a step (rounds: {min(shares):.0%} to {max(shares):.0%}; "
             f"keeps up below {KEEPS_UP_BELOW:.0%}, input-bound above {INPUT_BOUND_ABOVE:.0%}, and only from "
             f"{MIN_WAIT_S * 1e3:g} ms of waiting a step: {wait_s * 1e3:.2g} ms)")
    uncertain_note = f"; {uncertain}" if uncertain else ""
    tries = "; try: " + "; ".join(advice[:2])
    if input_bound:
        result.status = CheckStatus.FAIL
        result.reason = f"input-bound: {rates}{where_built(data)}{tries}{uncertain_note}"
    elif verdict == PipelineVerdict.BORDERLINE:
        result.status = CheckStatus.BORDERLINE
        result.reason = f"borderline: {rates}{where_built(data)}{tries}{uncertain_note}"
    else:
        result.status = CheckStatus.PASS
        result.reason = f"{verdict}: {rates}{uncertain_note}"
    return result
