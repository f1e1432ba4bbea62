"""``torchport evaluate --budget`` on a real-size model: does it end on time,
is its ETA right, what precision did it buy, and how much memory did its
workers take against a plain loop's?

    python benchmarks/bench_budget.py [--budget 10m] [--app 'builtin:gpt?size=124m'] [-b cpu,cpu-compile]
                                      [--no-memory]

Runs the real CLI with stderr piped (so torchport prints its plain progress
lines, every 10 s, each with the plan's ETA) and prints:

* the actual duration against the budget (target: within 10%);
* the ETA's error at the first progress line after the first minute: the
  predicted end against the actual end, relative to the time that was left
  then (target: within 20%);
* the precision reached per backend (the budget section of result.json);
* the worker's peak host memory (largest over the reference backend's runs)
  against a plain training loop of the same model with the same steps as
  that backend's first run and the same allocator settings (bench_memory.py's loop).

The machine's load average is printed before and after: on a shared machine
the figures are not a quiet machine's.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ETA = re.compile(r"(\d+):(\d\d):(\d\d) elapsed \(about (\d+):(\d\d):(\d\d) left")


def seconds(h: str, m: str, s: str) -> int:
    return int(h) * 3600 + int(m) * 60 + int(s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget", default="10m")
    parser.add_argument("--app", default="builtin:gpt?size=124m")
    parser.add_argument("-b", "--backends", default="cpu,cpu-compile")
    parser.add_argument("--no-memory", action="store_true", help="skip the plain loop's memory run")
    parser.add_argument("--out", type=Path, help="keep the results folder here")
    args = parser.parse_args()
    from torchport.budget import parse_duration

    budget_s = parse_duration(args.budget)
    out = args.out or Path(tempfile.mkdtemp(prefix="bench-budget-")) / "result"
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs", flush=True)
    command = [sys.executable, "-m", "torchport.cli", "evaluate", args.app, "-b", args.backends,
               "--budget", args.budget, "-o", str(out)]
    started = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "TORCHPORT_PROGRESS_INTERVAL": "10"})
    eta_lines: list[tuple[float, int, int, str]] = []  # our clock, torchport's elapsed, its time left, the line
    assert process.stderr is not None
    for line in process.stderr:
        sys.stderr.write(line)
        match = ETA.search(line)
        if match:
            eta_lines.append((time.monotonic() - started, seconds(*match.group(1, 2, 3)),
                              seconds(*match.group(4, 5, 6)), line.strip()))
    stdout = process.stdout.read() if process.stdout else ""
    process.wait()
    actual = time.monotonic() - started
    print(stdout[-3000:])
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"exit status {process.returncode}; budget {budget_s:.0f} s, actual {actual:.1f} s "
          f"({actual / budget_s - 1:+.1%}; target within 10%)")
    after_minute = [entry for entry in eta_lines if entry[0] >= 60]
    if after_minute:
        at, _, left, line = after_minute[0]
        actual_left = actual - at
        error = (left - actual_left) / actual_left if actual_left > 0 else float("nan")
        print(f"ETA at {at:.0f} s: {left} s left predicted, {actual_left:.0f} s actually left: error {error:+.1%} "
              f"(target within 20%)\n  {line}")
    else:
        print("no progress line with an ETA after the first minute")
    document = json.loads((out / "result.json").read_text())
    budget = document.get("budget") or {}
    for name, entry in (budget.get("backends") or {}).items():
        reached = entry.get("precision_reached")
        print(f"{name}: {entry.get('runs')} runs, precision reached "
              f"{'n/a' if reached is None else f'+-{reached:.1%}'} (target +-{budget.get('precision_target', 0):.0%}), "
              f"sampling stopped by {entry.get('stopped_by')}")
    for line in budget.get("could_not") or []:
        print(f"could not: {line}")
    for name, backend in document["backends"].items():
        if backend.get("error"):
            print(f"{name}: {backend['error'].get('kind')}: {backend['error'].get('message')}")
    if args.no_memory:
        return
    reference = document.get("reference")
    runs = [run for run in document["backends"][reference]["runs"] if run.get("status") == "ok"]
    if not runs:
        print("no successful run of the reference backend: no memory comparison")
        return
    worker_peak = max((run.get("host_memory") or {}).get("peak_bytes") or run["host_peak_rss_bytes"] for run in runs)
    first = runs[0]["training"]
    sustained, warmup = first["sustained"], first["warmup"]
    steps = sum(block["steps"] for block in sustained["blocks"])
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_memory import plain_loop_peak

    # The plain loop warms up in blocks of its own length: give it the same step counts as the worker's first run.
    loop_peak = plain_loop_peak(args.app, reference, steps, len(sustained["blocks"]), warmup["steps"])
    print(f"worker peak host memory {worker_peak / 2**30:.3f} GiB (largest over {len(runs)} {reference} runs), "
          f"plain loop {loop_peak / 2**30:.3f} GiB ({warmup['steps']} warm-up + {steps} steps): "
          f"ratio {worker_peak / loop_peak:.3f} (target at most 1.10)")


if __name__ == "__main__":
    main()
