"""The result document as one record, and what a summary derives from the runs' raw samples."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from torchport.records.base import DocumentStatus, Record, Vocabulary
from torchport.records.check import ChecksSection
from torchport.records.core import BackendEntry, Check
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
