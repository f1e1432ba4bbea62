"""Script mode's sustained step time against the same script timing itself.

Reference: benchmarks/script_selftimed.py run plainly with --self-timed, which
times its own sustained steps in blocks.  torchport runs the same script,
unmodified, through ``torchport.script.job:script_job`` (exactly what
``torchport evaluate --script`` runs), where the steps come from the optimizer
hook and a second thread does the timing.  Target: agree within 2% (the hooks
and the hand-over between the two threads must neither cost nor hide time).

As in bench_loop.py, each round starts both at once and a TurnCoordinator
makes them take turns block by block; the ratio is the median over rounds of
each round's ratio of median block times, with a paired-bootstrap 95% interval.

    python benchmarks/bench_script.py [--rounds 5] [--backends cpu,cpu-compile]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

SCRIPT = str(Path(__file__).resolve().parent / "script_selftimed.py")
STEPS, BLOCKS, WARMUP = 240, 20, 60


def paired_round(backend: str) -> tuple[list[float], list[float]]:
    from torchport.launch import run_worker, worker_environment
    from torchport.protocol import ProtocolConfig
    from torchport.turns import TurnCoordinator

    config = ProtocolConfig(steps=STEPS, blocks=BLOCKS, max_warmup_steps=WARMUP, steady_tolerance=0.0,
                            inference=False)
    compiled = "true" if backend.endswith("-compile") else "false"
    coordinator = TurnCoordinator(parties=2)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        try:
            plain = subprocess.Popen(
                [sys.executable, SCRIPT, "--device", "cpu", "--compile", compiled,
                 "--self-timed", f"{WARMUP},{BLOCKS},{config.block_steps}"],
                stdout=out, stderr=err, text=True, env={**worker_environment(), **coordinator.environment})

            def release_if_it_fails() -> None:
                if plain.wait() != 0:
                    coordinator.close()

            threading.Thread(target=release_if_it_fails, daemon=True).start()
            result = run_worker(backend, "torchport.script.job:script_job", config=config.as_dict(),
                                extra={"script": SCRIPT, "script_args": ["--device={device}", "--compile={compile}"],
                                       "cwd": str(Path.cwd())},
                                env=coordinator.environment, timeout=900)
            if result.get("status") != "ok":
                coordinator.close()
            plain.wait()
        finally:
            coordinator.close()
        out.seek(0)
        err.seek(0)
        plain_out, plain_err = out.read(), err.read()
    if plain.returncode != 0:
        raise SystemExit(f"the self-timed script failed:\n{plain_err[-2000:]}")
    if result.get("status") != "ok":
        raise SystemExit(f"torchport worker {result.get('status')}: {result.get('error')}\n"
                         + "\n".join(result.get("stderr_tail", [])))
    # Script mode's first step runs freely (no turn), so each side takes warm-up + sustained + closing turns.
    expected = 2 * (WARMUP // config.block_steps + BLOCKS + 1)
    if coordinator.turns_granted != expected:
        raise SystemExit(f"the two processes took {coordinator.turns_granted} turns, expected {expected}: not paired")
    blocks = result["training"]["sustained"]["blocks"]
    return [b["seconds"] / b["steps"] for b in blocks], json.loads(plain_out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--backends", default="cpu,cpu-compile")
    args = parser.parse_args()
    from torchport.stats import Measurement, compare_paired

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
        per_round = " ".join(f"{m / r:.3f}" for m, r in zip(mine.run_medians, reference.run_medians))
        print(f"{backend:<13} {mine.median * 1e3:>9.3f} ms {reference.median * 1e3:>8.3f} ms {ratio:>7.3f}  "
              f"[{low:.3f}, {high:.3f}]  {reference.run_spread:>10.1%}   rounds: {per_round}", flush=True)


if __name__ == "__main__":
    main()
