"""torchport evaluate [APP]"""
from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any

from torchport.records import ErrorKind, ResultDocument, RunStatus


def register(subparsers: argparse._SubParsersAction) -> None:
    from torchport import options as types
    from torchport.limits import DEFAULT_TIMEOUT_S
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
    parser.add_argument("--repeats", type=types.count(1), default=3, help="fresh processes per backend (default 3)")
    parser.add_argument("--steps", type=types.count(1), default=defaults.steps, help=f"sustained steps per run (default {defaults.steps})")
    parser.add_argument("--blocks", type=types.count(1), default=defaults.blocks, help=f"timed blocks the sustained steps are split into (default {defaults.blocks})")
    parser.add_argument("--max-warmup", type=types.count(0), default=defaults.max_warmup_steps, help=f"bound on warm-up steps (default {defaults.max_warmup_steps})")
    from torchport.budget import DEFAULT_BUDGET_S, DEFAULT_PRECISION

    parser.add_argument("--budget", metavar="DURATION", default=None,
                        help=f"time for the whole evaluation, stages included, e.g. 10m, 90s, 1h30m; plans warm-up, "
                             f"blocks and repeats per backend to fit and samples until --precision is reached "
                             f"(default: a {DEFAULT_BUDGET_S / 60:.0f}-minute cap on the fixed protocol; none: no cap)")
    parser.add_argument("--precision", metavar="PCT", default=None,
                        help=f"target half-width of the 95%% interval of the median step time, e.g. 2%% (default "
                             f"{DEFAULT_PRECISION * 100:.0f}%%); sampling stops once reached or when the budget is spent")
    parser.add_argument("--dtype", choices=DTYPES, default=defaults.dtype,
                        help="dtype of the model's parameters and inputs, the same on every backend (default: %(default)s)")
    parser.add_argument("--seed", type=types.seed, default=defaults.seed,
                        help="seed of torch's, numpy's and Python's random generators in every worker (default: %(default)s)")
    parser.add_argument("--no-inference", action="store_true", help="skip the app's forward-only scenario")
    parser.add_argument("--timeout", type=types.positive_seconds, default=DEFAULT_TIMEOUT_S, help=f"seconds before a worker is killed (default {DEFAULT_TIMEOUT_S:g})")
    parser.add_argument("--phase-timeout", type=types.positive_seconds, default=None, help="seconds one phase (e.g. compilation) may take")
    parser.add_argument("--price", action="append", default=[], metavar="BACKEND=USD_PER_HOUR", help="price of a backend (repeatable)")
    parser.add_argument("--prices", type=Path, metavar="FILE.toml", help="TOML file of BACKEND = USD_PER_HOUR")
    parser.add_argument("--reference", default="cpu", help="backend the others are compared with (default cpu)")
    parser.add_argument("--no-trace", action="store_true", help="skip the op-level readiness trace (torchport trace)")
    parser.add_argument("--no-checks", action="store_true",
                        help="skip the parity, checkpoint and input-pipeline checks (torchport check runs all checks)")
    from torchport import stages

    parser.add_argument("--skip-stage", action="append", default=[], choices=stages.names(), metavar="NAME",
                        help=f"skip one stage by name (repeatable): {', '.join(stages.names())}")
    parser.add_argument("--out-dir", "-o", "--out", dest="out", type=Path, metavar="DIR",
                        help="the results folder: result.json, report.md (default torchport-results/APP-TIME); "
                             "-o and --out are its old spellings, kept")
    parser.add_argument("--format", choices=("text", "json", "md", "html"), default="text",
                        help="what to print at the end: text (the summary), json (result.json), md (report.md), "
                             "html (report.html); the files are written either way")
    parser.add_argument("--script", type=Path, metavar="TRAIN.py",
                        help="evaluate an unmodified training script instead of an app; its arguments follow `--`, "
                             "with {device}, {backend} and {compile} filled per backend")
    parser.add_argument("--redirect-cuda", action="store_true",
                        help="with --script: redirect the script's CUDA calls to each backend (each redirect is logged)")
    from torchport.remote.commands import add_target_arguments

    add_target_arguments(parser)
    parser.set_defaults(func=run)


def options_from_args(args: argparse.Namespace) -> Any:
    import sys

    from torchport.errors import UserError
    from torchport.evaluate import EvaluationOptions
    from torchport.prices import Prices, load_price_file, parse_price
    from torchport.app import spec_from_args
    from torchport import stages as stage_registry
    from torchport.protocol import ProtocolConfig

    # Lowest to highest precedence: the config's prices, --prices FILE, --price.
    prices = Prices().add(getattr(args, "config_prices", []))
    if args.prices:
        prices = prices.add(load_price_file(args.prices))
    prices = prices.add(parse_price(text) for text in args.price)
    names = [name.strip() for item in args.backend for name in item.split(",") if name.strip()]
    if args.backend and not names:
        raise UserError(f"no backend named in {','.join(args.backend)!r}", location="-b/--backend")
    protocol = ProtocolConfig(
        seed=args.seed, dtype=args.dtype, steps=args.steps, blocks=args.blocks,
        max_warmup_steps=args.max_warmup, inference=not args.no_inference,
    )
    script_mode = args.script is not None
    if args.redirect_cuda and not script_mode:
        raise UserError("--redirect-cuda redirects a script's CUDA calls: it needs --script TRAIN.py")
    if not script_mode and args.passthrough:
        raise UserError(f"arguments after `--` are for --script only: {' '.join(args.passthrough)[:200]}")
    skipped = {switch for switch, off in (("trace", args.no_trace), ("checks", args.no_checks)) if off}
    stages = stage_registry.for_evaluation(script_mode, skipped | set(args.skip_stage))
    from torchport.budget import DEFAULT_BUDGET_S, DEFAULT_PRECISION, parse_duration, parse_precision

    budget_s = DEFAULT_BUDGET_S if args.budget is None else parse_duration(args.budget)
    precision = DEFAULT_PRECISION if args.precision is None else parse_precision(args.precision)
    # Parsed once here; script mode has no app unless one was given (which validation refuses).
    app = spec_from_args(args) if not script_mode or args.app or args.batch_size or args.seq_len else None
    return EvaluationOptions(
        budget_s=budget_s, budget_explicit=args.budget is not None or args.precision is not None, precision=precision,
        app=app, stages=stages, backends=names, repeats=args.repeats, protocol=protocol, timeout_s=args.timeout,
        phase_timeout_s=args.phase_timeout, prices=prices, reference=args.reference, out_dir=args.out,
        command=["torchport", *sys.argv[1:]], script=args.script, script_args=list(args.passthrough),
        redirect_cuda=args.redirect_cuda,
    )


def run(args: argparse.Namespace) -> int:
    from torchport import output
    from torchport.errors import OutputError
    from torchport.evaluate import Evaluation, EvaluationEvent
    from torchport.progress import Progress
    from torchport.report.terminal import print_summary
    from torchport.report.verdict import verdict_line

    options = options_from_args(args)
    if args.on:
        from torchport.remote.commands import on_targets

        return on_targets(args, "evaluate")
    evaluation = Evaluation(options)
    try:
        with Progress("evaluate", unit="runs") as progress:
            repeats = evaluation.options.repeats

            def on_event(event: EvaluationEvent) -> None:
                round_text = f"round {event.round + 1}/{repeats}"
                if event.kind == "plan":
                    progress.plan(len(event.backends) * event.repeats)
                    progress.note(f"writing {event.path}", style="dim")
                elif event.kind in ("start", "progress"):
                    progress.status(f"{event.backend} {round_text}: {'starting' if event.phase is None else event.phase}")
                    if event.kind == "progress":
                        progress.phase(f"{event.backend} {round_text}: {event.phase or ''}")
                elif event.kind == "eta":
                    progress.eta(event.seconds, event.per_backend, event.running)
                elif event.kind == "stage":
                    progress.status(f"stage: {event.stage}")
                    progress.phase(f"stage: {event.stage}")
                elif event.kind == "done" and event.run is not None:
                    run = event.run
                    progress.advance(f"{event.backend} {round_text}: {run.status}")
                    if run.status not in (RunStatus.OK, RunStatus.INTERRUPTED):
                        error = run.error
                        where = f" at {error.location}" if error and error.location else ""
                        what = "" if error and error.kind in (ErrorKind.BUDGET_TOO_SMALL, ErrorKind.NOT_ON_DEVICE) \
                            else f"does not run here: {error.kind if error else None}: "
                        progress.note(f"{event.backend}: {what}{error.message if error else None}{where}",
                                      style="yellow")
                    elif event.round + 1 == repeats:
                        # The backend's last run: its answer now, not only in the table at the end.
                        progress.note(verdict_line(event.backend, evaluation.backends[event.backend],
                                                   evaluation.document.reference))

            evaluation.on_event = on_event
            document = evaluation.run()
    except BaseException:
        # Interrupted or failed: report what was measured, and let the first
        # error be the one line the user sees.
        with contextlib.suppress(OutputError):
            evaluation.write_report()
        raise
    else:
        evaluation.write_report()
    finally:
        evaluation.close()
    if args.debug:
        _print_failure_details(document)
    report_path = evaluation.out_dir / "report.md"
    chosen = output.chosen_format(args)
    if chosen == "json":
        output.emit(args, evaluation.result_path.read_text(encoding="utf-8"))
    elif chosen in ("md", "html"):
        output.emit(args, report_path.with_suffix(f".{chosen}").read_text(encoding="utf-8"))
    else:
        print_summary(document)
        print(f"result: {evaluation.result_path}\nreport: {report_path}")
    return exit_status(document)


def _print_failure_details(document: ResultDocument) -> None:
    """--debug: each failed run's whole error (traceback, stderr tail), beyond the one line."""
    for name, backend in document.backends.items():
        for run in backend.runs:
            error = run.error
            if run.status == RunStatus.OK or not error:
                continue
            print(f"--- {name}, round {(run.round or 0) + 1}: {error.kind}: {error.message}", file=sys.stderr)
            for text in (error.traceback, "\n".join(run.stderr_tail or [])):
                if text:
                    print(text, file=sys.stderr)


def exit_status(document: ResultDocument) -> int:
    """0 when the reference produced a result (other backends failing is a
    result too), 1 when it did not."""
    reference = document.backends.get(document.reference or "")
    return 0 if reference and reference.summary else 1
