"""What ``torchport trace`` and evaluate's trace stage record: the tracing worker's answer, read once in the parent, and what the section sets beside the trace's predictions."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from torchport.records.base import Record, TraceStatus, Vocabulary
from torchport.records.core import (
    ContractNote,
    CounterRun,
    ErrorRecord,
    Finding,
    MemoryFit,
    TargetOpSupport,
    TargetVerdict,
    TraceShapes,
    TraceTotals,
)

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
    library: str | None = None  # innermost library frame below the user's, e.g. transformers/x.py:12

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"location", "module", "flops", "library"})


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

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"location", "module", "library"})


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

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"location"})


@dataclass
class TracedEvaluation(Record):
    """Evaluation and sampling the traced iterations ran outside the training step."""

    ops: list[TracedOp] = field(default_factory=list)
    host_syncs: list[HostSyncCall] = field(default_factory=list)
    model_calls: list[ModelCall] = field(default_factory=list)

    _record_lists: ClassVar[dict[str, type[Record]]] = {"ops": TracedOp, "host_syncs": HostSyncCall,
                                                        "model_calls": ModelCall}


@dataclass
class TracerSnapshot(Record):
    """What the op tracer saw so far (``torchport.trace.tracer.OpTracer.snapshot``): the worker saves it
    into its trace, which the parent reads as ``WorkerTrace``; ``activation_bytes`` goes to the step's memory."""

    ops: list[TracedOp] = field(default_factory=list)
    host_syncs: list[HostSyncCall] = field(default_factory=list)
    step_graphs: list[StepGraph] = field(default_factory=list)
    optimizer_graphs: list[int] = field(default_factory=list)
    activation_bytes: int = 0
    evaluation: TracedEvaluation = field(default_factory=TracedEvaluation)

    _records: ClassVar[dict[str, type[Record]]] = {"evaluation": TracedEvaluation}
    _record_lists: ClassVar[dict[str, type[Record]]] = {"ops": TracedOp, "host_syncs": HostSyncCall,
                                                        "step_graphs": StepGraph}


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
