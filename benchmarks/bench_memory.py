"""The worker's peak host memory against a plain training loop's.

Both run the same app, the same steps and the same allocator settings (the
environment torchport gives its workers, glibc's malloc thresholds included),
one after the other in fresh processes: memory does not drift with the
machine's speed the way time does, so they are not paired.  The plain loop is
bench_loop.py's hand-written loop (first step, warm-up, timed blocks), which
reports its ``ru_maxrss``; the worker is torchport's real evaluate job through
``torchport.launch.run_worker``, exactly as ``torchport evaluate`` runs it
(inference scenario and metric included, unless --no-inference), and reports
its peak per phase (``host_memory`` in the run record).

    python benchmarks/bench_memory.py [--app builtin:gpt?size=124m] [--backend cpu]
                                      [--steps 8] [--blocks 4] [--warmup 2]

Prints both peaks, the ratio (target: at most 1.10) and the worker's peak per phase.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys

from bench_loop import HAND_WRITTEN

GIB = 2**30
PEAK_LINE = "\nimport resource\nprint(json.dumps(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024))\n"


def plain_loop_peak(app: str, backend: str, steps: int, blocks: int, warmup: int) -> int:
    from torchport.launch import worker_environment

    done = subprocess.run([sys.executable, "-c", HAND_WRITTEN + PEAK_LINE, app, backend, str(steps), str(blocks),
                           str(warmup)], env=worker_environment(), capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"plain loop failed:\n{done.stderr[-2000:]}")
    return int(done.stdout.strip().splitlines()[-1])


def worker_run(app: str, backend: str, steps: int, blocks: int, warmup: int, inference: bool) -> dict:
    from torchport.launch import run_worker
    from torchport.protocol import ProtocolConfig

    # steady_tolerance 0: warm up exactly `warmup` steps, as the plain loop does.
    config = ProtocolConfig(steps=steps, blocks=blocks, max_warmup_steps=warmup, steady_tolerance=0.0,
                            inference=inference)
    result = run_worker(backend, "torchport.protocol:evaluate_job", app=app, config=config.as_dict(), timeout=3600).to_dict()
    if result.get("status") != "ok":
        raise SystemExit(f"torchport worker {result.get('status')}: {result.get('error')}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--app", default="builtin:gpt?size=124m")
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--steps", type=int, default=8, help="sustained steps (default 8)")
    parser.add_argument("--blocks", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--no-inference", action="store_true", help="leave out the worker's forward-only scenario")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()

    loop = plain_loop_peak(args.app, args.backend, args.steps, args.blocks, args.warmup)
    print(f"plain loop done: peak {loop / GIB:.3f} GiB", flush=True)
    result = worker_run(args.app, args.backend, args.steps, args.blocks, args.warmup, not args.no_inference)
    memory = result.get("host_memory") or {}
    worker = memory.get("peak_bytes") or result["host_peak_rss_bytes"]
    ratio = worker / loop
    print(f"{args.app} on {args.backend}: 1 + {args.warmup} warm-up + {args.steps} sustained steps "
          f"({'with' if not args.no_inference else 'without'} the worker's inference scenario)")
    print(f"plain loop peak  {loop / GIB:8.3f} GiB")
    print(f"torchport worker {worker / GIB:8.3f} GiB   ratio {ratio:.3f}  (target <= 1.10: "
          f"{'met' if ratio <= 1.10 else 'NOT met'})")
    for phase, peak in (memory.get("phases") or {}).items():
        print(f"  {phase:<24} {peak / GIB:8.3f} GiB")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"app": args.app, "backend": args.backend, "plain_loop_peak_bytes": loop,
                       "worker_peak_bytes": worker, "ratio": ratio, "phases": memory.get("phases"),
                       "allocator": (result.get("worker") or {}).get("allocator")}, handle, indent=1)


if __name__ == "__main__":
    main()
