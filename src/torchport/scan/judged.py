"""How often independent judges found each rule right: the table of pooled verdicts shipped in
data/scan_judged.json (written by ``benchmarks/precision_pooled.py --write-table`` from the verdict
files in docs/precision).

A figure describes a rule's findings at one severity in public library code, on the builds that
were judged before this one; it is the best evidence there is for how far to trust a finding of
that rule, not a probability for one finding in the reader's own code.  Its interval resamples
packages: the findings of one package share its code and its author's habits, so counting them
as independent draws would overstate the certainty.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

TABLE = Path(__file__).resolve().parent.parent / "data" / "scan_judged.json"
WHERE = "https://github.com/torchport/torchport/blob/main/docs/scan.md#precision-on-real-code"
# Below ten verdicts, or five packages, the interval spans most of 0-100%: counts, not a share.
MIN_JUDGED = 10
MIN_PACKAGES = 5


@dataclass(frozen=True)
class Judged:
    correct: int
    judged: int
    packages: int
    low: float
    high: float

    @property
    def enough(self) -> bool:
        return self.judged >= MIN_JUDGED and self.packages >= MIN_PACKAGES

    def counts(self) -> str:
        return f"{self.correct} of {self.judged}, {self.packages} package{'s' if self.packages != 1 else ''}"

    def describe(self) -> str:
        if not self.enough:
            return f"{self.counts()} (too few for a figure)"
        return f"{self.correct / self.judged:.0%} ({self.counts()}; {100 * self.low:.0f}-{self.high:.0%})"

    def as_dict(self) -> dict:
        return {"correct": self.correct, "judged": self.judged, "packages": self.packages,
                "interval": [self.low, self.high]}


def _judged(cell: dict) -> Judged:
    return Judged(cell["correct"], cell["judged"], cell["packages"], *cell["interval"])


@dataclass(frozen=True)
class JudgedTable:
    as_of: str
    samples: int
    overall: Judged
    by_rule: dict[str, dict[str, Judged]]

    def at(self, rule_id: str, severity: str | None) -> Judged | None:
        """The verdicts on ``rule_id`` reported at ``severity``; None where none were judged."""
        return self.by_rule.get(rule_id, {}).get(severity or "")

    def describe(self, rule_id: str, severity: str) -> str:
        found = self.at(rule_id, severity)
        if found is not None:
            return found.describe()
        elsewhere = [f"at {other}: {cell.counts()}" for other, cell in sorted(self.by_rule.get(rule_id, {}).items())]
        return f"not judged at {severity} yet" + (f" ({'; '.join(elsewhere)})" if elsewhere else "")

    def source(self) -> str:
        return (f"{self.samples} samples, {self.overall.packages} packages, to {self.as_of}; intervals resample "
                f"packages; {WHERE}")

    def as_dict(self) -> dict:
        return {"as_of": self.as_of, "samples": self.samples, **self.overall.as_dict(), "where": WHERE}


@cache
def table() -> JudgedTable | None:
    """The shipped table; None where it is missing or unreadable (a broken install): the scan then
    reports without the figures rather than fail."""
    try:
        document = json.loads(TABLE.read_text(encoding="utf-8"))
        return JudgedTable(
            as_of=document["as_of"], samples=len(document["samples"]), overall=_judged(document["all"]),
            by_rule={rule: {severity: _judged(cell) for severity, cell in severities.items()}
                     for rule, severities in document["by_rule"].items()})
    except (OSError, ValueError, KeyError, TypeError):
        return None
