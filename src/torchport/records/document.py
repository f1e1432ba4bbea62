"""The result document as one record, and what a summary derives from the runs' raw samples."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from torchport.records.base import DocumentStatus, Record, Vocabulary
from torchport.records.check import ChecksSection
from torchport.records.core import BackendEntry, Check
from torchport.records.runtime import MachineEnvironment
from torchport.records.script import ScriptCoverage, ScriptDistributed, ScriptSection
from torchport.records.trace import TraceSection

# --- the document as a whole ----------------------------------------------------------------------


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

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"location"})


@dataclass
class ToolRecord(Record):
    """What wrote a document: torchport and its version."""

    name: str = ""
    version: str = ""


@dataclass
class AppRecord(Record):
    """The document's ``app``: the spec evaluated, its file and that file's git state."""

    spec: str | None = None
    file: str | None = None
    kind: str | None = None  # "script" in script mode
    git_commit: str | None = None
    git_dirty: bool | None = None

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"file", "git_commit", "git_dirty"})


@dataclass
class BudgetBackend(Record):
    """What the time budget bought one backend."""

    runs: int = 0
    precision_reached: float | None = None
    target_met: bool | None = None  # None: no target asked for, or nothing measured
    shares_s: list[float] | None = None
    stopped_by: list[str | None] | None = None  # per run: what ended its sampling

    _written_when_none: ClassVar[frozenset[str]] = frozenset({"precision_reached", "target_met"})


@dataclass
class StageSize(Record):
    """How the budget sized one stage, or checked it against the time left: its steps (and their bounds
    where it was sized), the measured step time it was sized by, what it needs, whether it fits and why.
    Built with ``put`` in the order its stage gives."""

    steps: int | None = None
    bounds: list[int] | None = None
    pipeline_steps_per_round: int | None = None
    step_s: float | None = None
    startup_s: float | None = None
    needs_s: float | None = None
    fits: bool = False
    why: str = ""


@dataclass
class BudgetStages(Record):
    """The budget's ``stages``: the time left when the stages were sized, each stage's ``StageSize`` under
    the stage's name (keys this record does not declare), and the stage workers' timeout."""

    time_left_s: float | None = None
    timeout_s: float | None = None

    def sized(self) -> dict[str, StageSize]:
        """The stages sized by (or checked against) the budget, as built or as read."""
        sizes = {name: StageSize.from_dict(size) if isinstance(size, dict) else size for name, size in self.extra.items()}
        return {name: size for name, size in sizes.items() if isinstance(size, StageSize) and size.fits}


@dataclass
class BudgetSection(Record):
    """The document's ``budget``: the budget, what it bought per backend, the stages it sized, what it could not buy."""

    budget_s: float = 0.0
    explicit: bool | None = None
    precision_target: float | None = None
    adaptive: bool = False
    elapsed_s: float | None = None
    backends: dict[str, BudgetBackend] = field(default_factory=dict)
    stages: BudgetStages = field(default_factory=BudgetStages)
    could_not: list[str] = field(default_factory=list)

    _records: ClassVar[dict[str, type[Record]]] = {"stages": BudgetStages}
    _record_maps: ClassVar[dict[str, type[Record]]] = {"backends": BudgetBackend}
    _written_when_none: ClassVar[frozenset[str]] = frozenset({"precision_target"})


@dataclass
class ResultDocument(Record):
    """A whole result document, as the report layer reads it: the backends, the
    configuration and the sections the stages added.  Written by the evaluation
    as plain JSON; read once into this by ``torchport.document.result_record``."""

    # None: not in the document (one of another schema version is read for its machine's name only).
    schema_version: str | None = None
    tool: ToolRecord = field(default_factory=ToolRecord)
    status: DocumentStatus | str | None = None
    status_reason: str | None = None
    created: str | None = None
    updated: str | None = None
    command: list[str] = field(default_factory=list)
    environment: MachineEnvironment = field(default_factory=MachineEnvironment)
    app: AppRecord = field(default_factory=AppRecord)
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

    _records: ClassVar[dict[str, type[Record]]] = {"tool": ToolRecord, "app": AppRecord, "environment": MachineEnvironment,
                                                   "config_consistency": ConfigConsistency, "budget": BudgetSection,
                                                   "trace": TraceSection, "script": ScriptSection,
                                                   "script_distributed": ScriptDistributed,
                                                   "script_coverage": ScriptCoverage, "checks": ChecksSection}
    _record_lists: ClassVar[dict[str, type[Record]]] = {"stage_errors": StageError}
    _record_maps: ClassVar[dict[str, type[Record]]] = {"backends": BackendEntry}
    _words: ClassVar[dict[str, type[Vocabulary]]] = {"status": DocumentStatus}

    # The stages run side by side and each puts its section: a key new to the document extends ``key_order``.
    _putting: ClassVar[threading.Lock] = threading.Lock()

    def put(self, **values: Any) -> Self:
        with self._putting:
            return super().put(**values)

    @property
    def app_spec(self) -> str:
        return str(self.app.spec)

    def check_records(self) -> list[Check]:
        return self.checks.checks if self.checks else []

    def section(self, key: str, record: type[Record] | None = None) -> Record | None:
        """A stage's section by its key in the document (what the stage's renderer draws).  A key this class
        does not declare (a stage registered elsewhere) is read with that stage's ``record``."""
        value = getattr(self, key) if key in self._declared_set() else self.extra.get(key)
        if isinstance(value, dict) and record is not None:
            value = record.from_dict(value)
        return value if isinstance(value, Record) else None
