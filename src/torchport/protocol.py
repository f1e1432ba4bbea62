"""The timing protocol: phases, blocks of steps, steady state.

Runs inside a backend's worker (see ``torchport.worker``).  For one app on one
backend it measures, separately:

1. init: model build, transfer to the device, optimizer, data pipeline;
2. the first step, which carries any compilation;
3. warm-up, in blocks, until the step time is steady (detected from the data,
   with a bound) and, where the backend can tell, nothing new is compiled;
4. sustained blocks: the figures that are compared between backends.

Timing never perturbs the device: inside a block there is no synchronization
and no ``.item()``.  A block is timed between two of the backend's own
synchronization calls, and the loss values are read once the phase is over,
outside every timed block and every counter window.  Time spent waiting on the data iterator is taken on the host for
every step (``perf_counter`` only, no device call).

The forward-only inference scenario, when the app defines one, goes through the
same phases after training.

This module runs on every torch a backend environment holds (2.9 and newer).
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import asdict, dataclass, fields
from typing import Any, TypeVar
from collections.abc import Callable, Iterable

from torchport import stats
from torchport.engine import BatchStream, StepHooks, batch_signature, build_app, leading_dim

# The app's seeding helpers live with the one step engine; named here too, where callers found them.
from torchport.engine import function_location, seed_everything  # noqa: F401
from torchport.errors import UserError
from torchport.limits import INPUT_BOUND_SHARE
from torchport.records import (
    EffectiveConfig,
    MetricValue,
    Record,
    SampleBlock,
    ScenarioSamples,
    WarmupSamples,
)

DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class ProtocolConfig:
    """What is measured, identical on every backend of one evaluation."""

    seed: int = 0
    dtype: str = "float32"
    steps: int = 60  # sustained training steps per run
    blocks: int = 10  # timing samples per run: the sustained steps are split into this many blocks
    max_warmup_steps: int = 120  # bound on warm-up; steady state not reached by then is reported
    steady_window: int = 3  # consecutive warm-up blocks that must agree...
    steady_tolerance: float = 0.10  # ...within this relative spread (max - min) / median
    inference: bool = True  # also time the app's forward-only scenario, when it has one
    input_bound_share: float = INPUT_BOUND_SHARE  # data-wait share of step time above which the app is input-bound

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise UserError(f"unsupported dtype {self.dtype!r} (choose from {', '.join(DTYPES)})")
        if self.steps < 1 or self.blocks < 1:
            raise UserError(f"steps and blocks must be at least 1, got steps={self.steps} blocks={self.blocks}")
        if self.blocks > self.steps:
            # A block holds at least one step: fewer steps than blocks means fewer blocks.
            object.__setattr__(self, "blocks", self.steps)
        if self.max_warmup_steps < 0:
            raise UserError("max_warmup_steps must be >= 0")

    @property
    def block_steps(self) -> int:
        return max(1, self.steps // self.blocks)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ProtocolConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})


def config_hash(effective: EffectiveConfig) -> str:
    canonical = json.dumps(effective.to_dict(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def host_peak_rss_bytes() -> int:
    from torchport.host_memory import process_peak_bytes  # the worker resets the mark per phase

    return process_peak_bytes()


# --- blocks and steady state -----------------------------------------------------------------


@dataclass
class Block:
    seconds: float
    steps: int
    data_wait_s: float
    samples: int
    tokens: int | None
    losses: list[float] | None
    compilations: int | None

    @property
    def step_s(self) -> float:
        return self.seconds / self.steps

    def as_record(self) -> SampleBlock:
        """The block in the result, every field written (None included); built once its phase is over."""
        return every_field(SampleBlock(self.seconds, self.steps, self.data_wait_s, self.samples, self.tokens,
                                       self.losses, self.compilations))


RecordT = TypeVar("RecordT", bound=Record)


def every_field(record: RecordT) -> RecordT:
    """``record`` written with all its fields, None included, in declaration order (as the worker always wrote)."""
    record.key_order = record._declared()
    return record


def is_steady(blocks: list[Block], window: int, tolerance: float) -> bool:
    if len(blocks) < window:
        return False
    recent = sorted(block.step_s for block in blocks[-window:])
    median = stats.median(recent)
    if median <= 0:
        return True
    compiled = [block.compilations for block in blocks[-window:]]
    if any(count for count in compiled if count):
        return False
    return (recent[-1] - recent[0]) / median <= tolerance


def _no_turn() -> None:
    pass


class Scenario:
    """One timed workload (training steps, or inference calls) on one backend."""

    def __init__(self, name: str, step: Callable[[], tuple[Any, float, int, int | None]], backend: Any,
                 check_value: Callable[[float, int], None] | None, turn: Callable[[], None] | None = None):
        self.name = name
        self._step = step
        self._backend = backend
        self._check_value = check_value
        # Called before every timed block (and once after the last): a paired
        # benchmark's turn-taking (torchport.turns, through the worker's
        # context); nothing otherwise.
        self.turn = turn or _no_turn
        self.steps_done = 0
        # (block, its step values, number of its first step): read after the
        # phase's closing counter snapshot, see read_values().
        self._unread: list[tuple[Block, list[Any], int]] = []
        # A CPU step's loss lives in host memory, where reading it is no device
        # work: it is read as the step ends, so that its tensor is freed at
        # once, as in a plain loop.  Hundreds of kept scalar tensors pinned
        # holes in the malloc heap between the step's activations, and each
        # step then touched fresh pages: 5-150 page faults a step that a plain
        # loop did not have, 1-3% of a small model's step (bench_loop.py
        # --candidates counts faults per step in both processes).
        self._read_at_once = backend.device_type == "cpu"

    def run_block(self, steps: int) -> Block:
        backend = self._backend
        keep: list[Any] = []
        waited = 0.0
        samples = 0
        tokens: int | None = 0
        self.turn()  # a no-op unless a benchmark pairs this worker with another process
        counters_before = backend.counters()
        started = time.perf_counter()
        read_at_once = self._read_at_once
        for value, wait, batch_samples, batch_tokens in self.steps(steps):
            if self._check_value is not None:
                # a loss (a detached scalar), checked after the phase
                keep.append(float(value) if read_at_once else value)
            waited += wait
            samples += batch_samples
            tokens = None if tokens is None or batch_tokens is None else tokens + batch_tokens
        backend.synchronize()
        elapsed = time.perf_counter() - started
        # Clock stopped: now it is safe to look at counters.
        compilations = backend.new_compilations(counters_before, backend.counters())
        block = Block(elapsed, steps, waited, samples, tokens, None, compilations)
        if self._check_value is not None:
            self._unread.append((block, keep, self.steps_done + 1))
        self.steps_done += steps
        return block

    def steps(self, count: int) -> Iterable[tuple[Any, float, int, int | None]]:
        """Run ``count`` steps inside a timed block; each gives (value, data
        wait, samples, tokens).  One at a time: a step's value that is not kept
        (an inference output) is freed before the next step, as in a plain
        loop.  Script mode hands the script a whole block at once instead (one
        hand-over per block, not per step)."""
        return (self._step() for _ in range(count))

    def read_values(self) -> int:
        """Copy the step values of the blocks run so far to the host and check
        them; returns how many were read.  Deferred to the end of a phase
        because reading a device value is device work of its own (on XLA a
        transfer and an ``aten::_local_scalar_dense``), which must not land in
        the counters of the phase or of the next block."""
        count = sum(len(values) for _, values, _ in self._unread)
        check_value = self._check_value  # set whenever blocks were kept unread
        for block, values, first_step in self._unread:
            block.losses = [float(value) for value in values]
            for offset, loss in enumerate(block.losses):
                if check_value is not None:
                    check_value(loss, first_step + offset)
        self._unread.clear()
        return count


def read_phase_values(scenario: Scenario, backend: Any, record: ScenarioSamples, phase: str) -> None:
    """Read a phase's step values (after its closing snapshot) and record
    exactly what torchport's own reads cost on the backend's counters, so that
    every host sync counted inside a phase is the app's."""
    before = backend.counters()
    values = scenario.read_values()
    counters = backend.summarize_counters(before, backend.counters())
    counters.pop("torch_compile", None)  # reading a value compiles nothing under torch.compile
    record.loss_reads[phase] = {"values": values, "counters": counters}
    record.put(loss_reads=record.loss_reads)


def run_phases(scenario: Scenario, config: ProtocolConfig, backend: Any, progress: Callable[..., None],
               record: ScenarioSamples, save: Callable[[], None], sampling: Any = None) -> None:
    """First step, warm-up to steady state, sustained blocks; each recorded as
    soon as it is measured.  A phase's counters cover its own steps only: the
    values are read after its closing snapshot and before the next one."""
    counters_start = backend.counters()
    progress(f"{scenario.name}:first_step")
    backend.reset_peak_memory()
    first = scenario.run_block(1)
    counters_end = backend.counters()
    read_phase_values(scenario, backend, record, "first_step")
    record_first_step(record, first, backend.summarize_counters(counters_start, counters_end))
    save()
    run_warmup_and_sustained(scenario, config, backend, progress, record, save, sampling)


def record_first_step(record: ScenarioSamples, first: Block, counters: dict[str, Any]) -> None:
    record.put(first_step_s=first.seconds, first_step=first.as_record(), counters={"first_step": counters})


def run_warmup_and_sustained(scenario: Scenario, config: ProtocolConfig, backend: Any, progress: Callable[..., None],
                             record: ScenarioSamples, save: Callable[[], None], sampling: Any = None) -> None:
    """The phases after the first step (which ``record`` already holds):
    script mode measures its first step from hooks, then continues here.
    ``sampling`` (``torchport.sampling``) decides the block lengths and when
    sampling stops: by default the configured protocol, with a budget its plan."""
    from torchport.sampling import FixedSampling

    sampling = sampling or FixedSampling(config)
    progress(f"{scenario.name}:warmup")
    counters_start = backend.counters()
    warmup: list[Block] = []
    steady = config.max_warmup_steps == 0
    while not steady and sampling.warmup_continues(warmup):
        warmup.append(scenario.run_block(sampling.next_warmup_steps(warmup)))
        steady = is_steady(warmup, config.steady_window, config.steady_tolerance)
    counters_end = backend.counters()
    read_phase_values(scenario, backend, record, "warmup")
    record.put(warmup=WarmupSamples(steps=sum(b.steps for b in warmup), seconds=sum(b.seconds for b in warmup),
                                    steady=steady, blocks=[b.as_record() for b in warmup]))
    record.counters["warmup"] = backend.summarize_counters(counters_start, counters_end)
    save()

    progress(f"{scenario.name}:sustained")
    block_steps = sampling.block_steps(warmup, record.first_step_s)
    counters_start = backend.counters()
    sustained: list[Block] = []
    stopped_by = None
    while stopped_by is None:
        sustained.append(scenario.run_block(block_steps))
        stopped_by = sampling.stop(sustained)
    scenario.turn()  # a paired process finishes its last block before our tail work (see torchport.turns)
    counters_end = backend.counters()
    read_phase_values(scenario, backend, record, "sustained")
    described = sampling.describe(stopped_by, sustained)
    described.block_steps, described.blocks = block_steps, [b.as_record() for b in sustained]
    record.put(sustained=every_field(described))
    record.counters["sustained"] = backend.summarize_counters(counters_start, counters_end)
    compiled = [b.compilations for b in sustained]
    record.put(sustained_compilations=None if any(c is None for c in compiled) else sum(compiled),
               steps_total=scenario.steps_done)
    save()


# --- the evaluate job --------------------------------------------------------------------------


def evaluate_job(context: Any) -> None:
    """Worker entry point for ``torchport evaluate``: one app, one backend, one run."""
    config = ProtocolConfig.from_dict(context.config)
    backend = context.backend
    result = context.result
    turn = getattr(context, "take_turn", None)

    context.progress("init")
    init_started = time.perf_counter()
    engine = build_app(context.app_spec, backend, seed=config.seed, dtype=config.dtype)
    app, model, optimizer = engine.app, engine.model, engine.optimizer
    parameters = engine.parameters
    backend.synchronize()
    context.record_phase("init_s", time.perf_counter() - init_started)

    cast = engine.cast
    loss_location = engine.loss_location
    first_batch_signature: list[tuple] = []
    counted = EvaluateHooks(engine, first_batch_signature)

    def train_step() -> tuple[Any, float, int, int | None]:
        loss, _, waited = engine.train_step(counted)
        return loss.detach(), waited, counted.samples, counted.tokens

    def check_loss(value: float, step: int) -> None:
        if not math.isfinite(value):
            raise UserError(f"the loss is {value} at training step {step} on {backend.name}", location=loss_location,
                            kind="numerical")

    from torchport.sampling import from_job

    training_sampling, inference_sampling = from_job(config, context.budget, backend.name, context.started,
                                                     config.inference and app.predict is not None)
    training = ScenarioSamples(key_order=())  # written in the order its keys are set
    result.put(training=training)
    run_phases(Scenario("training", train_step, backend, check_loss, turn), config, backend, context.progress,
               training, context.save, training_sampling)
    stream = engine.stream
    training.put(steps_per_epoch=stream.steps_per_epoch, distinct_batch_shapes=len(stream.signatures))
    result.put(memory=backend.device_memory())

    effective = EffectiveConfig(key_order=()).put(
        app=context.app_spec.text if context.app_spec else None,
        protocol=config.as_dict(),
        first_batch=repr(first_batch_signature[0]) if first_batch_signature else None,
        parameters=parameters,
        parameter_dtype=str(next(model.parameters()).dtype).replace("torch.", "") if parameters else None,
        model=type(model).__name__,
        optimizer=type(optimizer).__name__,
        optimizer_defaults={k: repr(v) for k, v in sorted(optimizer.defaults.items())},
    )
    result.put(config=effective, config_hash=config_hash(effective))

    if app.metric is not None:
        context.progress("metric")
        result.put(metric=_measure_metric(app, model, backend, stream, cast))
    context.save()

    if config.inference and app.predict is not None:
        engine.optimizer.zero_grad(set_to_none=True)  # the gradients are not needed to time inference: free them
        result.put(inference=_run_inference(engine, config, context, turn, inference_sampling))
    result.put(host_peak_rss_bytes=host_peak_rss_bytes())


class EvaluateHooks(StepHooks):
    """Evaluate's additions to the step: each batch's samples and tokens, and
    the first batch's signature (for the effective configuration)."""

    def __init__(self, engine: Any, first_signature: list[tuple] | None = None):
        self.app = engine.app
        self.first_signature = first_signature
        self.samples = 0
        self.tokens: int | None = None
        self.on_batch = self.count

    def count(self, batch: Any) -> Any:
        app = self.app
        self.samples = app.samples(batch) if app.samples else leading_dim(batch)
        self.tokens = app.tokens(batch) if app.tokens else None
        if self.first_signature is not None and not self.first_signature:
            self.first_signature.append(batch_signature(batch))
        return batch


def _measure_metric(app: Any, model: Any, backend: Any, stream: BatchStream, cast: Any) -> MetricValue:
    import torch

    from torchport.app import user_error_from

    batch = next(iter(app.data()))
    model.eval()
    try:
        with torch.no_grad():
            value = app.metric(model, backend.to_device(batch, cast))
    except Exception as exc:
        raise user_error_from(exc, "the app's metric raised") from None
    finally:
        model.train()
    return MetricValue(name=app.metric_name, value=float(value), higher_is_better=app.metric_higher_is_better,
                       measured_on="the first batch of the data, after the training run")


def _run_inference(engine: Any, config: ProtocolConfig, context: Any,
                   turn: Callable[[], None] | None = None, sampling: Any = None) -> ScenarioSamples:
    import torch

    stream = BatchStream(engine.app.data)
    record = ScenarioSamples(key_order=())
    counted = EvaluateHooks(engine)

    def infer_step() -> tuple[Any, float, int, int | None]:
        # The output is returned so that it stays alive until the block's barrier.
        output, _, waited = engine.forward_step(stream, counted)
        return output, waited, counted.samples, counted.tokens

    model = engine.model
    model.eval()
    try:
        with torch.no_grad():
            run_phases(Scenario("inference", infer_step, engine.backend, None, turn), config, engine.backend,
                       context.progress, record, context.save, sampling)
    finally:
        model.train()
    return record
