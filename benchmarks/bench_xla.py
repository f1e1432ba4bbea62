"""builtin:classifier on cpu and on xla (torch_xla on XLA's CPU client).

Prints the sustained step time of each backend, their ratio, and what XLA
compiled: graphs and compile time per phase, per run.  The xla figures are a
TPU-compiler proxy: they show what the XLA path costs in compilation and
whether it settles, not how fast a TPU would be.

    python benchmarks/bench_xla.py [--repeats 3] [--app builtin:classifier] [--out DIR]

Needs the xla environment (torchport env create xla).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from torchport.evaluate import Evaluation, EvaluationOptions
from torchport import formatting as fmt
from torchport.stats import median


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--app", default="builtin:classifier")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, help="keep result.json here (default: a temporary folder)")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="bench-xla-"))
    options = EvaluationOptions(app=args.app, backends=["cpu", "xla"], repeats=args.repeats, out_dir=out,
                                command=["benchmarks/bench_xla.py", *sys.argv[1:]])
    document = Evaluation(options).run()
    backends = document["backends"]
    for name, backend in backends.items():
        if backend["status"] != "ok":
            print(f"{name}: {backend['status']}: {backend.get('reason') or (backend.get('error') or {}).get('message')}")
            return 1

    print(f"{args.app}, {args.repeats} fresh processes per backend, "
          f"{document['config']['steps']} sustained steps each; result: {out / 'result.json'}")
    print(f"{'backend':8} {'step time, median [95% CI]':32} {'first step':>11} {'init':>9}")
    for name, backend in backends.items():
        summary = backend["summary"]
        print(f"{name:8} {fmt.step_time_with_ci(summary['step_time_s']):32} {fmt.seconds(summary['first_step_s']):>11} "
              f"{fmt.seconds(summary['init_s']):>9}")
    ratio = backends["xla"]["comparison"]
    print(f"xla vs cpu (cpu time / xla time): {fmt.speedup(ratio)}")

    print("xla compilations per run (first step / warm-up / sustained) and compile time:")
    compile_times = []
    for run in backends["xla"]["runs"]:
        counters = run["training"]["counters"]
        phases = [counters[phase] for phase in ("first_step", "warmup", "sustained")]
        total = sum(phase["compile_time_s"] for phase in phases)
        compile_times.append(total)
        print(f"  run {run['round'] + 1}: {' / '.join(str(p['compilations']) for p in phases)} graphs, "
              f"{fmt.seconds(total)} compiling, warm-up {run['training']['warmup']['steps']} steps, "
              f"{phases[2]['cached_compilations']} cache hits and "
              f"{len(phases[2]['fallback_ops'])} fallback op kinds in the sustained steps")
    print(f"  median compile time per run: {fmt.seconds(median(compile_times))}")
    print(f"  (a proxy for {backends['xla']['proxy_for']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
