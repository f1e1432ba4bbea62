"""torchport's sustained step time against a hand-written training loop.

Reference: a plain PyTorch loop over the same app (same model, data, loss,
optimizer, seed), in a fresh process, warmed up, then timed in blocks between
synchronizations: the way anyone would time it by hand.  torchport must agree
within 2%: the harness must not cost or hide time.  Printed: the ratio of
medians (torchport / hand-written), its 95% interval (hierarchical bootstrap
over rounds and blocks), and how much the hand-written loop's own fresh
processes disagree (the machine's noise floor).

For each built-in app and each available backend of this interpreter
(cpu, cpu-compile, cuda, cuda-compile), runs are interleaved: round after round,
one torchport evaluation then one hand-written loop, ROUNDS times.  Prints the
median step time of each and the ratio.

    python benchmarks/bench_loop.py [--rounds 3] [--apps classifier,gpt] [--backends cpu]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap

STEPS, BLOCKS, WARMUP = 60, 10, 60

HAND_WRITTEN = textwrap.dedent('''
    import json, sys, time
    import torch
    from torchport.app import load_app

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

    for _ in range(warmup):
        step()
    sync()
    per_block = steps // blocks
    times = []
    for _ in range(blocks):
        started = time.perf_counter()
        for _ in range(per_block):
            step()
        sync()
        times.append((time.perf_counter() - started) / per_block)
    print(json.dumps(times))
''')


def available_backends() -> list[str]:
    import torch

    names = ["cpu", "cpu-compile"]
    if torch.cuda.is_available():
        names += ["cuda", "cuda-compile"]
    return names


def hand_written(app: str, backend: str, warmup: int) -> list[float]:
    out = subprocess.run([sys.executable, "-c", HAND_WRITTEN, app, backend, str(STEPS), str(BLOCKS), str(warmup)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def torchport_run(app: str, backend: str) -> tuple[list[float], int]:
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([sys.executable, "-m", "torchport.cli", "evaluate", app, "-b", backend, "--repeats", "1",
                        "--steps", str(STEPS), "--blocks", str(BLOCKS), "--max-warmup", str(WARMUP),
                        "--no-inference", "-o", out], capture_output=True, text=True, check=True)
        with open(os.path.join(out, "result.json")) as handle:
            run = json.load(handle)["backends"][backend]["runs"][0]["training"]
    times = [b["seconds"] / b["steps"] for b in run["sustained"]["blocks"]]
    return times, run["warmup"]["steps"] + 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--apps", default="classifier,cnn,gpt")
    parser.add_argument("--backends", default=",".join(available_backends()))
    args = parser.parse_args()
    from torchport.stats import Measurement, compare

    print(f"{'app':<12} {'backend':<13} {'torchport':>12} {'hand-written':>13} {'ratio':>7}  "
          f"{'95% CI':>15}  {'hand-written run spread':>24}")
    for app in args.apps.split(","):
        for backend in args.backends.split(","):
            ours, theirs = [], []
            for _ in range(args.rounds):
                times, warmed = torchport_run(f"builtin:{app}", backend)
                ours.append(times)
                # The hand-written loop warms up exactly as many steps as torchport did.
                theirs.append(hand_written(f"builtin:{app}", backend, warmed))
            mine, reference = Measurement(ours), Measurement(theirs)
            comparison = compare(mine, reference)  # speedup = hand-written time / torchport time
            ratio = 1 / comparison.speedup
            low, high = 1 / comparison.ci95[1], 1 / comparison.ci95[0]
            # How much fresh processes of the *same* hand-written loop disagree: the
            # noise floor below which no ratio on this machine means anything.
            print(f"{app:<12} {backend:<13} {mine.median * 1e3:>9.3f} ms {reference.median * 1e3:>10.3f} ms "
                  f"{ratio:>7.3f}  [{low:.3f}, {high:.3f}]  {reference.run_spread:>23.1%}", flush=True)


if __name__ == "__main__":
    main()
