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
machine.  The ratio is the median over rounds of each round's ratio of median
block times (torchport / hand-written), with a 95% interval from a paired
bootstrap over rounds and block pairs (``torchport.stats.compare_paired``).
The rounds' own spread is printed too: the drift that pairing cancels.

    python benchmarks/bench_loop.py [--rounds 5] [--apps classifier,gpt] [--backends cpu]
"""
from __future__ import annotations

import argparse
import json
import sys
import textwrap

from paired import run_paired

STEPS, BLOCKS, WARMUP = 240, 20, 60

HAND_WRITTEN = textwrap.dedent('''
    import json, sys, time
    import torch
    from torchport.app import load_app
    from torchport.turns import take_turn  # wait for our turn before each block; not timed

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
        started = time.perf_counter()
        for _ in range(count):
            step()
        sync()
        return (time.perf_counter() - started) / count

    per_block = steps // blocks
    block(1)  # the first step, with any compilation
    for _ in range(warmup // per_block):
        block(per_block)
    times = [block(per_block) for _ in range(blocks)]
    take_turn()  # the paired process finishes its last block before we wind down
    print(json.dumps(times))
''')


def available_backends() -> list[str]:
    import torch

    names = ["cpu", "cpu-compile"]
    if torch.cuda.is_available():
        names += ["cuda", "cuda-compile"]
    return names


def paired_round(app: str, backend: str) -> tuple[list[float], list[float]]:
    """One torchport worker and one hand-written loop, taking turns block by block."""
    from torchport.launch import run_worker
    from torchport.protocol import ProtocolConfig

    # steady_tolerance 0: warm up exactly WARMUP steps, as the hand-written loop does.
    config = ProtocolConfig(steps=STEPS, blocks=BLOCKS, max_warmup_steps=WARMUP, steady_tolerance=0.0,
                            inference=False)
    result, last_line = run_paired(
        [sys.executable, "-c", HAND_WRITTEN, app, backend, str(STEPS), str(BLOCKS), str(WARMUP)],
        "hand-written loop",
        lambda turns: run_worker(backend, "torchport.protocol:evaluate_job", app=app, config=config.as_dict(),
                                 env=turns, timeout=900),
        expected_turns=2 * (1 + WARMUP // config.block_steps + BLOCKS + 1))
    blocks = result["training"]["sustained"]["blocks"]
    return [b["seconds"] / b["steps"] for b in blocks], json.loads(last_line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--apps", default="classifier,cnn,gpt",
                        help="built-in names, or app specs (path/to/app.py[:function]) for other apps")
    parser.add_argument("--backends", default=",".join(available_backends()))
    parser.add_argument("--json", help="also write every block time here (seconds per step, per round)")
    args = parser.parse_args()
    raw: dict[str, dict[str, list[list[float]]]] = {}
    from torchport.stats import Measurement, compare_paired

    print(f"{STEPS} sustained steps in {BLOCKS} blocks after {WARMUP} warm-up steps; {args.rounds} paired rounds")
    print(f"{'app':<12} {'backend':<13} {'torchport':>12} {'hand-written':>13} {'ratio':>7}  "
          f"{'95% CI':>15}  {'spread between rounds':>22}")
    for app in args.apps.split(","):
        for backend in args.backends.split(","):
            ours, theirs = [], []
            for _ in range(args.rounds):
                mine, reference = paired_round(app if (":" in app or "/" in app) else f"builtin:{app}", backend)
                ours.append(mine)
                theirs.append(reference)
            mine, reference = Measurement(ours), Measurement(theirs)
            comparison = compare_paired(mine, reference)  # speedup = hand-written time / torchport time
            ratio = 1 / comparison.speedup
            low, high = 1 / comparison.ci95[1], 1 / comparison.ci95[0]
            raw[f"{app}/{backend}"] = {"torchport": ours, "hand_written": theirs}
            per_round = " ".join(f"{m / r:.3f}" for m, r in zip(mine.run_medians, reference.run_medians))
            verdict = "agree within 2%" if low >= 0.98 and high <= 1.02 else (
                "differ" if low > 1.02 or high < 0.98 else "not shown within 2%")
            # How much the rounds differ from each other: the machine's drift that pairing cancels.
            print(f"{app[-12:]:<12} {backend:<13} {mine.median * 1e3:>9.3f} ms {reference.median * 1e3:>10.3f} ms "
                  f"{ratio:>7.3f}  [{low:.3f}, {high:.3f}]  {reference.run_spread:>21.1%}  {verdict}", flush=True)
            print(f"{'':<26} each round's ratio: {per_round}", flush=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"steps": STEPS, "blocks": BLOCKS, "warmup": WARMUP, "seconds_per_step": raw}, handle, indent=1)


if __name__ == "__main__":
    main()
