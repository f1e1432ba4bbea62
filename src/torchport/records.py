"""Typed records of the result document, and the one vocabulary of statuses and error kinds.

The result document (``schemas/result.schema.json``) stays plain JSON on disk;
these dataclasses are how code reads and builds its parts: the run record, the
backend entry, the summary, device memory, a check and a trace finding.  Each
has ``from_dict`` and ``to_dict``, and the two are inverse both ways:

* ``Record.from_dict(d).to_dict() == d`` for every document torchport wrote,
  with its keys in the same order (keys a record does not declare are kept in
  ``extra``, so a newer document survives an older reader);
* ``Record.from_dict(r.to_dict()) == r`` for every record.

A field that was not in the dictionary it was read from stays out of the
dictionary it is written to (unless code set it since); a record built in code
writes every field it has a value for, and None only for the fields listed in
``_written_when_none`` (the ones the schema allows as null and the writer has
always written).

Standard library only: workers import this on every torch they run on.
"""
from __future__ import annotations

import builtins
import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, Self, TypeVar

# --- the vocabulary --------------------------------------------------------------------------------


class Vocabulary(StrEnum):
    """A closed set of words that appear in result documents; members compare
    equal to their words (``RunStatus.OK == "ok"``)."""

    def __str__(self) -> str:
        return str(self.value)


class ErrorKind(Vocabulary):
    """Why a run failed (torchport.failures sorts exceptions into these)."""

    UNSUPPORTED_OP = "unsupported-op"
    COMPILE_ERROR = "compile-error"
    OUT_OF_MEMORY = "out-of-memory"
    NUMERICAL = "numerical"
    CRASH = "crash"
    TIMEOUT = "timeout"
    APP_ERROR = "app-error"
    ENVIRONMENT = "environment"
    INTERRUPTED = "interrupted"
    BUDGET_TOO_SMALL = "budget-too-small"
    # Script mode: the run finished, but nothing of it ran on the backend's device (the script ignored it).
    NOT_ON_DEVICE = "not-on-device"


class RunStatus(Vocabulary):
    """One worker run of one backend."""

    OK = "ok"
    ERROR = "error"
    CRASHED = "crashed"
    TIMED_OUT = "timed_out"
    INTERRUPTED = "interrupted"
    RUNNING = "running"


class BackendStatus(Vocabulary):
    """All of one backend's runs together."""

    PENDING = "pending"
    OK = "ok"
    UNAVAILABLE = "unavailable"
    ERROR = "error"
    CRASHED = "crashed"
    TIMED_OUT = "timed_out"
    SKIPPED = "skipped"
    INTERRUPTED = "interrupted"


class DocumentStatus(Vocabulary):
    """The whole evaluation."""

    RUNNING = "running"
    COMPLETE = "complete"
    INTERRUPTED = "interrupted"
    FAILED = "failed"


class CheckStatus(Vocabulary):
    PASS = "pass"
    BORDERLINE = "borderline"  # inside the band between pass and fail; not a failure of the command
    FAIL = "fail"
    ERROR = "error"
    SKIPPED = "skipped"
    NOT_APPLICABLE = "not_applicable"


class TraceStatus(Vocabulary):
    """A trace section: every requested step traced, some, or none."""

    COMPLETE = "complete"
    PARTIAL = "partial"
    FAILED = "failed"


class TraceVerdictStatus(Vocabulary):
    """The trace's verdict on one target, worst first."""

    BLOCKED = "blocked"
    SLOW = "slow"
    UNKNOWN = "unknown"
    RUNS = "runs"


class OpStatus(Vocabulary):
    """What one traced op does on a target."""

    NATIVE = "native"
    DECOMPOSED = "decomposed"
    FALLBACK = "fallback"
    MISSING = "missing"
    UNKNOWN = "unknown"
    CUSTOM = "custom"


class TraceSeverity(Vocabulary):
    """A trace finding's consequence on one target, mildest first."""

    MINOR = "minor"
    SLOW = "slow"
    BLOCKER = "blocker"


# --- the record machinery --------------------------------------------------------------------------

@dataclass
class Record:
    """Base of every record: keys it does not declare, and the order the keys came in."""

    extra: dict[str, Any] = field(default_factory=dict, kw_only=True)
    # The keys of the dictionary it was read from, in order; None: built in code.
    key_order: tuple[str, ...] | None = field(default=None, kw_only=True, compare=False, repr=False)

    # field name -> record class of its value (one record, or a list / dict of them)
    _records: ClassVar[dict[str, type[Record]]] = {}
    _record_lists: ClassVar[dict[str, type[Record]]] = {}
    _record_maps: ClassVar[dict[str, type[Record]]] = {}
    # field name -> the Vocabulary its value is a word of
    _words: ClassVar[dict[str, type[Vocabulary]]] = {}
    _written_when_none: ClassVar[frozenset[str]] = frozenset()

    # class -> its declared field names, as a tuple and a set: read for every record read or written, and
    # dataclasses.fields() per call made a trace section's records three times slower to read and write.
    _field_names: ClassVar[dict[type, tuple[tuple[str, ...], frozenset[str]]]] = {}

    @classmethod
    def _declared(cls) -> tuple[str, ...]:
        return cls._fields_of()[0]

    @classmethod
    def _declared_set(cls) -> frozenset[str]:
        return cls._fields_of()[1]

    @classmethod
    def _fields_of(cls) -> tuple[tuple[str, ...], frozenset[str]]:
        found = Record._field_names.get(cls)
        if found is None:
            names = tuple(f.name for f in dataclasses.fields(cls) if f.name not in ("extra", "key_order"))
            found = Record._field_names[cls] = (names, frozenset(names))
        return found

    @classmethod
    def _read(cls, name: str, value: Any) -> Any:
        if value is None:
            return None
        if name in cls._records:
            return cls._records[name].from_dict(value)
        if name in cls._record_lists:
            return [cls._record_lists[name].from_dict(item) for item in value]
        if name in cls._record_maps:
            return {key: cls._record_maps[name].from_dict(item) for key, item in value.items()}
        if name in cls._words:
            words = cls._words[name]
            return words(value) if value in words._value2member_map_ else value  # an unknown word is kept as text
        return value

    @staticmethod
    def _write(value: Any) -> Any:
        if isinstance(value, Record):
            return value.to_dict()
        if isinstance(value, Vocabulary):
            return value.value
        if isinstance(value, list):
            return [Record._write(item) for item in value]
        if isinstance(value, dict):
            return {key: Record._write(item) for key, item in value.items()}
        return value

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        declared = cls._declared_set()
        values = {key: cls._read(key, value) for key, value in data.items() if key in declared}
        extra = {key: value for key, value in data.items() if key not in declared}
        return cls(**values, extra=extra, key_order=tuple(data))

    def to_dict(self) -> dict[str, Any]:
        declared = self._declared_set()
        present = set(self.key_order or ())
        order = list(self.key_order or ()) + [key for key in [*self._declared(), *self.extra] if key not in present]
        out: dict[str, Any] = {}
        for key in order:
            if key in self.extra and key not in declared:
                out[key] = self.extra[key]
                continue
            if key not in declared:
                continue
            value = getattr(self, key)
            if key not in present:
                if self.key_order is not None and value == self._default(key):
                    continue  # read from a dictionary that did not have it, and not set since
                if value is None and key not in self._written_when_none:
                    continue
            out[key] = self._write(value)
        return out

    def put(self, **values: Any) -> Self:
        """Set fields (or keys of ``extra``) as a dictionary's keys are set.  On
        a record read from a dictionary each is written, None included, and
        one that dictionary did not have is written after the keys it had, in
        the order set here (the order the document had when it was a dictionary)."""
        declared = self._declared_set()
        for key, value in values.items():
            if key in declared:
                setattr(self, key, value)
            else:
                self.extra[key] = value
            if self.key_order is not None and key not in self.key_order:
                self.key_order = (*self.key_order, key)
        return self

    @classmethod
    def _default(cls, name: str) -> Any:
        found = next(f for f in dataclasses.fields(cls) if f.name == name)
        if found.default_factory is not dataclasses.MISSING:
            return found.default_factory()
        return None if found.default is dataclasses.MISSING else found.default


FiguresT = TypeVar("FiguresT", bound="Figures")


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
class RunRecord(Record):
    """One worker run.  The scenarios (``training``, ``inference``) are the
    raw samples and stay plain dictionaries: summary.py reads them, nothing else."""

    round: int = 0
    status: RunStatus | str = RunStatus.RUNNING
    error: ErrorRecord | None = None
    exit_code: int | None = None
    wall_s: float | None = None
    last_phase: str | None = None
    stderr_tail: list[str] | None = None
    phases: dict[str, float] | None = None
    worker: dict[str, Any] | None = None
    device: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    config_hash: str | None = None
    training: dict[str, Any] | None = None
    inference: dict[str, Any] | None = None
    memory: DeviceMemory | None = None
    host_peak_rss_bytes: int | None = None
    host_memory: dict[str, Any] | None = None  # peak_bytes, per-phase peaks, method
    metric: dict[str, Any] | None = None
    script: dict[str, Any] | None = None  # script mode: redirects, autocast regions, machine load (torchport.script)

    _records: ClassVar[dict[str, type[Record]]] = {"error": ErrorRecord, "memory": DeviceMemory}
    _words: ClassVar[dict[str, type[Vocabulary]]] = {"status": RunStatus}

    @property
    def ok(self) -> bool:
        return self.status == RunStatus.OK and bool(self.training)


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


# --- what a summary derives from the runs (issue 27: summary.py, compare.py, report/) ---------------


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
    metric: dict[str, Any] | None = None
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
    config: dict[str, Any] | None = None

    _records: ClassVar[dict[str, type[Record]]] = {"step_time_s": Stat, "inference": ScenarioSummary,
                                                   "warmup_recompiling": WarmupRecompiling}
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
    cause: dict[str, Any] | None = None
    count: int = 0
    per_step: float | None = None
    detail: str = ""
    fix: str = ""

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
    # evaluate only: the backend of this evaluation that ran on the target (backend, status, ran, proxy_for)
    measured: dict[str, Any] | None = None

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


# --- trace (torchport.trace): the tracing worker's answer, read once in the parent -----------------
# The worker (torchport.trace.job) saves plain JSON; ``WorkerTrace.from_dict`` is where the parent reads it.


@dataclass
class TracedOp(Record):
    """One aggregated op of the traced steps: the op, its input signature, phase, line and module, and its totals."""

    op: str = ""
    phase: str = ""
    location: str | None = None
    module: str | None = None
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    count: int = 0
    flops: int | None = None  # over all calls; None where PyTorch's FLOP counter does not know the op
    bytes_read: int = 0
    bytes_written: int = 0
    in_host_sync_call: bool = False
    attributed: str = "user"  # how the location was found: user, autograd or phase (no user frame)
    steps: list[int] = field(default_factory=list)
    library: str | None = None


@dataclass
class HostSyncCall(Record):
    """A user-level call that read a tensor's value on the host (``x.item()``), at one line."""

    call: str = ""
    phase: str = ""
    location: str | None = None
    module: str | None = None
    attributed: str = "user"
    library: str | None = None
    count: int = 0


@dataclass
class GraphDifference(Record):
    """The first op where a step's op sequence parts from the previous step's."""

    op_index: int = 0
    op: str = ""
    location: str | None = None
    phase: str = ""
    inputs: list[str] = field(default_factory=list)

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"location"})


@dataclass
class StepGraph(Record):
    """One traced step's graph: an identity for its op sequence, and where it first differs from the step before."""

    graph: int = 0
    ops: int = 0
    first_difference: GraphDifference | None = None

    _records: ClassVar[dict[str, type[Record]]] = {"first_difference": GraphDifference}
    _written_when_none: ClassVar[frozenset[str]] = frozenset({"first_difference"})


@dataclass
class BatchSignature(Record):
    """One distinct batch signature of the data scan: its tensors as (path, dtype, shape), how often, first when."""

    signature: str = ""
    leaves: list[list[Any]] = field(default_factory=list)
    count: int = 0
    first_batch: int = 0


@dataclass
class DataScan(Record):
    """The shapes of one epoch's batches, read without the model."""

    batches: int = 0
    steps_per_epoch: int | None = None
    complete_epoch: bool = True
    seconds: float = 0.0
    signatures: list[BatchSignature] = field(default_factory=list)

    _record_lists: ClassVar[dict[str, type[Record]]] = {"signatures": BatchSignature}
    _written_when_none: ClassVar[frozenset[str]] = frozenset({"steps_per_epoch"})


@dataclass
class StepMemory(Record):
    """What the tracing worker measured of one step's memory, in bytes."""

    parameter_bytes: int = 0
    parameters: int | None = None
    trainable_bytes: int = 0
    gradient_bytes: int = 0
    optimizer_state_bytes: int = 0
    activation_bytes: int = 0
    batch_bytes: int = 0
    optimizer: str | None = None


@dataclass
class ConstructionSite(Record):
    """A line of the app's construction (a module built, a dtype set or changed, a DataLoader made): the user's
    line, its code, the library line below it, and what happened there (the rest is kept in ``extra``)."""

    location: str | None = None
    code: str | None = None
    library_location: str | None = None
    library: str | None = None
    role: str | None = None
    dtype: str | None = None  # a default dtype set
    to: str | None = None  # a dtype change: the dtype made
    parameter_shapes: list[list[int]] = field(default_factory=list)  # a module
    batch_size: int | None = None  # a DataLoader
    drop_last: bool = False
    dataset_length: int | None = None


@dataclass
class TraceConstruction(Record):
    """How the app built its model, dtypes and data, with the lines that did it."""

    modules: dict[str, ConstructionSite] = field(default_factory=dict)
    parameter_dtypes: dict[str, int] = field(default_factory=dict)
    model_dtype: str | None = None
    dtype_changes: list[ConstructionSite] = field(default_factory=list)
    default_dtype: list[ConstructionSite] = field(default_factory=list)
    data_loaders: list[ConstructionSite] = field(default_factory=list)
    modules_recorded: int | None = None  # in the section: how many module sites the findings read (not written there)

    _record_lists: ClassVar[dict[str, type[Record]]] = {"dtype_changes": ConstructionSite,
                                                        "default_dtype": ConstructionSite,
                                                        "data_loaders": ConstructionSite}
    _record_maps: ClassVar[dict[str, type[Record]]] = {"modules": ConstructionSite}


@dataclass
class ModelCall(Record):
    location: str | None = None
    count: int = 0


@dataclass
class TracedEvaluation(Record):
    """Evaluation and sampling the traced iterations ran outside the training step."""

    ops: list[TracedOp] = field(default_factory=list)
    host_syncs: list[HostSyncCall] = field(default_factory=list)
    model_calls: list[ModelCall] = field(default_factory=list)

    _record_lists: ClassVar[dict[str, type[Record]]] = {"ops": TracedOp, "host_syncs": HostSyncCall,
                                                        "model_calls": ModelCall}


@dataclass
class OpKernels(Record):
    """Whether the tracing process's torch knows an op, and the dispatch keys with a kernel for it."""

    exists: bool = False
    kernels: list[str] = field(default_factory=list)


@dataclass
class DeviceApiCall(Record):
    """A device-typed API call (``torch.cuda.synchronize()``) the app's code made at run time, under scan's rule."""

    id: str = ""
    title: str = ""
    location: str = ""
    call: str = ""
    count: int = 0


@dataclass
class WorkerTrace(Record):
    """What the tracing worker saved (``result["trace"]``): the steps, ops, host reads, graphs, shapes,
    memory and construction it saw."""

    steps_requested: int | None = None
    steps_done: int = 0
    step_batches: list[str] = field(default_factory=list)
    torch: str | None = None
    until_repeated: int | None = None
    stopped: str | None = None
    device_apis: list[DeviceApiCall] = field(default_factory=list)
    construction: TraceConstruction | None = None
    phase_locations: dict[str, str] | None = None
    memory: StepMemory | None = None
    ops: list[TracedOp] = field(default_factory=list)
    host_syncs: list[HostSyncCall] = field(default_factory=list)
    step_graphs: list[StepGraph] = field(default_factory=list)
    optimizer_graphs: list[int] = field(default_factory=list)
    evaluation: TracedEvaluation | None = None
    data_scan: DataScan | None = None
    custom_op_kernels: dict[str, OpKernels] = field(default_factory=dict)

    _records: ClassVar[dict[str, type[Record]]] = {"construction": TraceConstruction, "memory": StepMemory,
                                                   "evaluation": TracedEvaluation, "data_scan": DataScan}
    _record_lists: ClassVar[dict[str, type[Record]]] = {"device_apis": DeviceApiCall, "ops": TracedOp,
                                                        "host_syncs": HostSyncCall, "step_graphs": StepGraph}
    _record_maps: ClassVar[dict[str, type[Record]]] = {"custom_op_kernels": OpKernels}


# --- trace (torchport.trace): what the section sets beside the trace's predictions -----------------


@dataclass
class EvaluationLine(Record):
    """The evaluation ops and host reads of one user line."""

    location: str | None = None
    op_calls: int = 0
    host_syncs: int = 0
    ops: int = 0

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"location"})


@dataclass
class EvaluationSummary(Record):
    """Evaluation and sampling the traced iterations ran outside the training step, per user line."""

    op_calls: int = 0
    distinct_ops: int = 0
    host_syncs: int = 0
    steps: list[int] = field(default_factory=list)
    model_calls: list[ModelCall] = field(default_factory=list)
    locations: list[EvaluationLine] = field(default_factory=list)
    locations_total: int = 0
    criterion: str = ""

    _record_lists: ClassVar[dict[str, type[Record]]] = {"model_calls": ModelCall, "locations": EvaluationLine}


@dataclass
class XlaPrediction(Record):
    """What the trace predicts torch_xla will do."""

    fallback_ops: list[str] = field(default_factory=list)
    step_graphs: int = 0
    host_syncs_per_step: float = 0.0
    data_dependent_ops_per_step: float = 0.0
    executions_per_step: float = 1.0


@dataclass
class XlaMeasured(Record):
    runs: int = 0
    per_run: list[CounterRun] = field(default_factory=list)

    _record_lists: ClassVar[dict[str, type[Record]]] = {"per_run": CounterRun}


@dataclass
class RecompilingRun(Record):
    """A measured xla run whose warm-up compiled in more than one block, or whose sustained steps compiled."""

    run: int = 0
    warmup_compilations: int = 0
    warmup_blocks_compiling: int = 0
    warmup_blocks: int = 0
    warmup_compile_time_s: float = 0.0
    sustained_compilations: int | None = None

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"sustained_compilations"})


@dataclass
class XlaComparison(Record):
    """The trace's prediction for torch_xla beside what the xla backend measured, and where they disagree."""

    predicted: XlaPrediction = field(default_factory=XlaPrediction)
    measured: XlaMeasured = field(default_factory=XlaMeasured)
    recompiling: list[RecompilingRun] = field(default_factory=list)
    disagreements: list[str] = field(default_factory=list)
    agrees: bool = True
    rules: str = ""

    _records: ClassVar[dict[str, type[Record]]] = {"predicted": XlaPrediction, "measured": XlaMeasured}
    _record_lists: ClassVar[dict[str, type[Record]]] = {"recompiling": RecompilingRun}


class CompileVerdict(Vocabulary):
    """What a measured torch.compile run says of one graph finding of the trace."""

    CONFIRMED = "confirmed"
    REFUTED = "refuted"
    NOT_EXERCISED = "not exercised"
    UNCONFIRMED = "unconfirmed"


@dataclass
class CompileJudgement(Record):
    """One graph finding of the trace judged by what Dynamo did."""

    id: str = ""
    location: str | None = None
    verdict: CompileVerdict | str = CompileVerdict.UNCONFIRMED
    evidence: str = ""

    _words: ClassVar[dict[str, type[Vocabulary]]] = {"verdict": CompileVerdict}
    _written_when_none: ClassVar[frozenset[str]] = frozenset({"location"})


@dataclass
class GraphBreak(Record):
    location: str | None = None
    reason: str | None = None
    count: int | None = None  # how many times it broke there in the phase (a run's counters)

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"location", "reason"})


@dataclass
class RecompileCause(Record):
    """A recompilation Dynamo logged, with the guard that failed."""

    guard: str | None = None
    function: str | None = None  # the recompiled function, and its file:line
    location: str | None = None


@dataclass
class DynamoCounts(Record):
    """What Dynamo did in one phase of a ``*-compile`` run: torchport.dynamo_counters writes it into the
    run's counters, the trace reads it."""

    frames_compiled: int = 0
    graph_breaks: int | None = None  # None: Dynamo's logs were not captured
    recompilations: int | None = None
    graph_break_sites: list[GraphBreak] = field(default_factory=list)
    recompilation_causes: list[RecompileCause] = field(default_factory=list)
    frames_not_compiled: int | None = None
    graphs: int | None = None
    compile_time_s: float | None = None
    source: str | None = None
    problem: str | None = None  # why the graph-break and recompile logs are missing

    _record_lists: ClassVar[dict[str, type[Record]]] = {"graph_break_sites": GraphBreak,
                                                        "recompilation_causes": RecompileCause}


@dataclass
class CompileMeasured(Record):
    """What Dynamo did in one ``*-compile`` backend's first successful run, and the trace's findings judged by it."""

    steps: int = 0
    frames_compiled: int = 0
    graph_breaks: int | None = None  # None: Dynamo's logs were not captured
    recompilations: int | None = None
    sustained_frames_compiled: int | None = None
    findings: list[CompileJudgement] = field(default_factory=list)
    unpredicted_breaks: list[GraphBreak] = field(default_factory=list)

    _record_lists: ClassVar[dict[str, type[Record]]] = {"findings": CompileJudgement, "unpredicted_breaks": GraphBreak}
    _written_when_none: ClassVar[frozenset[str]] = frozenset({"graph_breaks", "recompilations",
                                                             "sustained_frames_compiled"})


@dataclass
class TorchCompileComparison(Record):
    backends: dict[str, CompileMeasured] = field(default_factory=dict)

    _record_maps: ClassVar[dict[str, type[Record]]] = {"backends": CompileMeasured}


# --- trace (torchport.trace): scan's findings for the app's own files, beside the trace's ------------


@dataclass
class RunTimeSighting(Record):
    """A device-typed API call the trace saw run at a scan finding's line, and how often."""

    call: str = ""
    count: int = 0


@dataclass
class ScanHit(Record):
    """One finding of ``torchport scan`` in the app's files (or a device-typed call seen only at run time)."""

    id: str = ""
    title: str = ""
    detail: str = ""
    location: str = ""
    severity: dict[str, str | None] = field(default_factory=dict)  # scan target -> scan's severity there
    replacement: str | None = None
    seen_at_run_time: RunTimeSighting | None = None

    _records: ClassVar[dict[str, type[Record]]] = {"seen_at_run_time": RunTimeSighting}
    _written_when_none: ClassVar[frozenset[str]] = frozenset({"replacement"})


@dataclass
class AppScan(Record):
    """Scan's findings for the app's own files, merged with the device-typed calls the trace saw run."""

    files: list[str] = field(default_factory=list)
    findings: list[ScanHit] = field(default_factory=list)
    total: int = 0
    suppressed: int = 0

    _record_lists: ClassVar[dict[str, type[Record]]] = {"findings": ScanHit}


@dataclass
class TraceSection(Record):
    """The ``trace`` section of a result document (``torchport trace --format json`` writes the same):
    what was traced, the findings, op support and verdict per target, and what was measured beside them."""

    version: str = ""
    status: TraceStatus | str = TraceStatus.FAILED
    reason: str | None = None
    error: ErrorRecord | None = None
    app: str = ""
    steps_requested: int | None = None
    steps_traced: int = 0
    steps_rule: str | None = None
    torch: str | None = None
    targets: list[str] = field(default_factory=list)
    phase_locations: dict[str, str] | None = None  # phase -> the user's line that ran it
    findings: list[Finding] = field(default_factory=list)
    shapes: TraceShapes | None = None
    memory: MemoryFit | None = None
    op_support: dict[str, TargetOpSupport] = field(default_factory=dict)
    device_apis: list[DeviceApiCall] = field(default_factory=list)
    app_scan: AppScan | None = None
    verdicts: dict[str, TargetVerdict] = field(default_factory=dict)
    totals: TraceTotals | None = None
    host_syncs: list[HostSyncCall] = field(default_factory=list)
    ops: list[TracedOp] = field(default_factory=list)
    xla_comparison: XlaComparison | None = None
    construction: TraceConstruction | None = None
    evaluation: EvaluationSummary | None = None
    contract: list[ContractNote] = field(default_factory=list)
    torch_compile_comparison: TorchCompileComparison | None = None

    _records: ClassVar[dict[str, type[Record]]] = {"error": ErrorRecord, "shapes": TraceShapes, "memory": MemoryFit,
                                                   "totals": TraceTotals, "xla_comparison": XlaComparison,
                                                   "construction": TraceConstruction, "app_scan": AppScan,
                                                   "evaluation": EvaluationSummary,
                                                   "torch_compile_comparison": TorchCompileComparison}
    _record_lists: ClassVar[dict[str, type[Record]]] = {"findings": Finding, "contract": ContractNote,
                                                        "device_apis": DeviceApiCall, "host_syncs": HostSyncCall,
                                                        "ops": TracedOp}
    _record_maps: ClassVar[dict[str, type[Record]]] = {"op_support": TargetOpSupport, "verdicts": TargetVerdict}
    _words: ClassVar[dict[str, type[Vocabulary]]] = {"status": TraceStatus}


# --- check (src/torchport/check/): the training worker's job and runs, and each check's figures ----------
# The worker side fills them and writes ``to_dict()`` into its JSON result; the parent reads them back with
# ``from_dict`` once, where the result arrives.  A figures record is filled with ``put`` (``Figures.begin()``
# gives an empty one): it writes exactly the keys put, in the order put, as the dictionaries did.


@dataclass
class TrainSpec(Record):
    """One run the training worker (``torchport.check.jobs:train_job``) makes."""

    label: str = ""
    dtype: str = "float32"
    seed: int = 0
    steps: int = 0
    app_inference: bool = True
    outputs: bool = False  # record the first-step outputs (parity)
    checkpoint_step: int | None = None
    save_final: bool = False
    pipeline: bool = False
    pipeline_per_round: int | None = None
    modules: bool = False  # record every module's output in step 1 (parity's localisation)
    eager: bool = False  # the reference's runs made in a compiling backend's worker


@dataclass
class CheckpointSource(Record):
    """A checkpoint the training worker resumes from, and the run it resumes into (default: the job's)."""

    label: str = ""
    path: str = ""
    into: TrainSpec | None = None

    _records: ClassVar[dict[str, type[Record]]] = {"into": TrainSpec}


@dataclass
class OutsideState(Record):
    """State a model or optimizer carries outside ``state_dict()``: its name, kind and creating line."""

    name: str = ""
    kind: str = ""
    line: str | None = None

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"line"})


@dataclass
class CheckpointFile(Record):
    """A checkpoint's sidecar (``FILE.meta.json``): its size, checksum and step."""

    bytes: int = 0
    sha256: str = ""
    step: int | None = None

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"step"})


@dataclass
class SavedCheckpoint(Record):
    """A checkpoint a training run saved, or why it could not."""

    path: str = ""
    step: int = 0
    outside_state_dict: list[str] = field(default_factory=list)
    outside_state: list[OutsideState] = field(default_factory=list)
    bytes: int | None = None
    sha256: str | None = None
    error: str | None = None

    _record_lists: ClassVar[dict[str, type[Record]]] = {"outside_state": OutsideState}


@dataclass
class RunTiming(Record):
    """The timed steps of a training run (all but the first)."""

    steps: int = 0
    seconds: float = 0.0
    step_s: float = 0.0
    data_wait_s: float = 0.0
    samples_per_step: int = 0


@dataclass
class CollateFunction(Record):
    name: str = ""
    line: str | None = None

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"line"})


@dataclass
class DataDescription(Record):
    """What an app's input pipeline is made of, and where the app builds it."""

    type: str = ""
    constructed_at: str | None = None
    dataloader: bool | None = None
    num_workers: int | None = None
    pin_memory: bool | None = None
    prefetch_factor: int | None = None
    persistent_workers: bool | None = None
    batch_size: int | None = None
    collate_fn: CollateFunction | None = None

    # ``type`` is a field here: the builtin by its full name
    _records: ClassVar[dict[str, builtins.type[Record]]] = {"collate_fn": CollateFunction}


@dataclass
class HostLoad(Record):
    """The host's load averages before and after a measurement, and its CPUs."""

    before: list[float] | None = None
    after: list[float] | None = None
    cpus: int = 1

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"before", "after"})


@dataclass
class PipelineMeasurement(Record):
    """The input pipeline's interleaved timing in a backend's worker (``check.pipeline.measure``)."""

    rounds: int = 0
    per_round: int = 0
    load_s: list[float] = field(default_factory=list)
    compute_s: list[float] = field(default_factory=list)
    batches_per_s: float | None = None
    samples_per_s: float | None = None
    factory_s: float = 0.0
    data: DataDescription = field(default_factory=DataDescription)
    threads: dict[str, int] = field(default_factory=dict)
    load: HostLoad | None = None

    _records: ClassVar[dict[str, type[Record]]] = {"data": DataDescription, "load": HostLoad}
    _written_when_none: ClassVar[frozenset[str]] = frozenset({"batches_per_s", "samples_per_s"})


@dataclass
class TrainedRun(Record):
    """One run of the training worker: what the parity, checkpoint and pipeline checks read."""

    dtype: str = ""
    steps: int = 0
    output_source: str | None = None
    grad_norms: dict[str, float] = field(default_factory=dict)
    output_file: str | None = None
    modules: list[str] | None = None
    module_types: dict[str, str] | None = None
    modules_file: str | None = None
    checkpoint: SavedCheckpoint | None = None
    timing: RunTiming | None = None
    losses: list[float] = field(default_factory=list)
    metric: float | None = None
    metric_higher_is_better: bool = True
    casts_held: int | None = None
    final_file: str | None = None
    pipeline: PipelineMeasurement | None = None
    error: ErrorRecord | None = None  # the float64 ground truth could not be built

    _records: ClassVar[dict[str, type[Record]]] = {"checkpoint": SavedCheckpoint, "timing": RunTiming,
                                                   "pipeline": PipelineMeasurement, "error": ErrorRecord}
    _written_when_none: ClassVar[frozenset[str]] = frozenset({"metric"})


@dataclass
class ResumedRun(Record):
    """A fresh run loaded from another run's checkpoint and trained on, or why it could not be."""

    path: str = ""
    error: str | None = None
    changed_on_load: list[str] | None = None
    not_restored: list[str] = field(default_factory=list)
    start_step: int | None = None
    outside_state_dict: list[str] = field(default_factory=list)
    outside_state: list[OutsideState] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    final_file: str | None = None

    _record_lists: ClassVar[dict[str, type[Record]]] = {"outside_state": OutsideState}


@dataclass
class ResumedFrom(Record):
    path: str = ""
    step: int = 0


@dataclass
class RecoveryWorker(Record):
    """What a recovery worker (``jobs.recovery_job``) adds to its result."""

    deterministic_algorithms: bool = False
    outside_state_dict: list[str] = field(default_factory=list)
    outside_state: list[OutsideState] = field(default_factory=list)
    resumed_from: ResumedFrom | None = None
    invalid_checkpoints: list[str] = field(default_factory=list)
    not_restored: list[str] = field(default_factory=list)
    final_step: int | None = None
    final_file: str | None = None

    _records: ClassVar[dict[str, type[Record]]] = {"resumed_from": ResumedFrom}
    _record_lists: ClassVar[dict[str, type[Record]]] = {"outside_state": OutsideState}
    _written_when_none: ClassVar[frozenset[str]] = frozenset({"resumed_from"})


@dataclass
class CoupledSite(Record):
    """A reduction over the batch dimension at a line of the app."""

    op: str = ""
    line: str | None = None

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"line"})


@dataclass
class OpSequence(Record):
    """The aten ops one rank's eager forward and backward ran, in order (``training.op_sequence``)."""

    count: int = 0
    digest: str = ""
    ops: list[str] = field(default_factory=list)
    sites: list[str | None] = field(default_factory=list)
    batch_coupled: list[CoupledSite] = field(default_factory=list)

    _record_lists: ClassVar[dict[str, type[Record]]] = {"batch_coupled": CoupledSite}


@dataclass
class DdpWorker(Record):
    """One rank's result of ``jobs.ddp_job`` (or the single process's)."""

    status: RunStatus | str | None = None
    error: ErrorRecord | None = None
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    deterministic_algorithms: bool = False
    init_process_group_s: float | None = None
    process_group_backend: str | None = None
    batchnorm_modules: list[str] = field(default_factory=list)
    batchnorm_lines: dict[str, str | None] = field(default_factory=dict)
    step_times_s: list[float] = field(default_factory=list)
    outside_state_dict: list[str] = field(default_factory=list)
    outside_state: list[OutsideState] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    frames_compiled: int | None = None
    samples_per_step: int | None = None
    final_file: str | None = None
    op_sequence: OpSequence | None = None

    _records: ClassVar[dict[str, type[Record]]] = {"error": ErrorRecord, "op_sequence": OpSequence}
    _record_lists: ClassVar[dict[str, type[Record]]] = {"outside_state": OutsideState}
    _words: ClassVar[dict[str, type[Vocabulary]]] = {"status": RunStatus}


class _PassKey(Record):
    """Written with the key ``pass`` (a Python keyword), read into the field ``passed``."""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        return super().from_dict({"passed" if key == "pass" else key: value for key, value in data.items()})

    def to_dict(self) -> dict[str, Any]:
        return {"pass" if key == "passed" else key: value for key, value in super().to_dict().items()}


@dataclass
class ErrorRatio(_PassKey):
    """The error-ratio verdict on one quantity (``check.tolerance.judge``); on the metric, its values too."""

    backend_error: float = 0.0
    reference_error: float = 0.0
    ratio: float = 0.0
    passed: bool = False
    value: float | None = None
    reference_value: float | None = None
    reaches_target: bool | None = None



@dataclass
class DivergingModule(_PassKey):
    """The first module whose output fails the error-ratio rule, in the order modules finished their forward."""

    module: str = ""
    position: int = 0
    backend_error: float = 0.0
    reference_error: float = 0.0
    ratio: float = 0.0
    passed: bool = False
    type: str | None = None

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"type"})


@dataclass
class Figures(Record):
    """A check's figures.  ``begin()`` gives an empty one to fill with ``put``."""

    @classmethod
    def begin(cls) -> Self:
        return cls(key_order=())


@dataclass
class DeterminismFigures(Figures):
    runs: int = 0
    steps: int = 0
    bit_exact: bool | None = None


@dataclass
class ParityFigures(Figures):
    dtype: str = ""
    reference_not_built: bool | None = None
    steps: int | None = None
    worst_quantity: str | None = None
    worst_ratio: float | None = None
    quantities: dict[str, ErrorRatio] = field(default_factory=dict)
    gradients_checked: int | None = None
    gradients_failing: int | None = None
    final_loss: float | None = None
    reference_final_loss: float | None = None
    float64_final_loss: float | None = None
    losses: list[float] | None = None
    reference_losses: list[float] | None = None
    float64_losses: list[float] | None = None
    output_source: str | None = None
    first_step_failed: list[str] = field(default_factory=list)
    float64_casts_held: int | None = None
    diverging_module: DivergingModule | None = None

    _records: ClassVar[dict[str, type[Record]]] = {"diverging_module": DivergingModule}
    _record_maps: ClassVar[dict[str, type[Record]]] = {"quantities": ErrorRatio}


@dataclass
class CheckpointFigures(Figures):
    step: int | None = None
    steps: int | None = None
    bytes: int | None = None
    outside_state_dict: list[str] = field(default_factory=list)
    outside_state: list[OutsideState] = field(default_factory=list)
    not_restored: list[str] = field(default_factory=list)
    parameter_error: float | None = None
    backends_apart: float | None = None
    bound: float | None = None
    bit_exact: bool | None = None
    loss_error: float | None = None

    _record_lists: ClassVar[dict[str, type[Record]]] = {"outside_state": OutsideState}


class PipelineVerdict(Vocabulary):
    """The input pipeline's band: the share of a step spent waiting for data."""

    KEEPS_UP = "keeps up"
    BORDERLINE = "borderline"
    INPUT_BOUND = "input-bound"


@dataclass
class PipelineBand(Record):
    keeps_up_below: float = 0.0
    input_bound_above: float = 0.0


@dataclass
class PipelineFigures(Figures):
    data_batches_per_s: float | None = None
    data_samples_per_s: float | None = None
    load_s: float | None = None
    compute_step_s: float | None = None
    train_steps_per_s: float | None = None
    load_share: float | None = None
    load_share_interval: list[float] | None = None
    wait_s: float | None = None
    min_wait_s: float | None = None
    threads: dict[str, int] | None = None
    load: HostLoad | None = None
    uncertain: str | None = None
    rounds: int | None = None
    band: PipelineBand | None = None
    verdict: PipelineVerdict | str | None = None
    headroom: float | None = None
    overlapped: bool | None = None
    input_bound: bool | None = None
    step_time_source: str | None = None
    evaluation_step_s: float | None = None
    data: DataDescription | None = None
    suggestions: list[str] = field(default_factory=list)

    _records: ClassVar[dict[str, type[Record]]] = {"load": HostLoad, "band": PipelineBand, "data": DataDescription}
    _words: ClassVar[dict[str, type[Vocabulary]]] = {"verdict": PipelineVerdict}


@dataclass
class RecoveryFigures(Figures):
    steps: int | None = None
    checkpoint_every: int | None = None
    kill_seed: int | None = None
    kill_step: int | None = None
    died_after_step: int | None = None
    worker_exit: str | None = None
    resumed_from_step: int | None = None
    work_lost_steps: int | None = None
    work_lost_share: float | None = None
    restart_s: float | None = None
    kill_to_first_resumed_step_s: float | None = None
    invalid_checkpoints: list[str] = field(default_factory=list)
    not_restored: list[str] = field(default_factory=list)
    outside_state_dict: list[str] = field(default_factory=list)
    outside_state: list[OutsideState] = field(default_factory=list)
    parameter_error: float | None = None
    bit_exact: bool | None = None
    bound: float | None = None
    exact_required: bool | None = None

    _record_lists: ClassVar[dict[str, type[Record]]] = {"outside_state": OutsideState}


@dataclass
class FramesCompiled(Record):
    """Dynamo frames each process compiled (None on an eager backend)."""

    ranks: dict[str, int | None] = field(default_factory=dict)
    single_process: int | None = None

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"single_process"})


@dataclass
class DistributedFigures(Figures):
    process_group_backend: str | None = None
    nproc_per_node: int | None = None
    nnodes: int | None = None
    steps: int | None = None
    torchrun_s: float | None = None
    world_size: int | None = None
    slowest_rank_step_s: float | None = None
    rank_step_s: dict[str, float | None] = field(default_factory=dict)
    single_process_step_s: float | None = None
    speedup: float | None = None
    scaling_efficiency: float | None = None
    global_batch_samples: int | None = None
    samples_per_s: float | None = None
    single_process_samples_per_s: float | None = None
    parameter_error: float | None = None
    bound: float | None = None
    init_process_group_s: float | None = None
    batchnorm_modules: list[str] = field(default_factory=list)
    batchnorm_lines: dict[str, str | None] = field(default_factory=dict)
    batch_coupled: list[CoupledSite] = field(default_factory=list)
    outside_state_dict: list[str] = field(default_factory=list)
    outside_state: list[OutsideState] = field(default_factory=list)
    rank_op_sequences: str | None = None
    frames_compiled: FramesCompiled | None = None
    efficient_from: float | None = None

    _records: ClassVar[dict[str, type[Record]]] = {"frames_compiled": FramesCompiled}
    _record_lists: ClassVar[dict[str, type[Record]]] = {"batch_coupled": CoupledSite, "outside_state": OutsideState}


# check name -> its figures record (``Check.figures_as`` reads a document's figures with it)
CHECK_FIGURES: dict[str, type[Figures]] = {
    "determinism": DeterminismFigures, "parity": ParityFigures, "checkpoint": CheckpointFigures,
    "pipeline": PipelineFigures, "recovery": RecoveryFigures, "distributed": DistributedFigures,
}


@dataclass
class CheckBudgetRecord(Record):
    """``config.budget`` of the checks section: what ``check --budget`` spent, sized and skipped."""

    budget_s: float = 0.0
    spent_s: float = 0.0
    step_s: dict[str, float] = field(default_factory=dict)
    sized: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


@dataclass
class ChecksConfig(Record):
    """``config`` of the checks section.  Each worker check's settings come under its name, as it
    writes them (kept in ``extra``); a record read from a short section gives the report's defaults."""

    app: str = ""
    checks: list[str] = field(default_factory=list)
    backends: list[str] = field(default_factory=list)
    reference: str = "cpu"
    reference_worker: str | None = None
    ground_truth: str = "cpu, float64"
    steps: int | None = None
    checkpoint_step: int | None = None
    dtype: str = "float32"
    seed: int = 0
    ratio_limit: float | None = None
    floor: float = 0.0
    close: float | None = None
    budget: CheckBudgetRecord | None = None

    _records: ClassVar[dict[str, type[Record]]] = {"budget": CheckBudgetRecord}


@dataclass
class AppFailure(Record):
    """The app's own error, when the reference run failed in the app's code."""

    message: str | None = None
    location: str | None = None
    kind: str | None = None

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"message", "location", "kind"})


@dataclass
class ChecksSection(Record):
    """The ``checks`` section of a result document (``torchport check --format json`` writes the same)."""

    checks: list[Check] = field(default_factory=list)
    config: ChecksConfig = field(default_factory=ChecksConfig)
    backends: dict[str, dict[str, Any]] = field(default_factory=dict)  # backend -> its availability verdict
    app_error: AppFailure | None = None
    duration_s: float | None = None
    note: str | None = None  # evaluate's stage: what it ran, and what ``torchport check`` adds

    _records: ClassVar[dict[str, type[Record]]] = {"config": ChecksConfig, "app_error": AppFailure}
    _record_lists: ClassVar[dict[str, type[Record]]] = {"checks": Check}
    _written_when_none: ClassVar[frozenset[str]] = frozenset({"app_error"})


# --- script mode's sections (issue 27: script/, report/) -------------------------------------------


@dataclass
class ScriptVerdict(Record):
    """Whether a script ran on one backend, with the device's evidence; the words of ``verdict`` are
    torchport.script.crossref's (runs by configuration alone, runs after redirects, did not run on the device, ...)."""

    verdict: str = ""
    text: str = ""
    lines: list[str] | None = None  # runs after redirects: the lines to change
    evidence: dict[str, Any] | None = None  # the first finished run's device evidence (torchport.script.evidence)


@dataclass
class ScriptLine(Record):
    """A line of the user's files tied to CUDA: redirected at run time, found by scan, or both."""

    location: str = ""
    status: str = ""
    redirects: list[str] = field(default_factory=list)
    backends: list[str] = field(default_factory=list)
    run_time_locations: list[str] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)
    fixable: bool = False


@dataclass
class ConfigurationFinding(Record):
    """How a backend's model differs from the reference's, at the line that moved it to the device."""

    backend: str = ""
    rule: str = ""
    location: str | None = None
    message: str = ""

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"location"})


@dataclass
class ParityResult(Record):
    worst_relative_difference: float = 0.0
    status: CheckStatus | str = CheckStatus.PASS

    _words: ClassVar[dict[str, type[Vocabulary]]] = {"status": CheckStatus}


@dataclass
class LossParity(Record):
    """Script mode's parity: each backend's first losses against the reference's first run."""

    status: str = ""  # compared, not compared
    reason: str | None = None
    steps: int | None = None
    tolerance: float | None = None
    reference_run_to_run: float | None = None
    rule: str | None = None
    backends: dict[str, ParityResult] | None = None

    _record_maps: ClassVar[dict[str, type[Record]]] = {"backends": ParityResult}


@dataclass
class ScriptSection(Record):
    """The document's ``script``: a verdict per backend, the lines tied to CUDA, parity and configuration."""

    path: str = ""
    files_scanned: list[str] = field(default_factory=list)
    coverage_source: str | None = None
    verdicts: dict[str, ScriptVerdict] = field(default_factory=dict)
    lines: list[ScriptLine] = field(default_factory=list)
    scan_error: str | None = None
    parity: LossParity | None = None
    configuration: list[ConfigurationFinding] = field(default_factory=list)

    _records: ClassVar[dict[str, type[Record]]] = {"parity": LossParity}
    _record_lists: ClassVar[dict[str, type[Record]]] = {"lines": ScriptLine, "configuration": ConfigurationFinding}
    _record_maps: ClassVar[dict[str, type[Record]]] = {"verdicts": ScriptVerdict}
    _written_when_none: ClassVar[frozenset[str]] = frozenset({"coverage_source", "scan_error"})


@dataclass
class TorchrunRank(Record):
    """One rank of the script under torchrun: how it ended, its step time and losses, what it redirected."""

    status: RunStatus | str | None = None
    error: ErrorRecord | None = None
    step_s: float | None = None
    redirects: list[dict[str, Any]] = field(default_factory=list)  # as the worker's redirect.Redirects.fired writes them
    losses: list[float] = field(default_factory=list)
    process_groups: Any = None  # what the rank's script made of torch.distributed (torchport.script.job)
    user_files: list[str] | None = None

    _records: ClassVar[dict[str, type[Record]]] = {"error": ErrorRecord}
    _words: ClassVar[dict[str, type[Vocabulary]]] = {"status": RunStatus}
    _written_when_none: ClassVar[frozenset[str]] = frozenset({"status", "error", "step_s", "process_groups",
                                                             "user_files"})


@dataclass
class ScriptDistributed(Record):
    """The document's ``script_distributed``: the script under torchrun on the reference backend."""

    backend: str | None = None
    nproc_per_node: int | None = None
    status: str = ""  # pass, fail, skipped, not applicable
    ranks: dict[str, TorchrunRank] = field(default_factory=dict)
    torchrun_s: float | None = None
    reason: str = ""
    comparison: str | None = None

    _record_maps: ClassVar[dict[str, type[Record]]] = {"ranks": TorchrunRank}
    _written_when_none: ClassVar[frozenset[str]] = frozenset({"backend"})


@dataclass
class ScriptCoverage(Record):
    """Line coverage (coverage.py) of the user's files in script mode's untimed pass."""

    source: str = ""
    files: dict[str, list[int]] = field(default_factory=dict)
    processes_measured: int = 1


# --- what a script-mode worker records about its run (issue 27: script/) ----------------------------


@dataclass
class FiredRedirect(Record):
    """A CUDA call redirected to the backend's device at one line of the user's code, and how often."""

    call: str = ""
    location: str | None = None
    count: int = 0
    becomes: str | None = None  # what the call became, where it is not the call with another device

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"location"})


@dataclass
class MachineLoad(Record):
    """The machine's 1-minute load average at a run's start and end, and its CPU count."""

    start: float | None = None
    cpus: int | None = None
    end: float | None = None

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"start", "cpus"})


@dataclass
class ModelFacts(Record):
    """The script's model as it trained on one backend."""

    type: str = ""
    parameter_tensors: int = 0
    parameters: int = 0
    tied: list[list[str]] = field(default_factory=list)  # parameter names that share one tensor
    dtypes: list[str] = field(default_factory=list)
    buffers: list[str] = field(default_factory=list)
    moved_at: str | None = None  # the user's line that moved it to the device

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"moved_at"})


@dataclass
class DeviceEvidence(Record):
    """What shows that a script's run used its backend's device, and the judgement of it."""

    backend: str = ""
    device_type: str = ""
    parameter_devices: list[str] = field(default_factory=list)
    xla: dict[str, Any] | None = None  # XLA's counters over the script: compilations, executions, ops lowered
    dynamo: dict[str, Any] | None = None  # torch.compile's frames and graphs over the script
    device_memory_peak_bytes: int | None = None
    ran_on_device: bool | None = None
    proof: str | None = None
    why: str | None = None


# --- summaries, comparisons and the report (issue 27: summary.py, compare.py, report/, script/) ----


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
    plan: dict[str, Any] | None = None

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
    """The raw samples of one scenario (training, inference) in one run, as
    summary.py reads them.  ``RunRecord`` keeps them as the worker wrote them
    (a plain dictionary); this is the typed view of that dictionary."""

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
class ConfigConsistency(Record):
    """Whether every backend ran the same effective configuration (by its hash)."""

    consistent: bool = True
    hashes: dict[str, list[str]] = field(default_factory=dict)
    differing: list[str] = field(default_factory=list)


@dataclass
class StageError(Record):
    """A stage (trace, checks, ...) that raised: the timing results stand."""

    stage: str = ""
    message: str = ""
    location: str | None = None


@dataclass
class BudgetBackend(Record):
    """What the time budget bought one backend."""

    runs: int = 0
    precision_reached: float | None = None
    target_met: bool | None = None
    shares_s: list[float] | None = None
    stopped_by: list[str | None] | None = None


@dataclass
class BudgetSection(Record):
    """The document's ``budget``: the budget, what it bought per backend, the stages it sized, what it could not buy."""

    budget_s: float = 0.0
    explicit: bool | None = None
    precision_target: float | None = None
    adaptive: bool = False
    elapsed_s: float | None = None
    backends: dict[str, BudgetBackend] = field(default_factory=dict)
    stages: dict[str, Any] = field(default_factory=dict)  # stage -> its size (steps, bounds, fits, why)
    could_not: list[str] = field(default_factory=list)

    _record_maps: ClassVar[dict[str, type[Record]]] = {"backends": BudgetBackend}

    def sized_stages(self) -> dict[str, dict[str, Any]]:
        """The stages sized by (or checked against) the budget."""
        return {name: size for name, size in self.stages.items() if isinstance(size, dict) and size.get("fits")}


@dataclass
class ResultDocument(Record):
    """A whole result document, as the report layer reads it: the backends, the
    configuration and the sections the stages added.  Written by the evaluation
    as plain JSON; read once into this by ``torchport.document.result_record``."""

    # None: not in the document (one of another schema version is read for its machine's name only).
    schema_version: str | None = None
    tool: dict[str, Any] = field(default_factory=dict)
    status: DocumentStatus | str | None = None
    status_reason: str | None = None
    created: str | None = None
    updated: str | None = None
    command: list[str] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    app: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    reference: str | None = None
    reference_note: str | None = None
    backends: dict[str, BackendEntry] = field(default_factory=dict)
    config_consistency: ConfigConsistency | None = None
    script: ScriptSection | None = None
    script_coverage: ScriptCoverage | None = None
    script_distributed: ScriptDistributed | None = None
    stage_errors: list[StageError] = field(default_factory=list)
    prices: dict[str, float] = field(default_factory=dict)
    budget: BudgetSection | None = None
    trace: TraceSection | None = None
    checks: ChecksSection | None = None

    _records: ClassVar[dict[str, type[Record]]] = {"config_consistency": ConfigConsistency, "budget": BudgetSection,
                                                   "trace": TraceSection, "script": ScriptSection,
                                                   "script_distributed": ScriptDistributed,
                                                   "script_coverage": ScriptCoverage, "checks": ChecksSection}
    _record_lists: ClassVar[dict[str, type[Record]]] = {"stage_errors": StageError}
    _record_maps: ClassVar[dict[str, type[Record]]] = {"backends": BackendEntry}
    _words: ClassVar[dict[str, type[Vocabulary]]] = {"status": DocumentStatus}

    @property
    def app_spec(self) -> str:
        return str(self.app.get("spec"))

    def check_records(self) -> list[Check]:
        return self.checks.checks if self.checks else []

    def section(self, key: str) -> Any:
        """A stage's section by its key in the document, as the document holds it (what a stage renders)."""
        value = getattr(self, key) if key in self._declared() else self.extra.get(key)
        return value.to_dict() if isinstance(value, Record) else value


# --- torchport compare's document (issue 27: compare.py, report/compare_text.py, report/html.py) ---


def _every_optional_field(cls: type[Record]) -> frozenset[str]:
    """Every field whose value may be None: a comparison writes all of its keys, null included."""
    declared = set(cls._declared())
    return frozenset(f.name for f in dataclasses.fields(cls) if f.name in declared and "None" in str(f.type))


@dataclass
class CheckOutcomes(Record):
    """Pass/fail counts of the checks that concern one backend, and the failed ones named."""

    counts: dict[str, int] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)


@dataclass
class StepTimeInterval(Record):
    """The median step time with its 95% interval and the statistic's warnings."""

    median: float = 0.0
    ci95: list[float] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass
class ComparisonEntry(Record):
    """One measured backend of one result file in a comparison."""

    machine: str = ""
    backend: str = ""
    file: str = ""
    app: str | None = None
    proxy_for: str | None = None
    status: str = ""
    config_hash: str | None = None
    runs_ok: int | None = None
    step_time_s: StepTimeInterval | None = None
    samples_per_s: float | None = None
    samples_per_s_ci95: list[float] | None = None
    tokens_per_s: float | None = None
    time_per_step_compile_included_s: float | None = None
    compile_included_steps: int | None = None
    first_step_s: float | None = None
    time_to_first_step_s: float = 0.0
    peak_memory_bytes: int | None = None
    peak_memory_kind: str = ""
    final_loss: float | None = None
    checks: CheckOutcomes = field(default_factory=CheckOutcomes)
    comparable: bool = False
    reason: str | None = None
    ratio: BackendComparison | None = None
    price_usd_per_hour: float | None = None
    price_source: str | None = None
    cost: Cost | None = None
    reference: bool = False

    _records: ClassVar[dict[str, type[Record]]] = {"step_time_s": StepTimeInterval, "checks": CheckOutcomes,
                                                   "ratio": BackendComparison, "cost": Cost}


@dataclass
class NotComparable(Record):
    """A result file (backend None) or one of its backends left out of the ratios, and why."""

    machine: str = ""
    backend: str | None = None
    file: str = ""
    reason: str | None = None


@dataclass
class ComparedMachine(Record):
    name: str = ""
    file: str = ""
    app: str | None = None
    status: str | None = None
    updated: str | None = None
    schema_version: str | None = None
    environment: dict[str, Any] = field(default_factory=dict)  # the fields that change a figure


@dataclass
class EnvironmentDifference(Record):
    field: str = ""  # (the document's key; it hides dataclasses.field in this class's body)
    values: dict[str, str] = dataclasses.field(default_factory=dict)  # machine -> the value as text


@dataclass
class ComparisonReference(Record):
    machine: str = ""
    backend: str | None = None
    app: str | None = None
    config_hash: str | None = None


@dataclass
class Regression(Record):
    """An entry slower than the reference by more than the gate's percentage; ``why`` it could not gate, if so."""

    machine: str = ""
    backend: str = ""
    slower_by: float = 0.0
    ci95: list[float] = field(default_factory=list)
    why: str | None = None


@dataclass
class ComparisonDocument(Record):
    """``torchport compare``'s document (kind ``torchport-comparison``): what the terminal, markdown and HTML draw."""

    kind: str = ""
    version: str = ""
    created: str = ""
    tool: dict[str, str] = field(default_factory=dict)
    reference: ComparisonReference = field(default_factory=ComparisonReference)
    machines: list[ComparedMachine] = field(default_factory=list)
    entries: list[ComparisonEntry] = field(default_factory=list)
    not_comparable: list[NotComparable] = field(default_factory=list)
    environment_differences: list[EnvironmentDifference] = field(default_factory=list)
    # With --fail-on-regression only.
    regressions: list[Regression] | None = None
    regressions_not_gated: list[Regression] | None = None
    fail_on_regression_pct: float | None = None

    _records: ClassVar[dict[str, type[Record]]] = {"reference": ComparisonReference}
    _record_lists: ClassVar[dict[str, type[Record]]] = {
        "machines": ComparedMachine, "entries": ComparisonEntry, "not_comparable": NotComparable,
        "environment_differences": EnvironmentDifference, "regressions": Regression, "regressions_not_gated": Regression}


for _written_whole in (ComparisonEntry, NotComparable, ComparedMachine, ComparisonReference):
    _written_whole._written_when_none = _every_optional_field(_written_whole)


# --- spinecore (backends/, remote/, envs.py, budget.py, planning.py, stages.py): what they pass along ------
# Not parts of result.json unless a comment says so: the manifest file of a torchport environment and the
# state ``torchport env list`` and ``torchport info`` print (their JSON is ``to_dict()``), the counters a
# backend's phase summary writes into a run's ``counters``.


@dataclass
class EnvManifest(Record):
    """A torchport environment's manifest file, written last when the environment is created."""

    name: str = ""
    purpose: str = ""
    requirements: list[str] = field(default_factory=list)
    extras: list[str] = field(default_factory=list)
    installed: dict[str, str] = field(default_factory=dict)  # distribution -> version, from pip freeze
    python: str = ""
    created: str = ""


@dataclass
class EnvState(Record):
    """Where a torchport environment is and whether it is usable (``problem`` says why not)."""

    name: str = ""
    path: str = ""
    python: str = ""
    ready: bool = False
    problem: str | None = None
    manifest: EnvManifest | None = None

    _records: ClassVar[dict[str, type[Record]]] = {"manifest": EnvManifest}
    _written_when_none: ClassVar[frozenset[str]] = frozenset({"problem", "manifest"})


# A run's ``counters`` (result.json): what a backend's device counted in one phase, beside DYNAMO's DynamoCounts.


@dataclass
class XlaCounters(Record):
    """torch_xla's metrics between two snapshots.  ``fallback_ops``: ``aten::*`` ops that ran on the CPU
    because XLA has no lowering for them (or, like ``aten::_local_scalar_dense``, a host sync)."""

    compilations: int = 0
    compile_time_s: float = 0.0
    cached_compilations: int = 0
    executions: int = 0
    execute_time_s: float = 0.0
    transfers_to_device: int = 0
    transfers_from_device: int = 0
    graph_cuts: int = 0
    fallback_ops: dict[str, int] = field(default_factory=dict)


@dataclass
class TpuCacheCounters(Record):
    """TorchTPU's eager compilation cache between two snapshots; None: this version does not count it."""

    compilations: int | None = None
    cache_hits: int | None = None
    cache_misses: int | None = None
    source: str = ""

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"compilations", "cache_hits", "cache_misses"})


# targets.json (torchport.remote): the trace's prediction per family beside what each target measured.


@dataclass
class PredictedCounts(Record):
    """For the xla family: the graphs the trace predicted beside the compilations each run measured."""

    agrees: bool = False
    disagreements: list[str] = field(default_factory=list)
    predicted_step_graphs: int | None = None
    measured_compilations: list[int | None] = field(default_factory=list)

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"predicted_step_graphs"})


@dataclass
class PredictionRow(Record):
    """One backend of a predicted family on one target: the verdict, what was measured, and whether it hit."""

    target: str = ""
    backend: str = ""
    family: str = ""
    predicted: TraceVerdictStatus | str = TraceVerdictStatus.UNKNOWN
    predicted_text: str = ""
    predicted_fallback_ops: list[str] = field(default_factory=list)
    measured: str = ""
    hit: bool | None = None  # None: an unknown verdict is not judged
    verdict: str = ""  # the answer for the family: what was measured
    counts: PredictedCounts | None = None

    _records: ClassVar[dict[str, type[Record]]] = {"counts": PredictedCounts}
    _words: ClassVar[dict[str, type[Vocabulary]]] = {"predicted": TraceVerdictStatus}
    _written_when_none: ClassVar[frozenset[str]] = frozenset({"hit"})


@dataclass
class PredictionTable(Record):
    predictor: str | None = None  # the target whose trace made the predictions
    rows: list[PredictionRow] = field(default_factory=list)
    hits: int = 0
    judged: int = 0
    hit_rate: float | None = None
    note: str | None = None  # why nothing was judged

    _record_lists: ClassVar[dict[str, type[Record]]] = {"rows": PredictionRow}
    _written_when_none: ClassVar[frozenset[str]] = frozenset({"predictor", "hit_rate", "note"})


# evaluate --budget (torchport.budget): a run's share, carried in its job, and what the budget bought
# (result.json's ``budget``).


@dataclass
class RunBudget(Record):
    """The ``budget`` entry of one run's job: its deadline (wall clock), its share and the precision to reach
    (None: sample until the deadline); the worker's sampling (torchport.sampling) reads it."""

    deadline: float = 0.0
    share_s: float = 0.0
    budget_s: float = 0.0
    precision: float | None = None

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"precision"})


@dataclass
class BackendBudget(Record):
    """What the budget bought one backend: its runs, their shares, and the precision reached."""

    runs: int = 0
    precision_reached: float | None = None
    target_met: bool | None = None  # None: no target asked for, or nothing measured
    shares_s: list[float] = field(default_factory=list)
    stopped_by: list[str | None] = field(default_factory=list)  # per run: what ended its sampling

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"precision_reached", "target_met"})


@dataclass
class BudgetRecord(Record):
    budget_s: float = 0.0
    explicit: bool = False
    precision_target: float | None = None
    adaptive: bool = False
    elapsed_s: float | None = None
    backends: dict[str, BackendBudget] = field(default_factory=dict)
    # The time left when the stages were sized, each sized stage's own figures, and its workers' timeout.
    stages: dict[str, Any] = field(default_factory=dict)
    could_not: list[str] = field(default_factory=list)

    _record_maps: ClassVar[dict[str, type[Record]]] = {"backends": BackendBudget}
    _written_when_none: ClassVar[frozenset[str]] = frozenset({"precision_target"})


# What a backend says about itself (``torchport backends``, ``torchport info``, and each result's backend entry).


@dataclass
class EnvironmentPins(Record):
    """What the torchport environment a backend's workers run in was made with."""

    requirements: list[str] = field(default_factory=list)
    installed: dict[str, str] = field(default_factory=dict)
    python: str = ""
    created: str = ""


@dataclass
class BackendDescription(Record):
    name: str = ""
    title: str = ""
    device_type: str = ""
    compiles: bool = False
    environment: str | None = None  # the torchport environment its workers run in; None: torchport's own
    proxy_for: str | None = None
    verification: str = ""
    environment_pins: EnvironmentPins | None = None  # only for a backend with an environment

    _records: ClassVar[dict[str, type[Record]]] = {"environment_pins": EnvironmentPins}
    _written_when_none: ClassVar[frozenset[str]] = frozenset({"environment", "proxy_for"})


# result.json's ``environment``: the machine, its torch and accelerators (torchport.environment).


@dataclass
class Accelerator(Record):
    type: str = ""
    index: int = 0
    name: str = ""
    memory_bytes: int | None = None


@dataclass
class MachineEnvironment(Record):
    python: str = ""
    torch: str | None = None
    torch_cuda: str | None = None
    torch_hip: str | None = None
    platform: str = ""
    cpu: str = ""
    cpu_count: int = 1
    memory_bytes: int | None = None
    hostname: str = ""
    executable: str = ""
    accelerators: list[Accelerator] = field(default_factory=list)
    driver: str | None = None  # the NVIDIA driver's version
    # Backend plugins that could not be used (source, problem): a backend missing from the result is explained here.
    backend_plugin_problems: list[dict[str, str]] = field(default_factory=list)

    _record_lists: ClassVar[dict[str, type[Record]]] = {"accelerators": Accelerator}
    _written_when_none: ClassVar[frozenset[str]] = frozenset({"torch", "torch_cuda", "torch_hip", "memory_bytes",
                                                              "driver"})


# targets.json (torchport.remote): one row per target.  The runner's threads fill a row as a dictionary (it is
# saved after every change); the combined answer reads the rows back through TargetRow.


class TargetStatus(Vocabulary):
    WAITING = "waiting"
    LAUNCHING = "launching"  # a sky: target's cluster is coming up
    SETTING_UP = "setting up"
    RUNNING = "running"
    DETACHED = "detached"  # the connection dropped; ``torchport collect`` reattaches
    OK = "ok"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


@dataclass
class TargetTimings(Record):
    setup_s: float | None = None
    run_s: float | None = None
    total_s: float | None = None


@dataclass
class RemoteFacts(Record):
    """The remote interpreter the target's run used."""

    python: str = ""
    torch: str = ""
    executable: str = ""


@dataclass
class TargetRow(Record):
    name: str = ""
    target: str = ""  # as given to --on
    kind: str = ""  # local, ssh, sky
    status: TargetStatus | str = TargetStatus.WAITING
    cause_kind: str | None = None
    cause: str | None = None
    result: str | None = None  # its result file, relative to the output folder
    timings: TargetTimings | None = None
    remote: RemoteFacts | None = None
    venv: str | None = None  # created or reused
    stderr_tail: list[str] | None = None
    run_id: str | None = None
    remote_base: str | None = None
    remote_python: str | None = None
    cluster: str | None = None
    resources: str | None = None
    cluster_removed: bool | None = None
    teardown_error: str | None = None
    remote_removed: bool | None = None

    _records: ClassVar[dict[str, type[Record]]] = {"timings": TargetTimings, "remote": RemoteFacts}
    _words: ClassVar[dict[str, type[Vocabulary]]] = {"status": TargetStatus}


__all__ = [
    "FiredRedirect",
    "MachineLoad",
    "ModelFacts",
    "DeviceEvidence",
    "TorchrunRank",
    "ScriptCoverage",
    "ScriptVerdict",
    "ScriptLine",
    "ConfigurationFinding",
    "ParityResult",
    "LossParity",
    "ScriptSection",
    "ScriptDistributed",
    "CheckOutcomes",
    "StepTimeInterval",
    "ComparisonEntry",
    "NotComparable",
    "ComparedMachine",
    "EnvironmentDifference",
    "ComparisonReference",
    "Regression",
    "ComparisonDocument",
    "SampleBlock",
    "WarmupSamples",
    "SustainedSamples",
    "ScenarioSamples",
    "LossAtCommonStep",
    "BackendComparison",
    "ConfigConsistency",
    "StageError",
    "BudgetBackend",
    "BudgetSection",
    "ResultDocument",
    # spinecore
    "EnvManifest",
    "EnvState",
    "TpuCacheCounters",
    "PredictedCounts",
    "PredictionRow",
    "PredictionTable",
    "BackendBudget",
    "BudgetRecord",
    "RunBudget",
    "Accelerator",
    "BackendDescription",
    "EnvironmentPins",
    "MachineEnvironment",
    "RemoteFacts",
    "TargetRow",
    "TargetStatus",
    "TargetTimings",
    "XlaCounters",
    "AppFailure",
    "CheckBudgetRecord",
    "CheckpointFigures",
    "CheckpointFile",
    "CheckpointSource",
    "ChecksConfig",
    "ChecksSection",
    "CHECK_FIGURES",
    "CollateFunction",
    "CoupledSite",
    "DataDescription",
    "DdpWorker",
    "DeterminismFigures",
    "DistributedFigures",
    "DivergingModule",
    "ErrorRatio",
    "Figures",
    "FramesCompiled",
    "HostLoad",
    "OpSequence",
    "OutsideState",
    "ParityFigures",
    "PipelineBand",
    "PipelineFigures",
    "PipelineMeasurement",
    "PipelineVerdict",
    "RecoveryFigures",
    "RecoveryWorker",
    "ResumedFrom",
    "ResumedRun",
    "RunTiming",
    "SavedCheckpoint",
    "TrainSpec",
    "TrainedRun",
    "BackendEntry",
    "BackendStatus",
    "Check",
    "ChipFit",
    "ContractNote",
    "CheckStatus",
    "Cost",
    "CounterRow",
    "DeviceMemory",
    "DocumentStatus",
    "ErrorKind",
    "ErrorRecord",
    "FailureDigest",
    "MemoryFit",
    "OpStatus",
    "OpSupportRow",
    "Finding",
    "Record",
    "RunRecord",
    "RunSeries",
    "RunStatus",
    "ScenarioSummary",
    "Stat",
    "Summary",
    "TargetOpSupport",
    "TargetVerdict",
    "TraceSeverity",
    "TraceSection",
    "TraceShapes",
    "TraceStatus",
    "TraceTotals",
    "VaryingDim",
    "TraceVerdictStatus",
    "Vocabulary",
    "WarmupRecompiling",
    # trace: the tracing worker's answer
    "BatchSignature",
    "ConstructionSite",
    "DataScan",
    "DeviceApiCall",
    "GraphDifference",
    "HostSyncCall",
    "ModelCall",
    "OpKernels",
    "StepGraph",
    "StepMemory",
    "TraceConstruction",
    "TracedEvaluation",
    "TracedOp",
    "WorkerTrace",
    "CompileVerdict",
    "AppScan",
    "RunTimeSighting",
    "ScanHit",
    "DynamoCounts",
    "RecompileCause",
    "CompileJudgement",
    "CompileMeasured",
    "CounterRun",
    "EvaluationLine",
    "EvaluationSummary",
    "GraphBreak",
    "RecompilingRun",
    "TorchCompileComparison",
    "XlaComparison",
    "XlaMeasured",
    "XlaPrediction",
]
