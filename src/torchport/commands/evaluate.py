"""torchport evaluate [APP]"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(subparsers: argparse._SubParsersAction) -> None:
    from torchport.protocol import DTYPES, ProtocolConfig

    defaults = ProtocolConfig()
    parser = subparsers.add_parser(
        "evaluate",
        help="run the app on every available backend and compare",
        description="Run the same app, with the same configuration, on each backend in fresh worker "
        "processes; write result.json and report.md and print a summary.",
    )
    parser.add_argument("app", nargs="?", help="app.py, app.py:function, package.module:function, builtin:NAME "
                        "or hf:MODEL_TYPE[?key=value&...] (default: builtin:classifier)")
    from torchport.hf import add_batch_arguments

    add_batch_arguments(parser)
    parser.add_argument("-b", "--backend", action="append", default=[], metavar="NAME",
                        help="backend to evaluate (repeatable or comma-separated; default: all known)")
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per backend (default 3)")
    parser.add_argument("--steps", type=int, default=defaults.steps, help=f"sustained steps per run (default {defaults.steps})")
    parser.add_argument("--blocks", type=int, default=defaults.blocks, help=f"timed blocks the sustained steps are split into (default {defaults.blocks})")
    parser.add_argument("--max-warmup", type=int, default=defaults.max_warmup_steps, help=f"bound on warm-up steps (default {defaults.max_warmup_steps})")
    parser.add_argument("--dtype", choices=DTYPES, default=defaults.dtype)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--no-inference", action="store_true", help="skip the app's forward-only scenario")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds before a worker is killed (default 600)")
    parser.add_argument("--phase-timeout", type=float, default=None, help="seconds one phase (e.g. compilation) may take")
    parser.add_argument("--price", action="append", default=[], metavar="BACKEND=USD_PER_HOUR", help="price of a backend (repeatable)")
    parser.add_argument("--prices", type=Path, metavar="FILE.toml", help="TOML file of BACKEND = USD_PER_HOUR")
    parser.add_argument("--reference", default="cpu", help="backend the others are compared with (default cpu)")
    parser.add_argument("--no-trace", action="store_true", help="skip the op-level readiness trace (torchport trace)")
    parser.add_argument("--no-checks", action="store_true",
                        help="skip the parity, checkpoint and input-pipeline checks (torchport check runs all checks)")
    parser.add_argument("-o", "--out", type=Path, help="output folder (default torchport-results/APP-TIME)")
    parser.set_defaults(func=run)


def options_from_args(args: argparse.Namespace) -> Any:
    import sys

    from torchport.evaluate import EvaluationOptions, load_price_file, parse_price
    from torchport.hf import app_from_args
    from torchport.protocol import ProtocolConfig

    prices: dict[str, float] = {}
    if args.prices:
        prices.update(load_price_file(args.prices))
    for text in args.price:
        name, value = parse_price(text)
        prices[name] = value
    names = [name.strip() for item in args.backend for name in item.split(",") if name.strip()]
    protocol = ProtocolConfig(
        seed=args.seed, dtype=args.dtype, steps=args.steps, blocks=args.blocks,
        max_warmup_steps=args.max_warmup, inference=not args.no_inference,
    )
    stages = []
    if not args.no_trace:
        from torchport.trace.stage import evaluate_stage as trace_stage

        stages.append(trace_stage)
    if not args.no_checks:
        from torchport.check.stage import evaluate_stage as check_stage

        stages.append(check_stage)
    return EvaluationOptions(
        app=app_from_args(args), stages=stages, backends=names, repeats=args.repeats, protocol=protocol, timeout_s=args.timeout,
        phase_timeout_s=args.phase_timeout, prices=prices, reference=args.reference, out_dir=args.out,
        command=["torchport", *sys.argv[1:]],
    )


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from torchport.evaluate import Evaluation
    from torchport.report.markdown import render
    from torchport.report.terminal import print_summary

    options = options_from_args(args)
    console = Console(stderr=True)
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=console, transient=True) as progress:
        task = progress.add_task("starting", total=None)
        state: dict[str, Any] = {}

        def on_event(kind: str, data: dict[str, Any]) -> None:
            if kind == "plan":
                state["repeats"] = data["repeats"]
                progress.update(task, total=len(data["backends"]) * data["repeats"])
                console.print(f"[dim]writing {data['path']}[/dim]")
            elif kind in ("start", "progress"):
                if kind == "start":
                    state["round"] = data["round"]
                round_text = f"round {state.get('round', 0) + 1}/{state.get('repeats', 1)}"
                progress.update(task, description=f"{data['backend']} {round_text}: {data.get('phase', 'starting')}")
            elif kind == "stage":
                progress.update(task, description=f"stage: {data['stage']}")
            elif kind == "done":
                run = data["run"]
                progress.advance(task)
                if run["status"] != "ok":
                    console.print(f"[yellow]{data['backend']}: {run['status']}: {(run.get('error') or {}).get('message')}[/yellow]")

        evaluation = Evaluation(options, on_event=on_event)
        try:
            document = evaluation.run()
        finally:
            if evaluation.result_path.exists():
                from torchport import results

                report_path = evaluation.out_dir / "report.md"
                report_path.write_text(render(results.read(evaluation.result_path)), encoding="utf-8")
    print_summary(document)
    print(f"result: {evaluation.result_path}\nreport: {evaluation.out_dir / 'report.md'}")
    # The evaluation itself succeeded; but if nothing ran, a script must notice.
    return 0 if any(b.get("summary") for b in document["backends"].values()) else 1
