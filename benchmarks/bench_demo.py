"""Time to the first answer (issue 28): `torchport evaluate -b cpu,cpu-compile`
on the built-in app (3 fresh processes per backend in interleaved rounds,
every stage that evaluate runs by default), timed from the outside.

Targets on the 2-core development machine, when it is idle:
* 25 s for the default evaluation on cpu and cpu-compile (what this script runs);
* 60 s with the xla environment present (``--backends cpu,cpu-compile,xla``):
  a run is judged against this one as soon as its backends include xla.

Each run prints its wall time and its CPU time (user + system of the command
and every process it started, read from ``RUSAGE_CHILDREN``): on a shared
machine the wall time follows the other users' load, the CPU time much less.

``--compare-spawn`` interleaves runs with ``TORCHPORT_FORK_SERVER=0`` (every
worker a fresh interpreter, as before the fork server) with the default runs,
and prints both medians.

    python benchmarks/bench_demo.py [--runs 2] [--compare-spawn] [--backends cpu,cpu-compile]
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_TARGET_S = 25.0  # cpu, cpu-compile
XLA_TARGET_S = 60.0  # with the xla environment's backend among them
SRC = str(Path(__file__).resolve().parents[1] / "src")


def target_for(backends: str) -> tuple[float, str]:
    if any(name.strip().startswith("xla") for name in backends.split(",")):
        return XLA_TARGET_S, "with xla"
    return DEFAULT_TARGET_S, "cpu and cpu-compile"


def timed_run(backends: str, fork_server: bool) -> tuple[float, float]:
    """One evaluation: (wall seconds, CPU seconds of it and all its processes)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [SRC, os.environ.get("PYTHONPATH")]))}
    if not fork_server:
        env["TORCHPORT_FORK_SERVER"] = "0"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory() as out:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "torchport.cli", "evaluate", "-b", backends, "-o", out],
                       check=True, capture_output=True, env=env)
        wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2, help="how many times to time it (the first may compile cold)")
    parser.add_argument("--backends", default="cpu,cpu-compile")
    parser.add_argument("--compare-spawn", action="store_true",
                        help="also time every worker spawned fresh (TORCHPORT_FORK_SERVER=0), interleaved")
    args = parser.parse_args()
    target, judged = target_for(args.backends)
    modes = [True, False] if args.compare_spawn else [True]
    figures: dict[bool, list[tuple[float, float]]] = {mode: [] for mode in modes}
    for index in range(args.runs):
        for fork_server in modes:
            wall, cpu = timed_run(args.backends, fork_server)
            figures[fork_server].append((wall, cpu))
            how = "fork server" if fork_server else "spawned workers"
            print(f"run {index + 1} ({how}): torchport evaluate builtin:classifier -b {args.backends}: "
                  f"wall {wall:.1f} s = {wall / target:.2f} x the {target:.0f} s target ({judged}); "
                  f"CPU {cpu:.1f} s", flush=True)
    for fork_server, runs in figures.items():
        how = "fork server" if fork_server else "spawned workers"
        print(f"median ({how}, {len(runs)} runs): wall {statistics.median(w for w, _ in runs):.1f} s, "
              f"CPU {statistics.median(c for _, c in runs):.1f} s", flush=True)


if __name__ == "__main__":
    main()
