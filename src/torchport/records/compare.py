"""``torchport compare``'s document."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import ClassVar

from torchport.records.base import Record
from torchport.records.core import BackendComparison, Cost
from torchport.records.runtime import Accelerator

# --- torchport compare's document (compare.py, report/compare_text.py, report/html.py) -------------


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
class ComparedEnvironment(Record):
    """The environment fields that change a figure, as a machine's document wrote them (null: not written)."""

    hostname: str | None = None
    accelerators: list[Accelerator] | None = None
    driver: str | None = None
    torch: str | None = None
    torch_cuda: str | None = None
    torch_hip: str | None = None
    python: str | None = None
    cpu: str | None = None
    cpu_count: int | None = None
    memory_bytes: int | None = None
    platform: str | None = None

    _record_lists: ClassVar[dict[str, type[Record]]] = {"accelerators": Accelerator}
    _written_when_none: ClassVar[frozenset[str]] = frozenset({
        "hostname", "accelerators", "driver", "torch", "torch_cuda", "torch_hip", "python", "cpu", "cpu_count",
        "memory_bytes", "platform"})


@dataclass
class ComparedMachine(Record):
    name: str = ""
    file: str = ""
    app: str | None = None
    status: str | None = None
    updated: str | None = None
    schema_version: str | None = None
    environment: ComparedEnvironment = field(default_factory=ComparedEnvironment)

    _records: ClassVar[dict[str, type[Record]]] = {"environment": ComparedEnvironment}


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
