"""Prepare an independent precision measurement of `torchport scan`: scan public
packages' sources, draw a random sample of error/silent findings, and write each with
its source for a judge to read.

    python benchmarks/precision_sample.py --seed SEED [-n 80] [--corpus /work/corpus]
        [-o sample.md] [--download] [PACKAGE==VERSION ...]

The sources come from PyPI with pip (``--download``): the wheel where PyPI has one,
otherwise the sdist (fairscale, colossalai), fetched from PyPI's simple index with its
sha256 checked when pip cannot build its metadata.  They go to ``CORPUS/dl`` and are
unpacked into ``CORPUS/src/NAME-VERSION`` (source and text files only: compiled
libraries are left out).  Each tree is scanned
by this checkout's torchport (``scan . --format json --fail-on never``, every target);
findings in a byte-identical copy of an earlier file are dropped; the findings whose
worst severity is error or silent are pooled in a fixed order and
``random.Random(seed).sample`` draws the sample.  The seed is the judge's.  This script
judges nothing: it writes the findings and the code around them.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import subprocess
import sys
import tarfile
import urllib.request
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Training libraries with real CUDA code whose sources no test of this project uses.
# (version, "wheel", "sdist" or "auto": the wheel if PyPI has one, else the sdist)
PACKAGES = {"deepspeed": ("0.19.8", "sdist"), "bitsandbytes": ("0.50.2", "wheel"),
            "torchtune": ("0.6.1", "wheel"), "mmengine": ("0.10.7", "wheel"),
            "diffusers": ("0.42.1", "wheel"), "peft": ("0.21.2", "wheel")}
_KEPT = (".py", ".cu", ".cuh", ".cpp", ".cc", ".h", ".hpp", ".txt", ".toml", ".cfg", ".sh",
         ".yaml", ".yml")
_CONTEXT = 15
_MAX_LINE = 200


def _find(folder: Path, name: str, version: str, kinds: tuple[str, ...]) -> Path | None:
    prefix = f"{name.lower().replace('_', '-')}-{version}-"
    suffixes = tuple(s for kind in kinds for s in ((".whl",) if kind == "wheel" else (".tar.gz", ".zip")))
    # deepspeed-0.19.8.tar.gz, torchtune-0.6.1-py3-none-any.whl: names compared as pip normalises them
    found = [p for p in sorted(folder.glob("*")) if p.name.endswith(suffixes)
             and (p.name.lower().replace("_", "-").removesuffix(".tar.gz").removesuffix(".zip") + "-")
             .startswith(prefix)] if folder.is_dir() else []
    return found[0] if found else None


def _pip_download(folder: Path, name: str, version: str, kind: str) -> bool:
    binary = ["--only-binary", ":all:"] if kind == "wheel" else ["--no-binary", ":all:"]
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", *binary, "-d", str(folder),
                           f"{name}=={version}"], capture_output=True, text=True)
    return done.returncode == 0


def _sdist_from_index(folder: Path, name: str, version: str) -> bool:
    """Fetch the sdist file itself through PyPI's simple index (PEP 691 JSON, the API pip
    reads): pip keeps an sdist only after building its metadata, which fails for
    packages whose setup.py needs torch or nvcc.  The file's sha256 is checked."""
    normalised = re.sub(r"[-_.]+", "-", name).lower()
    request = urllib.request.Request(f"https://pypi.org/simple/{normalised}/",
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    wanted = (f"{normalised}-{version}.tar.gz", f"{normalised}-{version}.zip")
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            files = json.load(answer)["files"]
        sdist = next(f for f in files if f["filename"].lower().replace("_", "-") in wanted)
        with urllib.request.urlopen(sdist["url"], timeout=300) as answer:
            data = answer.read()
    except (OSError, ValueError, KeyError, StopIteration):
        return False
    if hashlib.sha256(data).hexdigest() != sdist["hashes"].get("sha256"):
        return False
    (folder / Path(sdist["filename"]).name).write_bytes(data)
    return True


def _archive(corpus: Path, name: str, version: str, kind: str, download: bool) -> tuple[Path, str]:
    """The package's archive and its kind.  kind "auto" takes the wheel where PyPI has
    one and the sdist otherwise (fairscale and colossalai publish only sdists)."""
    folder = corpus / "dl"
    kinds = ("wheel", "sdist") if kind == "auto" else (kind,)
    for each in kinds:
        if found := _find(folder, name, version, (each,)):
            return found, each
    if not download:
        raise SystemExit(f"precision_sample: {name}=={version} is not in {folder}; pass --download")
    folder.mkdir(parents=True, exist_ok=True)
    for each in kinds:
        fetched = _pip_download(folder, name, version, each) or (
            each == "sdist" and _sdist_from_index(folder, name, version))
        if fetched and (found := _find(folder, name, version, (each,))):
            return found, each
    raise SystemExit(f"precision_sample: found no {' or '.join(kinds)} of {name}=={version} on PyPI")


def _unpack(archive: Path, target: Path) -> None:
    if target.is_dir():
        return
    partial = target.with_name(target.name + ".partial")
    if archive.name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(archive) as bundle:
            for member in bundle.namelist():
                if member.endswith(_KEPT) and ".." not in member.split("/"):
                    bundle.extract(member, partial)
    else:
        with tarfile.open(archive) as bundle:
            members = [m for m in bundle.getmembers() if m.isfile() and m.name.endswith(_KEPT)]
            bundle.extractall(partial, members=members, filter="data")
    partial.rename(target)


def _scan(tree: Path) -> list[dict]:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    done = subprocess.run([sys.executable, "-m", "torchport", "scan", ".", "--format", "json",
                           "--fail-on", "never", "--no-ignore"],
                          cwd=tree, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"precision_sample: scan of {tree} failed: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout)["findings"]


def _without_copies(tree: Path, findings: list[dict]) -> list[dict]:
    """The findings of the first of several identical files (deepspeed's sdist ships its
    kernels twice, under csrc/ and deepspeed/ops/csrc/): a copy is not another finding."""
    first: dict[str, str] = {}
    kept = []
    for finding in sorted(findings, key=lambda f: (f["path"], f["line"], f["column"], f["rule"])):
        digest = hashlib.sha256((tree / finding["path"]).read_bytes()).hexdigest()
        if first.setdefault(digest, finding["path"]) == finding["path"]:
            kept.append(finding)
    return kept


def _worst(finding: dict) -> str | None:
    order = {"info": 1, "perf": 2, "silent": 3, "error": 4}
    found = [s for s in finding["severity"].values() if s]
    return max(found, key=order.__getitem__) if found else None


def _fence(lines: list[str]) -> str:
    return "~~~~" if any("```" in line for line in lines) else "```"


def _entry(number: str, repo: str, tree: Path, finding: dict) -> list[str]:
    path = tree / finding["path"]
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    line = finding["line"]
    first, last = max(1, line - _CONTEXT), min(len(lines), line + _CONTEXT)
    shown = [f"{'>>' if n == line else '  '}{n:5} {lines[n - 1][:_MAX_LINE]}" for n in range(first, last + 1)]
    by_severity: dict[str, list[str]] = {}
    for target, severity in finding["severity"].items():
        by_severity.setdefault(severity or "fine", []).append(target)
    severities = "; ".join(f"{s} on {', '.join(t)}" for s, t in by_severity.items())
    message = finding["detail"] + (f" (lowered: {finding['severity_note']})" if finding.get("severity_note") else "")
    fence = _fence(shown)
    language = "python" if finding["path"].endswith(".py") else ""
    return [f"### {number}", "",
            f"- repo: {repo}",
            f"- where: `{finding['path']}:{line}:{finding['column']}`",
            f"- rule: {finding['rule']} ({finding['title']})",
            f"- severity: **{_worst(finding)}** ({severities})",
            f"- message: {message}",
            f"- the tool's replacement: {finding['replacement']}",
            "- verdict: ", "",
            f"{fence}{language}", *shown, fence, ""]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packages", nargs="*", metavar="NAME==VERSION",
                        help=f"default: {' '.join(f'{n}=={v}' for n, (v, _) in PACKAGES.items())}")
    parser.add_argument("--seed", type=int, required=True, help="the judge's seed")
    parser.add_argument("-n", "--size", type=int, default=80)
    parser.add_argument("--corpus", type=Path, default=Path("/work/corpus"),
                        help="cache folder for the downloads and unpacked sources (outside the repo)")
    parser.add_argument("-o", "--output", type=Path, default=None,
                        help="markdown file (default: CORPUS/sample-SEED.md)")
    parser.add_argument("--download", action="store_true", help="fetch missing packages with pip")
    args = parser.parse_args()
    chosen = {}
    for spec in args.packages:
        name, _, version = spec.partition("==")
        if not version:
            parser.error(f"expected NAME==VERSION, got {spec!r}")
        chosen[name] = (version, PACKAGES.get(name, (version, "auto"))[1])
    chosen = chosen or dict(PACKAGES)
    corpus = args.corpus.resolve()
    if corpus == REPO or REPO in corpus.parents:
        parser.error("--corpus must be outside the repository")
    pool: list[tuple[str, Path, dict]] = []
    counts = []
    for name, (version, kind) in chosen.items():
        tree = corpus / "src" / f"{name}-{version}"
        archive, kind = _archive(corpus, name, version, kind, args.download)
        _unpack(archive, tree)
        findings = _without_copies(tree, _scan(tree))
        kept = [f for f in findings if _worst(f) in ("error", "silent")]
        counts.append((f"{name} {version} ({kind})", len(findings), len(kept)))
        pool += [(f"{name} {version}", tree, f) for f in kept]
    pool.sort(key=lambda item: (item[0], item[2]["path"], item[2]["line"], item[2]["column"], item[2]["rule"]))
    if args.size > len(pool):
        parser.error(f"-n {args.size} is more than the {len(pool)} error/silent findings")
    sample = random.Random(args.seed).sample(pool, args.size)
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "src"],
                           capture_output=True, text=True).stdout.strip()
    out = [f"# torchport scan: a sample of {args.size} error/silent findings (seed {args.seed})", "",
           f"torchport commit {commit}{' with uncommitted changes in src/' if dirty else ''}; every target; "
           f"sources unpacked under `{corpus / 'src'}`.", "",
           "| package | findings (identical copies of a file counted once) | error/silent (the pool) |",
           "|---|---|---|",
           *[f"| {label} | {total} | {kept} |" for label, total, kept in counts],
           f"| **all** | {sum(c[1] for c in counts)} | {len(pool)} |", "",
           "Each finding: where it is, what the tool says, and the code around it (`>>` marks the "
           "reported line). Fill in each verdict: correct or false positive, by the tool's own "
           "meaning (the rule's consequence holds for that line on the targets it names).", ""]
    for index, (repo, tree, finding) in enumerate(sample, 1):
        out += _entry(f"S{args.seed}-{index:03d}", repo, tree, finding)
    output = args.output or corpus / f"sample-{args.seed}.md"
    output.write_text("\n".join(out) + "\n")
    print(f"precision_sample: {len(pool)} error/silent findings in {len(counts)} packages; "
          f"{args.size} drawn with seed {args.seed} -> {output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
