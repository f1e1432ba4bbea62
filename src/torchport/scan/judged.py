"""How often independent judges found each rule right: the table of pooled verdicts shipped in
data/scan_judged.json (written by ``benchmarks/precision_pooled.py --write-table`` from the verdict
files in docs/precision).

A figure describes a rule's findings at one severity in public library code, on the builds that
were judged; it is the best evidence there is for how far to trust a finding of that rule, not a
probability for one finding in the reader's own code.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from torchport.stats import wilson_interval

TABLE = Path(__file__).resolve().parent.parent / "data" / "scan_judged.json"
WHERE = "docs/scan.md#precision-on-real-code"
# Under ten verdicts the 95% interval spans most of 0-100%: the counts are shown, not a share.
MIN_JUDGED = 10


@dataclass(frozen=True)
class Judged:
    correct: int
    judged: int

    @property
    def enough(self) -> bool:
        return self.judged >= MIN_JUDGED

    def describe(self) -> str:
        if not self.enough:
            return f"{self.correct} of {self.judged} (too few for a figure)"
        low, high = wilson_interval(self.correct, self.judged)
        return f"{self.correct / self.judged:.0%} ({100 * low:.0f}-{high:.0%}, {self.correct} of {self.judged})"

    def as_dict(self) -> dict:
        return {"correct": self.correct, "judged": self.judged}


@dataclass(frozen=True)
class JudgedTable:
    as_of: str
    samples: int
    packages: int
    overall: Judged
    by_rule: dict[str, dict[str, Judged]]

    def at(self, rule_id: str, severity: str | None) -> Judged | None:
        """The verdicts on ``rule_id`` reported at ``severity``; None where none were judged."""
        return self.by_rule.get(rule_id, {}).get(severity or "")

    def rule(self, rule_id: str) -> Judged | None:
        """Every verdict on ``rule_id``, whatever severity it was reported at."""
        found = self.by_rule.get(rule_id)
        if not found:
            return None
        return Judged(sum(j.correct for j in found.values()), sum(j.judged for j in found.values()))

    def source(self) -> str:
        return f"{self.samples} samples, {self.packages} packages, to {self.as_of}"

    def as_dict(self) -> dict:
        return {"as_of": self.as_of, "samples": self.samples, "packages": self.packages,
                **self.overall.as_dict(), "where": WHERE}


@cache
def table() -> JudgedTable:
    document = json.loads(TABLE.read_text(encoding="utf-8"))
    return JudgedTable(
        as_of=document["as_of"], samples=len(document["samples"]), packages=document["packages"],
        overall=Judged(*document["all"]),
        by_rule={rule: {severity: Judged(*counts) for severity, counts in severities.items()}
                 for rule, severities in document["by_rule"].items()})
