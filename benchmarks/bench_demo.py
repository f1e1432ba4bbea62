"""Wall time of the demo: `torchport evaluate` on the default app over the CPU
backends (cpu and cpu-compile, 3 fresh processes each, every stage that
evaluate runs by default).  Target: under 60 s on a 2-core machine.

    python benchmarks/bench_demo.py [--runs 2]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time

TARGET_S = 60.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=2, help="how many times to time it (the first may compile cold)")
    args = parser.parse_args()
    for index in range(args.runs):
        with tempfile.TemporaryDirectory() as out:
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "torchport.cli", "evaluate", "-b", "cpu,cpu-compile", "-o", out],
                           check=True, capture_output=True)
            elapsed = time.perf_counter() - started
        print(f"run {index + 1}: torchport evaluate (builtin:classifier on cpu, cpu-compile): {elapsed:.1f} s "
              f"= {elapsed / TARGET_S:.2f} x the {TARGET_S:.0f} s target", flush=True)


if __name__ == "__main__":
    main()
