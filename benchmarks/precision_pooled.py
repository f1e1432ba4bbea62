"""Pooled precision of the independent judgements in docs/precision, with two intervals, and
what two judges of the same sample say about each other.

    python benchmarks/precision_pooled.py [SEED ...]
    python benchmarks/precision_pooled.py --agreement FILE_A FILE_B [FILE_A FILE_B ...]
    python benchmarks/precision_pooled.py --write-table [PATH]
    python benchmarks/precision_pooled.py --by-file-kind

SEED keys a verdict file as precision_insample.py does (``13-583917`` for judge13-583917-verdicts.md);
without seeds, the judges since round 14's default-path rule (SINCE_ROUND_14).  The Wilson interval treats the
findings as independent draws; the findings of one package share its code and its author's habits,
so the second interval resamples packages (within each judge's sample, 10,000 times, a fixed seed),
which is the wider and the more honest of the two.

``--agreement`` compares two verdict files of the same findings: agreement, Cohen's kappa, and the
precision one judge would measure for a scanner that reported exactly what the other judged correct.
That last figure bounds what an independent judgement can confirm, whatever the scanner.  Given
several pairs, it prints each and then the two bounds over all of them (first files as judge A).

``--by-file-kind`` splits the verdicts since round 14 by the kind of file the finding is in, read
from its path alone: a test, an app-shaped file (examples, scripts, tools, demos, ``train*.py``,
``main*.py`` and the like: code a user runs), or a library module.  The split was chosen after the
verdicts were in, so it describes the pooled samples; it predicts nothing.

``--write-table`` writes the verdicts since round 14 by rule and reported severity to the table
torchport ships (src/torchport/data/scan_judged.json), from which ``scan`` tells the reader how often
each rule was found right; run it after adding a seed to SINCE_ROUND_14 (and moving POOLED_AS_OF).
"""
from __future__ import annotations

import json
import random
import re
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
from precision_insample import verdict_rows, verdicts  # noqa: E402

from torchport.stats import wilson_interval as wilson  # noqa: E402

SINCE_ROUND_14 = ("583417", "13-583917", "702519", "837583", "676501", "457076", "364424", "988409", "659119",
                  "678904", "680243", "501976", "77419", "802241", "700555", "976340", "49420",
                  "200569", "444797", "811980", "110588", "662729", "555827",
                  "858731", "830311", "150301", "115842", "508736", "753606", "831176", "710376", "414925", "65846", "642689",
                  "446061", "645398", "813024", "564103", "373572", "518142", "316155", "439048", "134135",
                  "623435", "906258", "483497", "396950")
# The day the newest sample in SINCE_ROUND_14 was judged: the date the shipped table states.
POOLED_AS_OF = "2026-12-07"
TABLE = Path(__file__).resolve().parent.parent / "src" / "torchport" / "data" / "scan_judged.json"
_RESAMPLES = 10_000


def _package(row: dict) -> tuple[str, str]:
    return row["seed"], re.sub(r"\s+\S*\d\S*$", "", row["package"])  # "hqq 0.2.8" -> "hqq"


def package_bootstrap(samples: dict[str, dict], rng: random.Random) -> tuple[float, float]:
    """2.5th and 97.5th percentiles of the pooled precision, packages resampled within each sample
    (``samples``: each sample's verdicts by package)."""
    shares = []
    for _ in range(_RESAMPLES):
        correct = judged = 0
        for packages in samples.values():
            drawn = rng.choices(list(packages.values()), k=len(packages))
            correct += sum(sum(verdicts_) for verdicts_ in drawn)
            judged += sum(len(verdicts_) for verdicts_ in drawn)
        shares.append(correct / judged)
    shares.sort()
    return shares[int(0.025 * _RESAMPLES)], shares[int(0.975 * _RESAMPLES) - 1]


def pooled(seeds: tuple[str, ...]) -> dict:
    samples: dict[str, dict[str, list[bool]]] = {seed: defaultdict(list) for seed in seeds}
    for row in verdicts():
        if row["seed"] in samples:
            samples[row["seed"]][_package(row)[1]].append(row["correct"])
    missing = [seed for seed, packages in samples.items() if not packages]
    if missing:
        raise SystemExit(f"precision_pooled: no verdict file for seed {', '.join(missing)} in docs/precision")
    correct = sum(sum(v) for packages in samples.values() for v in packages.values())
    judged = sum(len(v) for packages in samples.values() for v in packages.values())
    return {"correct": correct, "judged": judged, "wilson": wilson(correct, judged),
            "bootstrap": package_bootstrap(samples, random.Random(20261203)),
            "per_sample": {seed: (sum(sum(v) for v in p.values()), sum(len(v) for v in p.values()))
                           for seed, p in samples.items()},
            "packages": sum(len(p) for p in samples.values())}


_TEST_FILE = re.compile(r"(^|/)tests?/|(^|/)test_[^/]*\.py$|_test\.py$|(^|/)conftest\.py$")
_APP_FILE = re.compile(r"(^|/)(examples?|scripts?|tools?|demos?|apps?|recipes|benchmarks?|notebooks?|projects)/"
                       r"|(^|/)(train|main|run|demo|eval|evaluate|inference|infer|finetune)[\w-]*\.py$")
FILE_KINDS = ("app-shaped", "library module", "test")


def file_kind(path: str) -> str:
    if _TEST_FILE.search(path):
        return "test"
    return "app-shaped" if _APP_FILE.search(path) else "library module"


def by_file_kind(seeds: tuple[str, ...] = SINCE_ROUND_14) -> dict[str, dict]:
    """Correct and judged by the kind of file, with the Wilson interval and the one with packages
    resampled within each sample."""
    strata: dict[str, dict[str, dict[str, list[bool]]]] = {
        kind: {seed: defaultdict(list) for seed in seeds} for kind in FILE_KINDS}
    for row in verdicts():
        if row["seed"] in seeds:
            strata[file_kind(row["path"])][row["seed"]][_package(row)[1]].append(row["correct"])
    found = {}
    for kind, samples in strata.items():
        samples = {seed: packages for seed, packages in samples.items() if packages}
        correct = sum(sum(v) for packages in samples.values() for v in packages.values())
        judged = sum(len(v) for packages in samples.values() for v in packages.values())
        found[kind] = {"correct": correct, "judged": judged, "wilson": wilson(correct, judged),
                       "bootstrap": package_bootstrap(samples, random.Random(20261203))}
    return found


def _cell(correct: int, judged: int, packages: int, interval: tuple[float, float]) -> dict:
    return {"correct": correct, "judged": judged, "packages": packages,
            "interval": [round(interval[0], 3), round(interval[1], 3)]}


def rule_table(seeds: tuple[str, ...] = SINCE_ROUND_14) -> dict:
    """By rule and by the severity the build reported when drawn: correct, judged, the packages
    they come from, and a 95% interval with those packages resampled (the findings of one
    package share its code, so counting them as independent would overstate the certainty)."""
    cells: dict[tuple[str, str], dict[tuple[str, str], list[bool]]] = defaultdict(lambda: defaultdict(list))
    for row in verdicts():
        if row["seed"] in seeds:
            cells[(row["rule"], row["severity"])][_package(row)].append(row["correct"])
    rng = random.Random(20261203)
    by_rule: dict[str, dict[str, dict]] = defaultdict(dict)
    for (rule, severity), packages in sorted(cells.items()):
        values = list(packages.values())
        by_rule[rule][severity] = _cell(sum(sum(v) for v in values), sum(len(v) for v in values), len(values),
                                        package_bootstrap({rule: packages}, rng))  # one stratum: the cell
    found = pooled(seeds)
    return {
        "about": "Independent judges' verdicts on scan's error and silent findings in public library code, "
                 "pooled since round 14 by rule and by the severity reported. interval: 95%, packages resampled. "
                 "Written by benchmarks/precision_pooled.py --write-table from docs/precision.",
        "as_of": POOLED_AS_OF,
        "samples": list(seeds),
        "all": _cell(found["correct"], found["judged"], found["packages"], found["bootstrap"]),
        "by_rule": dict(by_rule),
    }


def write_table(path: Path) -> str:
    text = json.dumps(rule_table(), indent=1)
    text = re.sub(r"\{\s*(\"correct\"[^{}]*?)\s*\}", lambda m: "{" + re.sub(r"\s*\n\s*", " ", m.group(1)).replace("[ ", "[").replace(" ]", "]") + "}", text)
    path.write_text(text + "\n")
    return text + "\n"


def _table(path: Path) -> dict[int, bool]:
    return {row["finding"]: row["correct"] for row in verdict_rows(path) if row["finding"] is not None}


def agreement(first: Path, second: Path) -> dict:
    a, b = _table(first), _table(second)
    common = sorted(set(a) & set(b))
    if not common:
        raise SystemExit(f"precision_pooled: {first} and {second} share no numbered finding")
    n = len(common)
    agree = sum(a[i] == b[i] for i in common)
    share_a, share_b = sum(a[i] for i in common) / n, sum(b[i] for i in common) / n
    expected = share_a * share_b + (1 - share_a) * (1 - share_b)
    both = sum(a[i] and b[i] for i in common)
    return {"findings": n, "agree": agree, "kappa": (agree / n - expected) / (1 - expected),
            "a_correct": sum(a[i] for i in common), "b_correct": sum(b[i] for i in common), "both": both}


def main(argv: list[str]) -> int:
    if argv[:1] == ["--agreement"]:
        files = argv[1:]
        if not files or len(files) % 2:
            raise SystemExit("usage: precision_pooled.py --agreement FILE_A FILE_B [FILE_A FILE_B ...]")
        pairs = [agreement(Path(a), Path(b)) for a, b in zip(files[::2], files[1::2])]
        for found in pairs:
            n, low, high = found["findings"], *wilson(found["agree"], found["findings"])
            print(f"{n} findings judged twice: agreement {found['agree']}/{n} = {found['agree'] / n:.1%} "
                  f"({low:.1%}-{high:.1%}), Cohen's kappa {found['kappa']:.2f}")
            for judge, other, key in (("A", "B", "a_correct"), ("B", "A", "b_correct")):
                print(f"a scanner reporting exactly what judge {judge} judged correct ({found[key]}) would be judged "
                      f"{found['both']}/{found[key]} = {found['both'] / found[key]:.1%} by judge {other}")
        if len(pairs) > 1:
            both = sum(found["both"] for found in pairs)
            for judge, other, key in (("A", "B", "a_correct"), ("B", "A", "b_correct")):
                reported = sum(found[key] for found in pairs)
                print(f"over {len(pairs)} samples: what judge {judge} judged correct would be judged "
                      f"{both}/{reported} = {both / reported:.1%} by judge {other}")
        return 0
    if argv[:1] == ["--by-file-kind"]:
        for kind, found in by_file_kind().items():
            (low, high), (b_low, b_high) = found["wilson"], found["bootstrap"]
            print(f"{kind}: {found['correct']}/{found['judged']} = {found['correct'] / found['judged']:.1%}; "
                  f"95% Wilson {low:.1%}-{high:.1%}; packages resampled {b_low:.1%}-{b_high:.1%}")
        return 0
    if argv[:1] == ["--write-table"]:
        path = Path(argv[1]) if len(argv) > 1 else TABLE
        table = json.loads(write_table(path))
        print(f"wrote {path}: {len(table['by_rule'])} rules, {table['all']['correct']}/{table['all']['judged']} "
              "judged correct")
        return 0
    seeds = tuple(argv) or SINCE_ROUND_14
    found = pooled(seeds)
    for seed, (correct, judged) in found["per_sample"].items():
        print(f"  {seed:>10}: {correct}/{judged} = {correct / judged:.1%}")
    (low, high), (b_low, b_high) = found["wilson"], found["bootstrap"]
    print(f"pooled over {len(seeds)} samples, {found['packages']} packages: {found['correct']}/{found['judged']} = "
          f"{found['correct'] / found['judged']:.1%}; 95% Wilson {low:.1%}-{high:.1%}; "
          f"packages resampled {b_low:.1%}-{b_high:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
