"""What the backends, environments, the budget, the planner and remote targets pass along (not parts of result.json unless a field says so)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from torchport.records.base import Record, TraceVerdictStatus, Vocabulary

# --- backends/, remote/, envs.py, budget.py, planning.py, stages.py: what they pass along ------------
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


@dataclass
class BackendInfo(BackendDescription):
    """A backend as ``torchport info`` lists it: what it says about itself, and whether it runs here."""

    available: bool = False
    reason: str = ""


@dataclass
class ToolInfo(MachineEnvironment):
    """``torchport info``: torchport's version, this machine (its environment record less the host name:
    bug reports are pasted in public), the packages, backends and environments, and the config file."""

    torchport: str = ""
    packages: dict[str, str | None] = field(default_factory=dict)  # None: not installed
    backends: list[BackendInfo] = field(default_factory=list)
    environments: list[EnvState] = field(default_factory=list)
    config: str | None = None

    _record_lists: ClassVar[dict[str, type[Record]]] = {**MachineEnvironment._record_lists, "backends": BackendInfo,
                                                        "environments": EnvState}


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
