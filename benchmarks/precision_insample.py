"""In-sample check of `torchport scan` against the independent verdicts in docs/precision:
rescan the packages each judge read and count, per judge sample, how many judged-correct
findings are still at error/silent and how many judged-incorrect ones are.  In-sample:
it says what the detectors now lower, not how precise they are on unread code.

    python benchmarks/precision_insample.py OUT_DIR SEED=CORPUS_SRC [SEED=CORPUS_SRC ...]

e.g. ``937892=/work/judge5/corpus/src``.  A verdict file named ``judgeN-SEED-verdicts.md`` (a judge
that drew a seed another judge had drawn) is keyed ``N-SEED``.  A verdict is matched by file (path suffix), line and
rule; it is "hot" when some target reports it at error or silent.  Scans are cached in OUT_DIR.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

VERDICTS = Path(__file__).resolve().parent.parent / "docs" / "precision"


# The first cell of a verdict row: "17", "S678904-017".
_FINDING_ID = re.compile(r"(?:S\d+-)?\d+")


def verdict_rows(path: Path) -> list[dict]:
    """One judge's verdict table, a dict a row (``finding``: the number in the row's first cell).
    Stops at a finding's verdict cell that is neither correct nor incorrect."""
    rows = []
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        # judges write CORRECT, correct or "CORRECT (borderline)"
        verdict, _, remark = (cells[5].lower() if len(cells) >= 7 else "").partition(" ")
        if not _FINDING_ID.fullmatch(cells[0]):  # a summary table's row ("| package | pool | ... | CORRECT |")
            continue
        if verdict not in ("correct", "incorrect"):
            if len(cells) >= 7 and _FINDING_ID.fullmatch(cells[0]):
                raise ValueError(f"{path.name}: finding {cells[0]}: verdict {cells[5]!r} is neither correct "
                                 "nor incorrect")
            continue
        finding = re.search(r"(\d+)$", cells[0])
        where, number = re.sub(r"(:\d+):\d+$", r"\1", cells[2].strip("`")).rsplit(":", 1)  # drop a column
        rows.append({"finding": int(finding.group(1)) if finding else None, "path": where, "line": int(number),
                     # "TP002" or "TP002 (`.cuda()` moves a tensor or module to CUDA)"
                     "rule": cells[3].split()[0], "correct": verdict == "correct", "package": cells[1],
                     "severity": cells[4].lower(), "borderline": "borderline" in f"{remark} {cells[6].lower()}"})
    return rows


def verdicts() -> list[dict]:
    """Every first judge's verdicts in docs/precision, each row with its sample's ``seed``."""
    found = []
    for path in sorted(VERDICTS.glob("judge*-verdicts.md")):
        number, seed = re.match(r"judge(\d*)-(\d+)-", path.name).groups()  # type: ignore[union-attr]
        found.extend({"seed": f"{number}-{seed}" if number else seed, **row} for row in verdict_rows(path))
    return found


def scan_all(out: Path, corpora: dict[str, str]) -> dict[tuple[int, str], list[tuple[str, set[str]]]]:
    out.mkdir(parents=True, exist_ok=True)
    source = str(Path(__file__).resolve().parent.parent / "src")
    index: dict[tuple[int, str], list[tuple[str, set[str]]]] = defaultdict(list)
    for root in corpora.values():
        for package in sorted(os.listdir(root)):
            result = out / f"{package}.json"
            if not result.exists():
                subprocess.run([sys.executable, "-m", "torchport", "scan", f"{root}/{package}", "--format", "json",
                                "-o", str(result)], env={**os.environ, "PYTHONPATH": source}, check=False,
                               capture_output=True)
            for finding in json.loads(result.read_text())["findings"]:
                severities = {s for s in finding["severity"].values() if s}
                index[(finding["line"], finding["rule"])].append((finding["path"], severities))
    return index


def main(argv: list[str]) -> int:
    if len(argv) < 2 or not all("=" in a for a in argv[1:]):
        print(__doc__.strip().splitlines()[4].strip(), file=sys.stderr)
        return 2
    corpora = dict(a.split("=", 1) for a in argv[1:])
    index = scan_all(Path(argv[0]), corpora)
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    by_rule: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for verdict in verdicts():
        if verdict["seed"] not in corpora:
            continue
        hot = any(("/" + path).endswith("/" + verdict["path"]) and severities & {"error", "silent"}
                  for path, severities in index.get((verdict["line"], verdict["rule"]), []))
        if hot:
            by_rule[verdict["rule"]][0] += verdict["correct"]
            by_rule[verdict["rule"]][1] += 1
        row = totals[verdict["seed"]]
        if verdict["correct"]:
            row[0] += hot
            row[1] += 1
        else:
            row[2] += hot
            row[3] += 1
    for seed, (kept, correct, wrong_hot, wrong) in sorted(totals.items()):
        reported = kept + wrong_hot
        print(f"{seed}: correct kept {kept}/{correct}, incorrect still error/silent {wrong_hot}/{wrong}, "
              f"in-sample precision {kept}/{reported} = {100 * kept / max(reported, 1):.1f}%")
    print("per rule, judged findings still at error/silent:",
          ", ".join(f"{rule} {kept}/{hot}" for rule, (kept, hot) in sorted(by_rule.items(), key=lambda r: -r[1][1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
