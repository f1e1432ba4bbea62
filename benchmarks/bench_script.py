"""Script mode's sustained step time against the same script timing itself.

Reference: benchmarks/script_selftimed.py run plainly with --self-timed, which
times its own sustained steps in blocks.  torchport runs the same script,
unmodified, through ``torchport.script.job:script_job`` (exactly what
``torchport evaluate --script`` runs), where the steps come from the optimizer
hook and a second thread does the timing.  Target: agree within 2% (the hooks
and the hand-over between the two threads must neither cost nor hide time).

As in bench_loop.py, each round starts both at once and a TurnCoordinator
makes them take turns block by block; each round's figure is the median of
its block pairs' ratios, and the ratio is their geometric mean over rounds
with Student's t 95% interval over rounds (``torchport.stats.compare_paired``).

    python benchmarks/bench_script.py [--rounds 5] [--backends cpu,cpu-compile]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from paired import run_paired

SCRIPT = str(Path(__file__).resolve().parent / "script_selftimed.py")
STEPS, BLOCKS, WARMUP = 240, 20, 60


def paired_round(backend: str) -> tuple[list[float], list[float]]:
    from torchport.launch import run_worker
    from torchport.protocol import ProtocolConfig

    config = ProtocolConfig(steps=STEPS, blocks=BLOCKS, max_warmup_steps=WARMUP, steady_tolerance=0.0,
                            inference=False)
    compiled = "true" if backend.endswith("-compile") else "false"
    # Script mode's first step runs freely (no turn), so each side takes warm-up + sustained + closing turns.
    result, last_line = run_paired(
        [sys.executable, SCRIPT, "--device", "cpu", "--compile", compiled,
         "--self-timed", f"{WARMUP},{BLOCKS},{config.block_steps}"],
        "the self-timed script",
        lambda turns: run_worker(backend, "torchport.script.job:script_job", config=config.as_dict(),
                                 extra={"script": SCRIPT, "script_args": ["--device={device}", "--compile={compile}"],
                                        "cwd": str(Path.cwd())},
                                 env=turns, timeout=900).to_dict(),
        expected_turns=2 * (WARMUP // config.block_steps + BLOCKS + 1))
    blocks = result["training"]["sustained"]["blocks"]
    return [b["seconds"] / b["steps"] for b in blocks], json.loads(last_line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--backends", default="cpu,cpu-compile")
    args = parser.parse_args()
    from torchport.stats import Measurement, compare_paired, paired_speedups

    print(f"{STEPS} sustained steps in {BLOCKS} blocks after {WARMUP} warm-up steps; {args.rounds} paired rounds")
    print(f"{'backend':<13} {'script mode':>12} {'self-timed':>11} {'ratio':>7}  {'95% CI':>15}  spread between rounds")
    for backend in args.backends.split(","):
        ours, theirs = [], []
        for _ in range(args.rounds):
            mine, reference = paired_round(backend)
            ours.append(mine)
            theirs.append(reference)
        mine, reference = Measurement(ours), Measurement(theirs)
        comparison = compare_paired(mine, reference)
        ratio = 1 / comparison.speedup
        low, high = 1 / comparison.ci95[1], 1 / comparison.ci95[0]
        per_round = " ".join(f"{1 / speedup:.3f}" for speedup in paired_speedups(mine, reference))
        print(f"{backend:<13} {mine.median * 1e3:>9.3f} ms {reference.median * 1e3:>8.3f} ms {ratio:>7.3f}  "
              f"[{low:.3f}, {high:.3f}]  {reference.run_spread:>10.1%}   rounds: {per_round}", flush=True)


if __name__ == "__main__":
    main()
