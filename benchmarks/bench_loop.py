"""torchport's sustained step time against a hand-written training loop.

Reference: a plain PyTorch loop over the same app (same model, data, loss,
optimizer, seed) in its own fresh process, warmed up for the same number of
steps, then timed in blocks between synchronizations: the way anyone would time
it by hand.  torchport must agree within 2%: the harness must neither cost nor
hide time.

Why the two run in lockstep.  On a shared 2-core host the machine's own speed
drifts by 20-40% between fresh processes a few seconds apart, far above the 2%
to be shown; timed one after the other, the comparison measures the drift.  So
each round starts torchport's real worker (``torchport.protocol:evaluate_job``,
through ``torchport.launch.run_worker``, exactly as ``torchport evaluate`` runs
it) and the hand-written loop at the same time, and a ``TurnCoordinator`` makes
them take turns block by block: never running together, both seeing the same
machine.  Block k of one and block k of the other ran back to back, so each
round gives one figure, the median over its 40 block pairs of torchport's
block time / the hand-written one's: the machine's drift cancels block by
block, and one block that another process interrupted does not move it.  The
ratio is the geometric mean of the rounds' figures, and its 95% interval is
Student's t over the rounds (rounds - 1 degrees of freedom): the rounds, fresh
pairs of processes, are the independent units; the blocks inside a round
share their processes and enter only through their round's median
(``torchport.stats.compare_paired``).  The rounds' own spread is printed too:
the drift that pairing cancels.

    python benchmarks/bench_loop.py [--rounds 5] [--apps classifier,gpt] [--backends cpu]

``--candidates all`` finds what the harness costs: each candidate (the
parent watchdog, host-memory bookkeeping, progress lines, evaluate's per-step
additions, the kept losses; see harness_candidates.py) is switched off inside
the worker in turn, in the same paired rounds, and its share of the ratio is
printed, with what else the two processes differ in (threads, affinity,
allocator and OpenMP settings, Python threads, garbage-collected objects).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from typing import Any

from paired import run_paired

HERE = os.path.dirname(os.path.abspath(__file__))

# 40 block pairs a round: the rounds' figures vary mostly by the noise of
# their block medians (about 1% at 20 pairs on an idle 2-core machine), which
# more pairs narrow at little cost beside the processes' start and compilation.
STEPS, BLOCKS, WARMUP = 480, 40, 60

HAND_WRITTEN = textwrap.dedent('''
    import json, sys, time
    import torch
    from torchport.app import load_app
    from torchport.turns import take_turn  # wait for our turn before each block; not timed
    from harness_candidates import per_step_usage, record_block, usage

    app_spec, backend, steps, blocks, warmup = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
    torch.manual_seed(0)
    app = load_app(app_spec)
    device = torch.device("cuda" if backend.startswith("cuda") else "cpu")
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    model = app.model().to(device)
    optimizer = app.optimizer(model)
    forward = torch.compile(model) if backend.endswith("-compile") else model
    data = app.data()

    def batches():
        while True:
            yield from data

    stream = batches()

    def to_device(batch):
        if isinstance(batch, torch.Tensor):
            return batch.to(device)
        if isinstance(batch, dict):
            return {k: to_device(v) for k, v in batch.items()}
        return type(batch)(to_device(v) for v in batch)

    def step():
        batch = to_device(next(stream))
        optimizer.zero_grad(set_to_none=True)
        loss = app.loss(forward, batch)
        loss.backward()
        optimizer.step()
        return loss.detach()

    def block(count):
        take_turn()
        before = usage()
        started = time.perf_counter()
        for _ in range(count):
            step()
        sync()
        elapsed = time.perf_counter() - started
        record_block(count, before)
        return elapsed / count

    per_block = steps // blocks
    block(1)  # the first step, with any compilation
    for _ in range(warmup // per_block):
        block(per_block)
    times = [block(per_block) for _ in range(blocks)]
    take_turn()  # the paired process finishes its last block before we wind down
    from harness_candidates import facts  # read after the timed blocks
    print(json.dumps({"times": times, "facts": {**facts(), "per_step": per_step_usage(blocks)}}))
''')


def available_backends() -> list[str]:
    import torch

    names = ["cpu", "cpu-compile"]
    if torch.cuda.is_available():
        names += ["cuda", "cuda-compile"]
    return names


def paired_round(app: str, backend: str, candidate: str | None = None
                 ) -> tuple[list[float], list[float], dict[str, Any], dict[str, Any]]:
    """One torchport worker and one hand-written loop, taking turns block by
    block; ``candidate``: what the worker switches off (harness_candidates).
    Returns both processes' block times and facts."""
    from harness_candidates import WORKER_ENVIRONMENT
    from torchport.launch import run_worker
    from torchport.protocol import ProtocolConfig

    # steady_tolerance 0: warm up exactly WARMUP steps, as the hand-written loop does.
    config = ProtocolConfig(steps=STEPS, blocks=BLOCKS, max_warmup_steps=WARMUP, steady_tolerance=0.0,
                            inference=False)
    job = "torchport.protocol:evaluate_job" if candidate is None else "harness_candidates:job"
    job_config = config.as_dict() if candidate is None else {**config.as_dict(), "candidate": candidate}
    result, last_line = run_paired(
        [sys.executable, "-c", HAND_WRITTEN, app, backend, str(STEPS), str(BLOCKS), str(WARMUP)],
        "hand-written loop",
        lambda turns: run_worker(backend, job, app=app, config=job_config,
                                 env={**turns, **WORKER_ENVIRONMENT.get(candidate or "none", {})}, timeout=900).to_dict(),
        expected_turns=2 * (1 + WARMUP // config.block_steps + BLOCKS + 1))
    blocks = result["training"]["sustained"]["blocks"]
    theirs = json.loads(last_line)
    return ([b["seconds"] / b["steps"] for b in blocks], theirs["times"], result.get("harness_facts", {}),
            theirs["facts"])


def ratio_of(ours: list[list[float]], theirs: list[list[float]]) -> tuple[float, float, float, str, Any, Any]:
    """Ratio torchport / hand-written, its 95% interval and each round's ratio."""
    from torchport.stats import Measurement, compare_paired, paired_speedups

    mine, reference = Measurement(ours), Measurement(theirs)
    comparison = compare_paired(mine, reference)  # speedup = hand-written time / torchport time
    per_round = " ".join(f"{1 / speedup:.3f}" for speedup in paired_speedups(mine, reference))
    return 1 / comparison.speedup, 1 / comparison.ci95[1], 1 / comparison.ci95[0], per_round, mine, reference


def fact_differences(worker: dict[str, Any], hand: dict[str, Any]) -> list[str]:
    return [f"{name}: torchport {worker.get(name)!r}, hand-written {hand.get(name)!r}"
            for name in sorted(set(worker) | set(hand))
            if name != "gc_collections" and worker.get(name) != hand.get(name)]


def run_candidates(apps: list[str], backends: list[str], rounds: int, names: list[str]) -> dict[str, Any]:
    """Each candidate switched off in turn: the same rounds run every variant
    one after the other (round 1: as is, then each candidate; round 2 ...), so
    a slow minute of the machine lands on all of them alike."""
    from harness_candidates import CANDIDATES

    variants = ["none", *names]
    raw: dict[str, Any] = {}
    for app in apps:
        for backend in backends:
            times: dict[str, tuple[list[list[float]], list[list[float]]]] = {v: ([], []) for v in variants}
            facts: dict[str, Any] = {}
            for _ in range(rounds):
                for variant in variants:
                    mine, reference, worker_facts, hand_facts = paired_round(_spec(app), backend, variant)
                    times[variant][0].append(mine)
                    times[variant][1].append(reference)
                    facts.setdefault(variant, (worker_facts, hand_facts))
            print(f"\n{app} on {backend}, {rounds} paired rounds per variant (load average {_load()}):")
            base = ratio_of(*times["none"])[0]
            for variant in variants:
                ratio, low, high, per_round, _, _ = ratio_of(*times[variant])
                what = "as is" if variant == "none" else f"{variant} off" if variant != "watchdog-poll" else \
                    "old watchdog on"
                share = "" if variant == "none" else f"  share {base - ratio:+.3f}"
                faults = [side.get("per_step", {}).get("minor_faults") for side in facts[variant]]
                threads = [f"{side.get('torch_threads')}/{side.get('interop_threads')}" for side in facts[variant]]
                print(f"  {what:<22} ratio {ratio:.3f} [{low:.3f}, {high:.3f}]{share}   rounds {per_round}"
                      f"   page faults a step (torchport, hand-written) {faults}"
                      f"   intra/inter-op threads {threads}")
            print("  candidates: " + "; ".join(f"{k}: {v}" for k, v in CANDIDATES.items() if k in names))
            differences = fact_differences(*facts["none"])
            print("  worker and hand-written loop differ in: " + ("; ".join(differences) or "nothing read"))
            gc_runs = {side: facts["none"][index].get("gc_collections") for index, side in
                       enumerate(("torchport", "hand-written"))}
            print(f"  garbage collections by generation, whole process: {gc_runs}", flush=True)
            raw[f"{app}/{backend}"] = {v: {"torchport": t[0], "hand_written": t[1]} for v, t in times.items()}
            raw[f"{app}/{backend}"]["facts"] = facts
    return raw


def _spec(app: str) -> str:
    return app if (":" in app or "/" in app) else f"builtin:{app}"


def _load() -> str:
    try:
        with open("/proc/loadavg") as handle:
            return " ".join(handle.read().split()[:3])
    except OSError:
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--apps", default="classifier,cnn,gpt",
                        help="built-in names, or app specs (path/to/app.py[:function]) for other apps")
    parser.add_argument("--backends", default=",".join(available_backends()))
    parser.add_argument("--candidates", metavar="NAMES",
                        help="switch each candidate cost off in the worker in turn and report its share "
                             "of the ratio: 'all' or a comma-separated list of harness_candidates.CANDIDATES")
    parser.add_argument("--threads", type=int,
                        help="OMP_NUM_THREADS for both processes (default: torchport's worker setting, one per CPU); a diagnostic "
                             "for a loaded machine, where OpenMP threads waiting at barriers for cores that "
                             "others hold make steps tens of times slower")
    parser.add_argument("--json", help="also write every block time here (seconds per step, per round)")
    args = parser.parse_args()
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
        print(f"OMP_NUM_THREADS={args.threads} in both processes")
    # Both processes import harness_candidates from this folder.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [HERE, os.environ.get("PYTHONPATH")]))
    apps, backends = args.apps.split(","), args.backends.split(",")
    raw: dict[str, Any] = {}
    if args.candidates:
        from harness_candidates import CANDIDATES

        names = list(CANDIDATES) if args.candidates == "all" else args.candidates.split(",")
        unknown = [name for name in names if name not in CANDIDATES]
        if unknown:
            parser.error(f"unknown candidate(s) {', '.join(unknown)}; choose from {', '.join(CANDIDATES)}")
        print(f"{STEPS} sustained steps in {BLOCKS} blocks after {WARMUP} warm-up steps; load average {_load()}")
        raw = run_candidates(apps, backends, args.rounds, names)
    else:
        raw = run_comparison(apps, backends, args.rounds)
    print(f"load average at the end: {_load()}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"steps": STEPS, "blocks": BLOCKS, "warmup": WARMUP, "seconds_per_step": raw}, handle, indent=1)


def run_comparison(apps: list[str], backends: list[str], rounds: int) -> dict[str, Any]:
    raw: dict[str, Any] = {}
    print(f"{STEPS} sustained steps in {BLOCKS} blocks after {WARMUP} warm-up steps; {rounds} paired rounds; "
          f"load average {_load()}")
    print(f"{'app':<12} {'backend':<13} {'torchport':>12} {'hand-written':>13} {'ratio':>7}  "
          f"{'95% CI':>15}  {'spread between rounds':>22}")
    for app in apps:
        for backend in backends:
            ours, theirs = [], []
            differences: list[str] = []
            for _ in range(rounds):
                mine, reference, worker_facts, hand_facts = paired_round(_spec(app), backend)
                ours.append(mine)
                theirs.append(reference)
                differences = differences or fact_differences(worker_facts, hand_facts)
            ratio, low, high, per_round, mine_m, reference_m = ratio_of(ours, theirs)
            raw[f"{app}/{backend}"] = {"torchport": ours, "hand_written": theirs}
            verdict = "agree within 2%" if low >= 0.98 and high <= 1.02 else (
                "differ" if low > 1.02 or high < 0.98 else "not shown within 2%")
            # How much the rounds differ from each other: the machine's drift that pairing cancels.
            print(f"{app[-12:]:<12} {backend:<13} {mine_m.median * 1e3:>9.3f} ms {reference_m.median * 1e3:>10.3f} ms "
                  f"{ratio:>7.3f}  [{low:.3f}, {high:.3f}]  {reference_m.run_spread:>21.1%}  {verdict}", flush=True)
            print(f"{'':<26} each round's ratio: {per_round}   load average {_load()}", flush=True)
    return raw


if __name__ == "__main__":
    main()
