"""Draw a reproducible random sample of `torchport scan` findings for judging by hand.

    python tools/scan_precision_sample.py --seed 20 --size 50 A.json B.json ...

Each input is the JSON of `torchport scan --format json --fail-on never` over a
source tree (docs/scan.md, "Precision on real code", says which trees).  The
findings of all inputs are pooled, ``--size`` of them are drawn with
``random.Random(seed).sample``, and each is printed with its reported worst
severity, the reason for a lowered severity, and ten lines of context, so a
reader can judge it.  The judging itself is done by a person, not by this script.
"""
from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

_ORDER = {"info": 1, "perf": 2, "silent": 3, "error": 4}


def worst(finding: dict) -> str | None:
    found = [s for s in finding["severity"].values() if s]
    return max(found, key=_ORDER.__getitem__) if found else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path, metavar="SCAN.json")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--size", type=int, default=50)
    args = parser.parse_args()
    pool = []
    for report in args.reports:
        document = json.loads(report.read_text())
        pool += document["findings"]
        print(f"# {report}: {len(document['findings'])} findings")
    print(f"# pooled: {len(pool)}; seed {args.seed}; sample of {args.size}")
    for number, finding in enumerate(random.Random(args.seed).sample(pool, args.size), 1):
        lines = Path(finding["path"]).read_text(encoding="utf-8", errors="replace").splitlines()
        print(f"=== #{number} {finding['rule']} {finding['path']}:{finding['line']}:{finding['column']} "
              f"worst={worst(finding)} note={finding.get('severity_note')} :: {finding['detail']}")
        for index in range(max(0, finding["line"] - 7), min(len(lines), finding["line"] + 3)):
            marker = ">>" if index + 1 == finding["line"] else "  "
            print(f"{marker}{index + 1:5} {lines[index][:140]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
