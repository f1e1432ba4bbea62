"""Figures per backend, computed from the raw samples in the result document.

Pure functions of the document: ``torchport report`` recomputes everything
here from a saved result file, so the stored raw samples are the truth and the
summaries are only a cache of them.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TypeVar

from torchport.limits import INPUT_BOUND_SHARE
from torchport.prices import Prices, PriceSource
from torchport.records import (
    BackendComparison,
    BackendEntry,
    ConfigConsistency,
    Cost,
    CounterRow,
    CounterRun,
    EffectiveConfig,
    FailureDigest,
    LossAtCommonStep,
    ResultDocument,
    RunRecord,
    RunSeries,
    RunStatus,
    SampleBlock,
    ScenarioSamples,
    ScenarioSummary,
    Stat,
    Summary,
    WarmupRecompiling,
)
from torchport.stats import Measurement, compare, median

SECONDS_PER_HOUR = 3600.0


Scenario = TypeVar("Scenario", bound=ScenarioSummary)


def scenario_summary(samples: list[ScenarioSamples | None], kind: type[Scenario]) -> Scenario | None:
    """The figures of one scenario over the runs' raw samples of it (their
    ``training`` or ``inference``), as a ``kind`` record (a summary is a
    scenario summary with more fields)."""
    scenarios = [scenario for scenario in samples if scenario and scenario.sustained and scenario.sustained.blocks]
    if not scenarios:
        return None
    step_time = Measurement([s.measured().step_times() for s in scenarios])
    samples_per_step = _per_step(scenarios, "samples")
    tokens_per_step = _per_step(scenarios, "tokens")
    low, high = step_time.ci95
    sustained_seconds = sum(b.seconds for s in scenarios for b in s.measured().blocks)
    data_wait = sum(b.data_wait_s for s in scenarios for b in s.measured().blocks)
    first_step = Measurement([[s.first_step_s] for s in scenarios])
    # AlgoPerf counts compilation as part of the time to result; MLPerf leaves it
    # out.  Both are shown: per step over everything this run did, and sustained only.
    included = [(s.first_step_s + s.warmup.seconds + s.measured().seconds()) / s.steps_total for s in scenarios]
    compiled = [count for s in scenarios if (count := s.sustained_compilations) is not None]
    return kind(
        step_time_s=Stat.from_dict(step_time.summary()),
        samples_per_s=samples_per_step / step_time.median if samples_per_step else None,
        samples_per_s_ci95=[samples_per_step / high, samples_per_step / low] if samples_per_step else None,
        tokens_per_s=tokens_per_step / step_time.median if tokens_per_step else None,
        first_step_s=first_step.median,
        compile_overhead_s=max(0.0, first_step.median - step_time.median),
        warmup_steps=[s.warmup.steps for s in scenarios],
        steady=all(s.warmup.steady for s in scenarios),
        time_per_step_compile_excluded_s=step_time.median,
        time_per_step_compile_included_s=median(included),
        compile_included_steps=scenarios[0].steps_total,
        data_wait_share=data_wait / sustained_seconds if sustained_seconds else 0.0,
        sustained_compilations=max(compiled) if len(compiled) == len(scenarios) else None,  # every run counted
    ).computed()


def _per_step(scenarios: list[ScenarioSamples], field: str) -> float | None:
    totals: list[tuple[int | None, int]] = [(getattr(b, field), b.steps) for s in scenarios for b in s.measured().blocks]
    if any(value is None for value, _ in totals):
        return None
    steps = sum(count for _, count in totals)
    return sum(value or 0 for value, _ in totals) / steps if steps else None


def backend_summary(backend: BackendEntry, input_bound_share: float) -> Summary | None:
    runs = backend.ok_runs()
    if not runs:
        return None
    trainings = [training(run) for run in runs]
    summary = scenario_summary(list(trainings), Summary)
    if summary is None or summary.step_time_s is None:
        # Valid against the schema, but inconsistent: the readers turn this into one line naming the file.
        raise ValueError(f"{backend.name}: its runs are marked ok but hold no sustained blocks")
    notes: list[str] = list(summary.step_time_s.warnings)
    epochs = [scenario.steps_per_epoch for scenario in trainings]
    summary.epoch_s = epochs[0] * summary.step_time_s.median if epochs[0] else None
    summary.runs_ok = len(runs)
    summary.process_start_s = _phase_median(runs, "process_start_s")
    summary.import_s = _phase_median(runs, "import_s")
    summary.init_s = _phase_median(runs, "init_s")
    memories = [run.memory.peak_bytes() if run.memory else None for run in runs]
    summary.peak_device_memory_bytes = max((m for m in memories if m is not None), default=None)
    summary.peak_host_rss_bytes = max((run.host_peak_rss_bytes or 0 for run in runs), default=None)
    wait_share = summary.data_wait_share or 0.0
    summary.input_bound = wait_share > input_bound_share
    if summary.input_bound:
        notes.append(
            f"input-bound: {wait_share:.0%} of step time waits for data "
            f"(over {input_bound_share:.0%}); see `torchport check` for the input pipeline"
        )
    if not summary.steady:
        notes.append("steady state was not reached within the warm-up bound: sustained figures may still include warm-up")
    shapes = max(scenario.distinct_batch_shapes or 1 for scenario in trainings)
    summary.distinct_batch_shapes = shapes
    recompiled = summary.sustained_compilations
    if recompiled:
        steps = trainings[0].measured().steps()
        cause = f": input shapes change ({shapes} distinct batch shapes)" if shapes > 1 else ""
        notes.append(f"recompiled {recompiled} times in {steps} sustained steps{cause}; not a steady state")
    summary.warmup_recompiling = item = warmup_recompiling(trainings[0])
    if item:
        spent = f", {item.compile_time_s:.2f} s of compiling" if item.compile_time_s is not None else ""
        notes.append(
            f"recompiling during warm-up: {item.compilations} compilations in {item.blocks_compiling} of "
            f"{item.blocks} warm-up blocks{spent}; compile-included time per step "
            f"{(summary.time_per_step_compile_included_s or 0.0) * 1e3:.3g} ms against "
            f"{(summary.time_per_step_compile_excluded_s or 0.0) * 1e3:.3g} ms "
            "sustained (a clean sustained phase does not make this cost go away)")
    notes += _fallback_notes(trainings[0])
    metrics = [metric for run in runs if (metric := run.metric)]
    summary.metric = (
        replace(metrics[0], value=median(m.value for m in metrics if m.value is not None), runs=len(metrics))
        if metrics else None
    )
    final_losses = [_last_loss(scenario.measured().blocks[-1]) for scenario in trainings]
    summary.final_loss = median(final_losses)
    # Runs stop at different steps (warm-up ends when the run is steady, sampling
    # when it is precise enough): the final loss is at this step, and a loss to
    # compare across backends is taken at a step both reached (comparison()).
    summary.final_loss_step = int(median([len(scenario.losses()) for scenario in trainings]))
    summary.inference = scenario_summary([scenario_samples(run.inference) for run in runs], ScenarioSummary)
    summary.notes = notes
    # What the renderers draw and tabulate, so that none of them reads the runs.
    summary.counters = counter_rows(trainings[0])
    summary.counter_runs = [counter_totals(scenario) for scenario in trainings if scenario.counters]
    summary.phase_seconds = {
        "warmup_s": median(scenario.warmup.seconds for scenario in trainings),
        "sustained_s": median(scenario.measured().seconds() for scenario in trainings)}
    summary.runs_series = [run_series(run, scenario, index) for index, (run, scenario) in enumerate(zip(runs, trainings))]
    summary.config_hash = runs[0].config_hash
    summary.config = runs[0].config or EffectiveConfig(key_order=())  # written as {}
    return summary


def training(run: RunRecord) -> ScenarioSamples:
    """The training samples of a successful run (``RunRecord.ok``: it has them)."""
    samples = scenario_samples(run.training)
    if samples is None:
        raise ValueError(f"run {run.round} has no training samples")
    return samples


def scenario_samples(samples: ScenarioSamples | None) -> ScenarioSamples | None:
    """A run's samples of one scenario, None where it has none."""
    return samples if samples is not None and samples.holds_samples() else None


def _last_loss(block: SampleBlock) -> float:
    if not block.losses:
        raise ValueError("the last sustained block has no loss")
    return block.losses[-1]


def _phase_median(runs: list[RunRecord], phase: str) -> float | None:
    values = [run.phases[phase] for run in runs if run.phases and phase in run.phases]
    return median(values) if values else None


COUNTER_PHASES = ("first_step", "warmup", "sustained")


def _phase_steps(training: ScenarioSamples, phase: str) -> int:
    return {"first_step": 1, "warmup": training.warmup.steps, "sustained": training.measured().steps()}[phase]


def counter_rows(samples: ScenarioSamples) -> list[CounterRow]:
    """The backend's counters per phase of one run's training (the first
    successful run in the summary), with the phase's step count: the
    compiler-counter tables."""
    counters = samples.counters
    return [CounterRow(phase=phase, steps=_phase_steps(samples, phase), counters=counters[phase])
            for phase in COUNTER_PHASES if counters.get(phase)]


def counter_totals(training: ScenarioSamples) -> CounterRun:
    """One run's device counters over all phases, and torchport's own loss
    reads (outside the phase windows) apart: what a trace prediction is checked against."""
    phases = [training.counters.get(p) or {} for p in COUNTER_PHASES]
    fallbacks: dict[str, int] = {}
    for phase in phases:
        for op, count in (phase.get("fallback_ops") or {}).items():
            fallbacks[op] = fallbacks.get(op, 0) + int(count)
    reads = training.loss_reads
    warmup_blocks = training.warmup.blocks

    def total(field: str) -> int:
        return sum(int(p.get(field) or 0) for p in phases)

    return CounterRun(
        compilations=total("compilations"),
        compilations_per_phase={p: int((training.counters.get(p) or {}).get("compilations") or 0)
                                for p in COUNTER_PHASES},
        compile_time_s=sum(float(p.get("compile_time_s") or 0.0) for p in phases),
        warmup_compile_time_s=float((training.counters.get("warmup") or {}).get("compile_time_s") or 0.0),
        warmup_blocks_compiling=sum(1 for block in warmup_blocks if block.compilations),
        warmup_blocks=len(warmup_blocks),
        sustained_compilations=training.sustained_compilations,
        executions=total("executions"),
        transfers_to_device=total("transfers_to_device"),
        transfers_from_device=total("transfers_from_device"),
        graph_cuts=total("graph_cuts"),
        fallback_ops=fallbacks,
        app_host_syncs=fallbacks.get(HOST_SYNC_OPS[0], 0),
        torchport_loss_reads={
            "values": sum(int(r.get("values") or 0) for r in reads.values()),
            HOST_SYNC_OPS[0]: sum(int(((r.get("counters") or {}).get("fallback_ops") or {}).get(HOST_SYNC_OPS[0], 0))
                                  for r in reads.values()),
        } if reads else None,
        steps=training.steps_total or None,
        distinct_batch_shapes=training.distinct_batch_shapes,
    )


def run_series(run: RunRecord, samples: ScenarioSamples, index: int) -> RunSeries:
    """One run's time per step at each step index (first step, warm-up blocks,
    sustained blocks), where the sustained steps begin, the sustained block
    times and, for the first run, every loss: the charts of the HTML report."""
    points: list[list[float]] = []
    step = 1
    points.append([step, samples.first_step_s])
    for block in samples.warmup.blocks:
        step += block.steps
        points.append([step, block.seconds / block.steps])
    sustained_start = step + 1
    for block in samples.measured().blocks:
        step += block.steps
        points.append([step, block.seconds / block.steps])
    return RunSeries(round=run.round, points=points, sustained_start=sustained_start, steady=samples.warmup.steady,
                     sustained_step_s=samples.measured().step_times(), losses=samples.losses() if index == 0 else None)


def warmup_recompiling(training: ScenarioSamples) -> WarmupRecompiling | None:
    """A warm-up that kept compiling: graphs compiled in more than one warm-up
    block (one block compiling is the step graph settling, e.g. an optimizer
    creating its state).  Data that repeat can hide this from the sustained
    phase, so it is reported on its own, with its compile time."""
    blocks = training.warmup.blocks
    compiling = [block.compilations for block in blocks if block.compilations]
    if len(compiling) <= 1:
        return None
    counters = training.counters.get("warmup") or {}
    compile_time = counters.get("compile_time_s")
    if compile_time is None:
        compile_time = (counters.get("torch_compile") or {}).get("compile_time_s")
    return WarmupRecompiling(compilations=sum(compiling), blocks_compiling=len(compiling), blocks=len(blocks),
                             compile_time_s=compile_time)


# Counted by XLA like a missing lowering, but caused by Python asking for a
# value (.item(), float(), if tensor:): the step stops, runs what it has, copies.
HOST_SYNC_OPS = ("aten::_local_scalar_dense",)


def _fallback_notes(training: ScenarioSamples) -> list[str]:
    """Ops that ran on the CPU during the sustained steps (backends that count
    them, e.g. XLA's ``aten::*`` counters)."""
    fallbacks = (training.counters.get("sustained") or {}).get("fallback_ops") or {}
    steps = training.measured().steps()
    notes = []
    syncs = {op: count for op, count in fallbacks.items() if op in HOST_SYNC_OPS}
    others = {op: count for op, count in fallbacks.items() if op not in HOST_SYNC_OPS}
    if syncs:
        notes.append(f"host sync inside the step: {_op_counts(syncs)} in {steps} sustained steps "
                     "(a .item(), float() or Python branch on a device value stops the graph and copies it to the host)")
    if others:
        notes.append(f"ops with no device lowering ran on the CPU: {_op_counts(others)} in {steps} sustained steps")
    return notes


def _op_counts(ops: dict[str, int]) -> str:
    return ", ".join(f"{op} x{count}" for op, count in ops.items())


def loss_at_common_step(runs_c: list[RunRecord], runs_r: list[RunRecord]) -> LossAtCommonStep | None:
    """The two backends' median training loss at the last step every run of
    both reached: final losses after different step counts are not comparable."""
    series_c = [training(run).losses() for run in runs_c]
    series_r = [training(run).losses() for run in runs_r]
    step = min(len(series) for series in series_c + series_r)
    if step == 0:
        return None
    loss, reference_loss = median([s[step - 1] for s in series_c]), median([s[step - 1] for s in series_r])
    return LossAtCommonStep(step=step, loss=loss, reference_loss=reference_loss,
                            relative_difference=abs(loss - reference_loss) / abs(reference_loss) if reference_loss else None)


def comparison(candidate: BackendEntry, reference: BackendEntry) -> BackendComparison | None:
    runs_c, runs_r = candidate.ok_runs(), reference.ok_runs()
    if not runs_c or not runs_r:
        return None

    def measurement(runs: list[RunRecord]) -> Measurement:
        return Measurement([training(run).measured().step_times() for run in runs])

    # stats.Comparison's figures, in the order it has always written them, then the losses.
    found = BackendComparison.from_dict(compare(measurement(runs_c), measurement(runs_r)).as_dict())
    return found.put(loss_at_common_step=loss_at_common_step(runs_c, runs_r))


def cost(summary: Summary | None, usd_per_hour: float | None) -> Cost | None:
    """Cost per 1M samples and per epoch, from the sustained throughput and its
    interval.  Compile time is not amortised here; the report shows it apart."""
    if summary is None or usd_per_hour is None or not summary.samples_per_s or not summary.samples_per_s_ci95:
        return None
    usd_per_second = usd_per_hour / SECONDS_PER_HOUR
    low_rate, high_rate = summary.samples_per_s_ci95
    return Cost(
        usd_per_hour=usd_per_hour,
        usd_per_million_samples=usd_per_second * 1e6 / summary.samples_per_s,
        usd_per_million_samples_ci95=[usd_per_second * 1e6 / high_rate, usd_per_second * 1e6 / low_rate],
        usd_per_epoch=usd_per_second * summary.epoch_s if summary.epoch_s else None,
        usd_per_million_tokens=usd_per_second * 1e6 / summary.tokens_per_s if summary.tokens_per_s else None,
    )


def failure_digest(backend: BackendEntry) -> FailureDigest | None:
    """How many of a backend's runs failed and the last worker stderr lines
    of one that left any: the "does not run here" sections.  None when it ran
    and every run was ok."""
    runs = backend.runs
    failed = [run for run in runs if run.status != RunStatus.OK]
    if runs and not failed:
        return None
    tail = next((run.stderr_tail for run in reversed(runs) if run.stderr_tail), None)
    return FailureDigest(runs_failed=len(failed), runs=len(runs), last_stderr_tail=tail)


def config_consistency(backends: dict[str, BackendEntry]) -> ConfigConsistency:
    """Every backend must have run the same effective configuration."""
    hashes = {
        name: sorted({run.config_hash for run in backend.runs if run.config_hash})
        for name, backend in backends.items()
    }
    hashes = {name: value for name, value in hashes.items() if value}
    counts: dict[str, int] = {}
    for value in hashes.values():
        for digest in value:
            counts[digest] = counts.get(digest, 0) + 1
    majority = max(counts, key=counts.__getitem__) if counts else None
    differing = sorted(name for name, value in hashes.items() if value != [majority])
    return ConfigConsistency(consistent=not differing, hashes=hashes, differing=differing)


def refresh(record: ResultDocument) -> ResultDocument:
    """The document's record with every derived figure recomputed from its raw samples."""
    refresh_backends(record.backends, record)
    return record


def refresh_backends(backends: dict[str, BackendEntry], document: ResultDocument) -> None:
    """``refresh_figures`` over ``backends`` with the document's configuration,
    reference and prices; the consistency written to the document."""
    document.put(config_consistency=refresh_figures(backends, document.config, document.reference,
                                                    Prices.of(document.prices, PriceSource.RESULT)))


def refresh_figures(backends: dict[str, BackendEntry], config: Mapping[str, object], reference_name: str | None,
                    prices: Prices) -> ConfigConsistency:
    """Recompute each backend's summary, failures, comparison and cost from its
    runs; the configurations' consistency over the backends."""
    share = config.get("input_bound_share", INPUT_BOUND_SHARE)
    input_bound_share = float(share) if isinstance(share, (int, float)) else INPUT_BOUND_SHARE
    for backend in backends.values():
        backend.put(summary=backend_summary(backend, input_bound_share), failures=failure_digest(backend))
    reference = backends.get(reference_name) if reference_name else None
    for name, backend in backends.items():
        backend.put(comparison=comparison(backend, reference) if reference is not None and name != reference_name
                    else None,
                    cost=cost(backend.summary, prices.usd_per_hour(name)))
    return config_consistency(backends)
