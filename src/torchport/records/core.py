"""The run, its summary and its backend's entry, and the parts the sections share (a check, a trace finding, op support, memory fit)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from torchport.records.base import (
    BackendStatus,
    CheckStatus,
    ErrorKind,
    Figures,
    FiguresT,
    OpStatus,
    Record,
    RunStatus,
    TraceSeverity,
    TraceVerdictStatus,
    Vocabulary,
)

# --- the records -----------------------------------------------------------------------------------


@dataclass
class DeviceMemory(Record):
    """Device memory of one run, in one shape for every backend.  A backend
    fills what its device counts; ``source`` names the call that counted it."""

    peak_allocated_bytes: int | None = None
    peak_reserved_bytes: int | None = None
    # Where the device keeps no peak counter (MPS): the allocation when read.
    current_allocated_bytes: int | None = None
    driver_allocated_bytes: int | None = None
    limit_bytes: int | None = None
    source: str = ""

    # Schema 1.0 documents: XLA's figures under its own names.
    _LEGACY_NAMES: ClassVar[dict[str, str]] = {"peak_bytes": "peak_allocated_bytes", "bytes_limit": "limit_bytes"}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        if any(key in data for key in cls._LEGACY_NAMES):
            data = {cls._LEGACY_NAMES.get(key, key): value for key, value in data.items()}
        return super().from_dict(data)

    def peak_bytes(self) -> int | None:
        """The figure a report shows: what the allocator held at its peak
        (reserved), else what tensors used at the peak, else the current
        allocation on a device without a peak counter."""
        for value in (self.peak_reserved_bytes, self.peak_allocated_bytes, self.current_allocated_bytes):
            if value is not None:
                return int(value)
        return None


@dataclass
class ErrorRecord(Record):
    kind: ErrorKind | str = ErrorKind.APP_ERROR
    message: str = ""
    more: bool | None = None
    location: str | None = None
    library_frame: str | None = None
    traceback: str | None = None

    _words: ClassVar[dict[str, type[Vocabulary]]] = {"kind": ErrorKind}


@dataclass
class ThreadPools(Record):
    """torch's thread pools in a worker: what torch reports, and what the parent asked for (None: nothing)."""

    intra_op: int = 0
    inter_op: int = 0
    asked: dict[str, int] | None = None

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"asked"})


@dataclass
class WorkerInfo(Record):
    """The worker process of one run: its interpreter, torch, allocator settings and threads."""

    python: str = ""
    torch: str = ""
    executable: str = ""
    pid: int = 0
    allocator: dict[str, str] = field(default_factory=dict)  # the MALLOC_* variables it ran with
    threads: ThreadPools | None = None
    launch: str = ""  # spawned (a fresh interpreter) or forked (from the fork server)
    threads_at_start: int | None = None  # None where /proc is missing (macOS)

    _records: ClassVar[dict[str, type[Record]]] = {"threads": ThreadPools}
    _written_when_none: ClassVar[frozenset[str]] = frozenset({"threads_at_start"})


@dataclass
class EffectiveConfig(Record):
    """What one evaluate run measured with: the app, the protocol, the first batch, the model and optimizer
    (script mode: the script, its arguments and optimizers); built with the keys of its mode only.  Its hash (``torchport.protocol.config_hash``) tells whether two runs are comparable."""

    app: str | None = None
    protocol: dict[str, int | float | str | bool] = field(default_factory=dict)  # ProtocolConfig's fields
    first_batch: str | None = None
    parameters: int = 0
    parameter_dtype: str | None = None
    model: str = ""
    optimizer: str = ""
    optimizer_defaults: dict[str, str] = field(default_factory=dict)  # each value's repr
    # Script mode's, in place of the app's: the script, its arguments, the optimizers it made.
    script: str | None = None
    args: list[str] | None = None
    optimizers: list[str] | None = None
    redirect_cuda: bool | None = None

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"app", "first_batch", "parameter_dtype"})


@dataclass
class HostMemory(Record):
    """A run's peak host memory, per phase where the platform can reset the mark (torchport.host_memory)."""

    peak_bytes: int = 0
    phases: dict[str, int] | None = None
    method: str = ""

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"phases"})


@dataclass
class MetricValue(Record):
    """The app's quality metric, measured after training; a summary's is the median over ``runs``."""

    name: str | None = None
    value: float | None = None
    higher_is_better: bool = True
    measured_on: str = ""
    runs: int | None = None

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"name", "value"})


@dataclass
class SamplingPlan(Record):
    """A budgeted run's sampling plan (torchport.sampling): its deadline, precision target and block length."""

    deadline_in_s: float = 0.0  # from the worker's start
    precision_target: float | None = None
    block_steps: int | None = None
    warmup_share: float = 0.0

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"precision_target", "block_steps"})


# --- the raw samples of a run's scenarios ---------------------------------------------------------


@dataclass
class SampleBlock(Record):
    """One timed block of a scenario's raw samples: its steps, their time and what they counted."""

    seconds: float = 0.0
    steps: int = 1
    data_wait_s: float = 0.0
    samples: int | None = None
    tokens: int | None = None
    losses: list[float] | None = None
    compilations: int | None = None


@dataclass
class WarmupSamples(Record):
    steps: int = 0
    seconds: float = 0.0
    steady: bool = False
    blocks: list[SampleBlock] = field(default_factory=list)

    _record_lists: ClassVar[dict[str, type[Record]]] = {"blocks": SampleBlock}


@dataclass
class SustainedSamples(Record):
    block_steps: int | None = None
    blocks: list[SampleBlock] = field(default_factory=list)
    stopped_by: str | None = None
    precision: float | None = None
    plan: SamplingPlan | None = None

    _records: ClassVar[dict[str, type[Record]]] = {"plan": SamplingPlan}
    _record_lists: ClassVar[dict[str, type[Record]]] = {"blocks": SampleBlock}

    def steps(self) -> int:
        return sum(block.steps for block in self.blocks)

    def seconds(self) -> float:
        return sum(block.seconds for block in self.blocks)

    def step_times(self) -> list[float]:
        """Time per step of each block: the samples every statistic is computed from."""
        return [block.seconds / block.steps for block in self.blocks]


@dataclass
class ScenarioSamples(Record):
    """The raw samples of one scenario (training, inference) in one run: the
    worker fills it phase by phase (torchport.protocol), summary.py reads it."""

    first_step_s: float = 0.0
    first_step: SampleBlock | None = None
    warmup: WarmupSamples = field(default_factory=WarmupSamples)
    sustained: SustainedSamples | None = None
    counters: dict[str, dict[str, Any]] = field(default_factory=dict)  # per phase: the backend's counters
    loss_reads: dict[str, dict[str, Any]] = field(default_factory=dict)
    sustained_compilations: int | None = None
    steps_total: int = 0
    steps_per_epoch: int | None = None
    distinct_batch_shapes: int | None = None

    _records: ClassVar[dict[str, type[Record]]] = {"first_step": SampleBlock, "warmup": WarmupSamples,
                                                   "sustained": SustainedSamples}

    def holds_samples(self) -> bool:
        """Built in code, or read from a dictionary that was not empty (a run's ``training`` starts empty)."""
        return self.key_order is None or bool(self.key_order)

    def measured(self) -> SustainedSamples:
        """The sustained samples of a scenario that has them."""
        if self.sustained is None:
            raise ValueError("the scenario has no sustained samples")
        return self.sustained

    def losses(self) -> list[float]:
        """Every loss of the run, in step order (first step, warm-up, sustained)."""
        blocks = [*([self.first_step] if self.first_step else []), *self.warmup.blocks,
                  *(self.sustained.blocks if self.sustained else [])]
        return [loss for block in blocks for loss in block.losses or []]


@dataclass
class AutocastRegion(Record):
    """Script mode: an autocast region a line of the script opened, as asked and as torch set it up."""

    location: str = ""
    requested_device_type: str | None = None
    device_type: str | None = None
    dtype: str = ""
    enabled: bool = True

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"requested_device_type", "device_type"})


@dataclass
class GradScalerSite(Record):
    """Script mode: a GradScaler a line of the script made."""

    location: str = ""
    device: str = ""
    enabled: bool = True


@dataclass
class RunRecord(Record):
    """One worker run: what the worker wrote, and how the run ended."""

    round: int = 0
    status: RunStatus | str = RunStatus.RUNNING
    error: ErrorRecord | None = None
    exit_code: int | None = None
    wall_s: float | None = None
    last_phase: str | None = None
    stderr_tail: list[str] | None = None
    phases: dict[str, float] | None = None
    worker: WorkerInfo | None = None
    device: dict[str, str | int | None] | None = None  # the backend's own names and versions (device_info)
    config: EffectiveConfig | None = None
    config_hash: str | None = None
    training: ScenarioSamples | None = None
    inference: ScenarioSamples | None = None
    memory: DeviceMemory | None = None
    host_peak_rss_bytes: int | None = None
    host_memory: HostMemory | None = None
    metric: MetricValue | None = None
    script: dict[str, Any] | None = None  # script mode: redirects, autocast regions, machine load (torchport.script)

    _records: ClassVar[dict[str, type[Record]]] = {"error": ErrorRecord, "memory": DeviceMemory, "worker": WorkerInfo,
                                                   "config": EffectiveConfig, "host_memory": HostMemory,
                                                   "metric": MetricValue, "training": ScenarioSamples,
                                                   "inference": ScenarioSamples}
    _words: ClassVar[dict[str, type[Vocabulary]]] = {"status": RunStatus}

    @property
    def ok(self) -> bool:
        return self.status == RunStatus.OK and self.training is not None and self.training.holds_samples()


@dataclass
class Stat(Record):
    median: float = 0.0
    ci95: list[float] = field(default_factory=list)
    runs: int = 0
    samples: int | None = None
    run_medians: list[float] | None = None
    run_spread: float | None = None
    within_run_spread: float | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass
class CounterRow(Record):
    """What a backend counted in one phase of its first successful run: its
    device's counters (compilations, executions, transfers, fallback ops, ...)
    and, under ``torch_compile``, Dynamo's."""

    phase: str = ""
    steps: int = 0
    counters: dict[str, Any] = field(default_factory=dict)


@dataclass
class ScenarioSummary(Record):
    """The figures of one scenario (training, inference) over a backend's
    successful runs: the first fields of a summary, and its ``inference``."""

    step_time_s: Stat | None = None
    samples_per_s: float | None = None
    samples_per_s_ci95: list[float] | None = None
    tokens_per_s: float | None = None
    first_step_s: float | None = None
    compile_overhead_s: float | None = None
    warmup_steps: list[int] | None = None
    steady: bool | None = None
    time_per_step_compile_excluded_s: float | None = None
    time_per_step_compile_included_s: float | None = None
    compile_included_steps: int | None = None
    data_wait_share: float | None = None
    sustained_compilations: int | None = None

    _records: ClassVar[dict[str, type[Record]]] = {"step_time_s": Stat}

    def computed(self) -> Self:
        """Mark every field as computed: written, None included (torchport.summary
        computes them all, and has always written them all)."""
        self.key_order = tuple(self._declared())
        return self


@dataclass
class WarmupRecompiling(Record):
    """Graphs compiled in more than one warm-up block."""

    compilations: int = 0
    blocks_compiling: int = 0
    blocks: int = 0
    compile_time_s: float | None = None

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"compile_time_s"})


@dataclass
class RunSeries(Record):
    """One successful run's time per step at each step index: the charts."""

    round: int = 0
    points: list[list[float]] = field(default_factory=list)
    sustained_start: int = 0
    steady: bool = False
    sustained_step_s: list[float] = field(default_factory=list)
    losses: list[float] | None = None  # the first run's only

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"losses"})


# --- what a summary derives from the runs (summary.py, compare.py, report/) -------------------------


@dataclass
class LossAtCommonStep(Record):
    """Two backends' median training loss at the last step every run of both reached."""

    step: int = 0
    loss: float = 0.0
    reference_loss: float = 0.0
    relative_difference: float | None = None

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"relative_difference"})


@dataclass
class BackendComparison(Record):
    """A backend's speed against the reference (torchport.stats.compare), and their losses at a common step."""

    speedup: float = 1.0
    ci95: list[float] = field(default_factory=list)
    significant: bool = False
    practical: bool = False
    verdict: str = ""
    practical_threshold: float = 0.0
    runs: int = 0
    inconclusive: bool = False
    runs_to_decide: int | None = None
    loss_at_common_step: LossAtCommonStep | None = None

    _records: ClassVar[dict[str, type[Record]]] = {"loss_at_common_step": LossAtCommonStep}
    _written_when_none: ClassVar[frozenset[str]] = frozenset({"runs_to_decide", "loss_at_common_step"})


@dataclass
class CounterRun(Record):
    """One measured run's device counters over all phases (``Summary.counter_runs``, torchport.summary)."""

    compilations: int = 0
    compilations_per_phase: dict[str, int] = field(default_factory=dict)
    compile_time_s: float = 0.0
    warmup_compile_time_s: float = 0.0
    warmup_blocks_compiling: int = 0
    warmup_blocks: int = 0
    sustained_compilations: int | None = None
    executions: int = 0
    transfers_to_device: int = 0
    transfers_from_device: int = 0
    graph_cuts: int = 0
    fallback_ops: dict[str, int] = field(default_factory=dict)
    app_host_syncs: int = 0
    torchport_loss_reads: dict[str, int] | None = None
    steps: int | None = None
    distinct_batch_shapes: int | None = None

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"sustained_compilations", "torchport_loss_reads", "steps",
                                                             "distinct_batch_shapes"})


# --- the summary -----------------------------------------------------------------------------------


@dataclass
class Summary(ScenarioSummary):
    """Figures per backend computed from the raw samples (torchport.summary);
    every renderer reads these, never the runs."""

    epoch_s: float | None = None
    runs_ok: int | None = None
    process_start_s: float | None = None
    import_s: float | None = None
    init_s: float | None = None
    peak_device_memory_bytes: int | None = None
    peak_host_rss_bytes: int | None = None
    input_bound: bool | None = None
    distinct_batch_shapes: int | None = None
    warmup_recompiling: WarmupRecompiling | None = None
    metric: MetricValue | None = None
    final_loss: float | None = None
    final_loss_step: int | None = None  # runs stop at different steps: the final loss is at this one
    inference: ScenarioSummary | None = None
    notes: list[str] = field(default_factory=list)
    # Schema 1.1: what renderers used to read from the runs.
    counters: list[CounterRow] | None = None
    counter_runs: list[CounterRun] | None = None
    phase_seconds: dict[str, float] | None = None
    runs_series: list[RunSeries] | None = None
    # The effective configuration of the first successful run, and its hash.
    config_hash: str | None = None
    config: EffectiveConfig | None = None

    _records: ClassVar[dict[str, type[Record]]] = {"step_time_s": Stat, "inference": ScenarioSummary,
                                                   "warmup_recompiling": WarmupRecompiling, "metric": MetricValue,
                                                   "config": EffectiveConfig}
    _record_lists: ClassVar[dict[str, type[Record]]] = {"counters": CounterRow, "runs_series": RunSeries,
                                                        "counter_runs": CounterRun}
    _written_when_none: ClassVar[frozenset[str]] = frozenset({"tokens_per_s", "epoch_s", "peak_device_memory_bytes", "peak_host_rss_bytes",
                                    "sustained_compilations", "warmup_recompiling", "distinct_batch_shapes",
                                    "metric", "final_loss", "inference"})


@dataclass
class Cost(Record):
    """What a backend's sustained throughput costs at a price per hour."""

    usd_per_hour: float = 0.0
    usd_per_million_samples: float = 0.0
    usd_per_million_samples_ci95: list[float] = field(default_factory=list)
    usd_per_epoch: float | None = None
    usd_per_million_tokens: float | None = None  # only where the app counts tokens

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"usd_per_epoch"})


@dataclass
class FailureDigest(Record):
    """How many of a backend's runs failed, and the last worker stderr lines of one."""

    runs_failed: int = 0
    runs: int = 0
    last_stderr_tail: list[str] | None = None

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"last_stderr_tail"})


@dataclass
class BackendEntry(Record):
    """One backend in the result: what it is, whether it ran, its runs and figures."""

    name: str = ""
    title: str | None = None
    device_type: str | None = None  # the torch device type its runs use ("xla", "cuda", "cpu", ...)
    compiles: bool | None = None  # whether it runs the step under a compiler
    available: bool = False
    reason: str = ""
    verification: str = ""
    proxy_for: str | None = None
    environment: str | None = None
    status: BackendStatus | str = BackendStatus.PENDING
    error: ErrorRecord | None = None
    runs: list[RunRecord] = field(default_factory=list)
    summary: Summary | None = None
    comparison: BackendComparison | None = None
    cost: Cost | None = None
    failures: FailureDigest | None = None  # 1.1

    _records: ClassVar[dict[str, type[Record]]] = {"error": ErrorRecord, "summary": Summary, "cost": Cost,
                                                   "failures": FailureDigest, "comparison": BackendComparison}
    _record_lists: ClassVar[dict[str, type[Record]]] = {"runs": RunRecord}
    _words: ClassVar[dict[str, type[Vocabulary]]] = {"status": BackendStatus}

    def ok_runs(self) -> list[RunRecord]:
        return [run for run in self.runs if run.ok]

    def measured(self) -> Summary:
        """The summary of a backend the report lists as measured."""
        if self.summary is None:
            raise ValueError(f"backend {self.name!r} has no summary")
        return self.summary


@dataclass
class Check(Record):
    """One check result (torchport check): for a backend, or a checkpoint pair."""

    # The order a record built in code writes its keys in.
    name: str = ""
    backend: str | None = None
    pair: str | None = None
    status: CheckStatus | str = CheckStatus.SKIPPED
    # A check builds its figures record; one read from a document holds the dictionary (``figures_as``).
    figures: Figures | dict[str, Any] = field(default_factory=dict)
    reason: str = ""

    _words: ClassVar[dict[str, type[Vocabulary]]] = {"status": CheckStatus}

    def figures_as(self, kind: type[FiguresT]) -> FiguresT:
        """The figures as ``kind``: as built, or read from the document's dictionary."""
        if isinstance(self.figures, kind):
            return self.figures
        return kind.from_dict(self.figures if isinstance(self.figures, dict) else self.figures.to_dict())

    @property
    def failed(self) -> bool:
        """A failure of the command: the check failed, or could not run."""
        return self.status in (CheckStatus.FAIL, CheckStatus.ERROR)


@dataclass
class FindingCause(Record):
    """What the construction line a trace finding was moved to did (a ``trace.findings.CauseKind`` word), and its code."""

    kind: str = ""
    code: str | None = None

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"code"})


@dataclass
class Finding(Record):
    """One trace finding: a rule, where it fired, and its consequence per target."""

    id: str = ""
    rule: str = ""
    title: str = ""
    severity: TraceSeverity | str = TraceSeverity.MINOR
    targets: dict[str, TraceSeverity | str] = field(default_factory=dict)
    location: str | None = None
    library_location: str | None = None
    library: str | None = None
    seen_at: list[str] | None = None
    cause: FindingCause | None = None
    count: int = 0
    per_step: float | None = None
    detail: str = ""
    fix: str = ""

    _records: ClassVar[dict[str, type[Record]]] = {"cause": FindingCause}
    _words: ClassVar[dict[str, type[Vocabulary]]] = {"severity": TraceSeverity}
    _written_when_none: ClassVar[frozenset[str]] = frozenset({"location"})

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        finding = super().from_dict(data)
        finding.targets = {target: cls._read("severity", value) for target, value in finding.targets.items()}
        return finding


@dataclass
class OpSupportRow(Record):
    """One traced op on one target: what it does there, and why torchport says so."""

    status: OpStatus | str = OpStatus.UNKNOWN
    why: str = ""
    falls_back_as: list[str] | None = None  # the ops that run on the CPU instead, when it falls back

    _words: ClassVar[dict[str, type[Vocabulary]]] = {"status": OpStatus}


@dataclass
class MeasuredOnTarget(Record):
    """The backend of an evaluation that ran on a trace target: its status, whether it ran, what it stands in for."""

    backend: str = ""
    status: BackendStatus | str = BackendStatus.PENDING
    ran: bool = False
    proxy_for: str | None = None

    _words: ClassVar[dict[str, type[Vocabulary]]] = {"status": BackendStatus}
    _written_when_none: ClassVar[frozenset[str]] = frozenset({"proxy_for"})


@dataclass
class TargetVerdict(Record):
    """The trace's verdict on one target: what it counted, and the sentence a report shows."""

    fallbacks: int = 0
    fallback_ops: list[str] = field(default_factory=list)
    recompilations: int = 0
    blockers: int = 0
    slow_findings: int = 0
    unknown_ops: int = 0
    op_support: str = "none"  # where op support came from: live, table, none
    status: TraceVerdictStatus | str = TraceVerdictStatus.UNKNOWN
    text: str = ""
    scan_findings: list[str] | None = None
    measured: MeasuredOnTarget | None = None  # evaluate only

    _records: ClassVar[dict[str, type[Record]]] = {"measured": MeasuredOnTarget}
    _words: ClassVar[dict[str, type[Vocabulary]]] = {"status": TraceVerdictStatus}


@dataclass
class TargetOpSupport(Record):
    """The op support of one target: where it came from, and each traced op's row."""

    title: str = ""
    kind: str = "none"  # live, table or none (torchport.trace.support.SupportKind)
    summary: str | None = None  # the table's own one-line statement of its source, said with every verdict
    source: str | None = None
    version: dict[str, Any] | None = None
    retrieved: str | None = None
    note: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    ops: dict[str, OpSupportRow] = field(default_factory=dict)

    _record_maps: ClassVar[dict[str, type[Record]]] = {"ops": OpSupportRow}
    _written_when_none: ClassVar[frozenset[str]] = frozenset({"summary", "source", "version", "retrieved", "note"})


@dataclass
class ChipFit(Record):
    """Whether the trace's estimated step fits one chip of the catalogue (torchport/data/chips.json)."""

    chip: str = ""
    id: str = ""
    targets: list[str] = field(default_factory=list)
    hbm_bytes: int = 0
    hbm: str = ""  # as the vendor states it: "16 GiB", "95 GB"
    source: str = ""
    fits: bool = False
    tight: bool = False
    headroom_bytes: int = 0
    headroom_share: float = 0.0


@dataclass
class MemoryFit(Record):
    """The trace's estimate of one step's peak memory, its parts, and the chips it fits."""

    peak_bytes: int = 0
    parts: dict[str, int] = field(default_factory=dict)
    dtype: str = ""
    optimizer: str | None = None
    parameters: int | None = None
    method: str = ""
    chips: list[ChipFit] = field(default_factory=list)
    catalogue: dict[str, str] = field(default_factory=dict)

    _record_lists: ClassVar[dict[str, type[Record]]] = {"chips": ChipFit}
    _written_when_none: ClassVar[frozenset[str]] = frozenset({"optimizer", "parameters"})


@dataclass
class VaryingDim(Record):
    """One tensor of the batch whose rank (``dim`` None) or one dimension takes more than one size."""

    input: str = ""
    dim: int | None = None
    sizes: list[int] = field(default_factory=list)
    what: str = "size"  # size or rank

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"dim"})


@dataclass
class TraceShapes(Record):
    """The batch signatures and step graphs the trace met."""

    signatures: int = 0
    batches_scanned: int | None = None
    complete_epoch: bool | None = None
    varying: list[VaryingDim] = field(default_factory=list)  # which input's dimension takes which sizes
    step_batches: list[str] | None = None
    distinct_step_graphs: int = 0
    distinct_optimizer_graphs: int | None = None

    _record_lists: ClassVar[dict[str, type[Record]]] = {"varying": VaryingDim}
    _written_when_none: ClassVar[frozenset[str]] = frozenset({"batches_scanned", "complete_epoch", "step_batches",
                                                             "distinct_optimizer_graphs"})


@dataclass
class TraceTotals(Record):
    """Op calls, FLOPs and bytes of one traced step."""

    op_calls_per_step: float = 0.0
    distinct_ops: int = 0
    flops_per_step: float = 0.0
    flops_note: str = ""
    bytes_per_step: float = 0.0


@dataclass
class ContractNote(Record):
    """Where a traced app departs from the app contract (a model not built in float32), at the line that caused it."""

    problem: str = ""
    dtype: str | None = None
    location: str | None = None
    code: str | None = None
    text: str = ""

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"location", "code"})
