"""What script mode records: a script-mode worker's run, and the sections cross-referencing it with the script's lines."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from torchport.records.base import CheckStatus, Record, RunStatus, Vocabulary
from torchport.records.core import ErrorRecord

# --- script mode's sections (script/, report/) ------------------------------------------------------


@dataclass
class XlaEvidence(Record):
    """XLA's counters over a whole script: compilations, executions, transfers, and the ops lowered to XLA or not."""

    compilations: int = 0
    executions: int = 0
    transfers_to_device: int = 0
    ops_lowered: int = 0
    ops_fell_back: int = 0
    device_share: float | None = None  # of the ops, those lowered; None: no op counted

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"device_share"})


@dataclass
class DynamoEvidence(Record):
    """torch.compile's frames and graphs over a whole script."""

    frames_compiled: int = 0
    graphs: int = 0


@dataclass
class DeviceEvidence(Record):
    """What shows that a script's run used its backend's device, and the judgement of it."""

    backend: str = ""
    device_type: str = ""
    parameter_devices: list[str] = field(default_factory=list)
    xla: XlaEvidence | None = None
    dynamo: DynamoEvidence | None = None
    device_memory_peak_bytes: int | None = None
    ran_on_device: bool | None = None
    proof: str | None = None
    why: str | None = None

    _records: ClassVar[dict[str, type[Record]]] = {"xla": XlaEvidence, "dynamo": DynamoEvidence}


@dataclass
class ScriptVerdict(Record):
    """Whether a script ran on one backend, with the device's evidence; the words of ``verdict`` are
    torchport.script.crossref's (runs by configuration alone, runs after redirects, did not run on the device, ...)."""

    verdict: str = ""
    text: str = ""
    lines: list[str] | None = None  # runs after redirects: the lines to change
    evidence: DeviceEvidence | None = None  # the first finished run's device evidence (torchport.script.evidence)

    _records: ClassVar[dict[str, type[Record]]] = {"evidence": DeviceEvidence}


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
class FiredRedirect(Record):
    """A CUDA call redirected to the backend's device at one line of the user's code, and how often."""

    call: str = ""
    location: str | None = None
    count: int = 0
    becomes: str | None = None  # what the call became, where it is not the call with another device

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"location"})


@dataclass
class TorchrunRank(Record):
    """One rank of the script under torchrun: how it ended, its step time and losses, what it redirected."""

    status: RunStatus | str | None = None
    error: ErrorRecord | None = None
    step_s: float | None = None
    redirects: list[FiredRedirect] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    process_groups: Any = None  # what the rank's script made of torch.distributed (torchport.script.job)
    user_files: list[str] | None = None

    _records: ClassVar[dict[str, type[Record]]] = {"error": ErrorRecord}
    _record_lists: ClassVar[dict[str, type[Record]]] = {"redirects": FiredRedirect}
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


# --- what a script-mode worker records about its run (script/) -------------------------------------


@dataclass
class MachineLoad(Record):
    """The machine's 1-minute load average at a run's start and end, and its CPU count."""

    start: float | None = None
    cpus: int | None = None
    end: float | None = None

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"start", "cpus"})


@dataclass
class CpuBfloat16(Record):
    """Whether the CPU a run used has bfloat16 instructions, as one named source said (torchport.script.bfloat16):
    without them torch emulates bfloat16, many times slower than float32."""

    native: bool | None = None  # None: unknown (no lookup here, or the source did not say)
    source: str = ""  # where it was looked up: "/proc/cpuinfo flags", "sysctl hw.optional.arm.FEAT_BF16", ...
    evidence: str = ""  # what that source said, or why nothing was looked up
    torch_cpu_capability: str | None = None  # torch.backends.cpu.get_cpu_capability(): context, not the decision

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"native"})


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
