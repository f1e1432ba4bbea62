"""Cost of tracing: traced vs. untraced eager training step of builtin:gpt on the CPU.

Both are the real job's step: the app built as ``torchport trace`` builds it
(``torchport.trace.job.build_for_trace``, the one step engine) and stepped by
the engine, once plainly and once as the trace job steps it
(``torchport.trace.job.traced_step``: the tracer's modes and phases around the
same step).  Same process, same model, same data stream; both after warm-up.
Prints the median step time of each and their ratio (target: traced <= 5x
untraced).

    .venv/bin/python benchmarks/bench_trace.py [--steps N] [--app builtin:gpt]
"""
from __future__ import annotations

import argparse
import time

import torch

from torchport.backends import get as get_backend
from torchport.engine import function_location
from torchport.stats import median
from torchport.trace.job import TracedPhases, build_for_trace, traced_step
from torchport.trace.tracer import OpTracer

TARGET_RATIO = 5.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--app", default="builtin:gpt")
    parser.add_argument("--steps", type=int, default=10, help="timed steps of each kind (default 10)")
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()

    engine = build_for_trace(args.app, get_backend("cpu")(), seed=0)
    location = function_location(engine.app.loss)
    tracer = OpTracer(engine.model, {phase: location for phase in ("data", "forward", "loss", "backward", "optimizer")})
    phases = TracedPhases(tracer)

    def step(index: int) -> None:
        engine.train_step()

    def step_traced(index: int) -> None:
        traced_step(engine, tracer, phases, index)

    def timed(function) -> list[float]:
        for index in range(args.warmup):
            function(index)
        times = []
        for index in range(args.steps):
            started = time.perf_counter()
            function(index)
            times.append(time.perf_counter() - started)
        return times

    # Alternate the two kinds in rounds so machine drift touches both alike.
    eager: list[float] = []
    traced: list[float] = []
    for _ in range(2):
        eager += timed(step)
        traced += timed(step_traced)
    eager_s, traced_s = median(eager), median(traced)
    ratio = traced_s / eager_s
    ops = sum(record.count for record in tracer.records.values()) / max(1, len(tracer.step_sequences))
    print(f"app: {args.app}; torch {torch.__version__}; {torch.get_num_threads()} threads; "
          f"{len(eager)} steps of each kind after {args.warmup} warm-up steps")
    print(f"untraced eager step: {eager_s * 1e3:8.1f} ms (median)")
    print(f"traced step:         {traced_s * 1e3:8.1f} ms (median), {ops:.0f} op calls per step")
    print(f"ratio traced/untraced: {ratio:.2f}x (target <= {TARGET_RATIO:g}x): {'OK' if ratio <= TARGET_RATIO else 'OVER'}")
    return 0 if ratio <= TARGET_RATIO else 1


if __name__ == "__main__":
    raise SystemExit(main())
