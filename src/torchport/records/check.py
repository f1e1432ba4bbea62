"""What ``torchport check`` and evaluate's checks stage record: the training worker's job and runs, each check's figures, and the section."""
from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from torchport.records.base import Figures, Record, RunStatus, Vocabulary
from torchport.records.core import Check, ErrorRecord

# --- the training worker's job and runs, and each check's figures ---------------------------------
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
class BackendAvailability(Record):
    """Whether a backend can run on this machine, and why not."""

    available: bool = False
    reason: str = ""


@dataclass
class ChecksSection(Record):
    """The ``checks`` section of a result document (``torchport check --format json`` writes the same)."""

    checks: list[Check] = field(default_factory=list)
    config: ChecksConfig = field(default_factory=ChecksConfig)
    backends: dict[str, BackendAvailability] = field(default_factory=dict)
    app_error: AppFailure | None = None
    duration_s: float | None = None
    note: str | None = None  # evaluate's stage: what it ran, and what ``torchport check`` adds

    _records: ClassVar[dict[str, type[Record]]] = {"config": ChecksConfig, "app_error": AppFailure}
    _record_lists: ClassVar[dict[str, type[Record]]] = {"checks": Check}
    _record_maps: ClassVar[dict[str, type[Record]]] = {"backends": BackendAvailability}
    _written_when_none: ClassVar[frozenset[str]] = frozenset({"app_error"})
