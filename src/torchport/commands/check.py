"""torchport check [APP]"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from torchport.options import output_file


def register(subparsers: argparse._SubParsersAction) -> None:
    from torchport import options as types
    from torchport import output
    from torchport.check import CHECK_NAMES
    from torchport.check.runner import DTYPES, CheckOptions

    defaults = CheckOptions()
    parser = subparsers.add_parser(
        "check",
        help="check numerical parity, checkpoint portability, crash recovery, distributed training and the "
             "input pipeline on every available backend",
        description="Run the app on each backend in fresh worker processes and check that it learns the same "
                    "thing (against a float64 CPU run), that checkpoints move between backends, that training "
                    "survives a SIGKILL, that torchrun/DDP matches one process, and that the data keeps up. "
                    "Exit status: 0 all passed (or borderline: shown as such, never as a pass), 1 a check failed or "
                    "could not run, 2 bad input.",
    )
    parser.add_argument("app", nargs="?", help="app.py, app.py:function, package.module:function, builtin:NAME "
                        "or hf:MODEL_TYPE[?key=value&...] (default: builtin:classifier)")
    from torchport.hf import add_batch_arguments

    add_batch_arguments(parser)
    parser.add_argument("-b", "--backend", action="append", default=[], metavar="NAME",
                        help="backend to check (repeatable or comma-separated; default: all known)")
    parser.add_argument("--only", default=",".join(CHECK_NAMES), metavar="CHECKS",
                        help=f"comma-separated subset of {','.join(CHECK_NAMES)} (default: all)")
    parser.add_argument("--steps", type=types.count(2), default=defaults.steps,
                        help=f"training steps K for parity and checkpoints (default {defaults.steps})")
    parser.add_argument("--dtype", choices=DTYPES, default=defaults.dtype,
                        help="dtype of the model's parameters and inputs, the same on every backend (default: %(default)s)")
    parser.add_argument("--seed", type=types.seed, default=defaults.seed,
                        help="seed of torch's, numpy's and Python's random generators in every worker (default: %(default)s)")
    parser.add_argument("--recovery-steps", type=int, default=defaults.recovery_steps,
                        help=f"steps of the recovery run (default {defaults.recovery_steps})")
    parser.add_argument("--checkpoint-every", type=int, default=defaults.recovery_every,
                        help=f"checkpoint interval of the recovery run (default {defaults.recovery_every})")
    parser.add_argument("--kill-seed", type=types.seed, default=None, help="seed of the random kill step (default: fresh)")
    parser.add_argument("--nproc", type=int, default=defaults.nproc, help="torchrun processes per node (default 2)")
    parser.add_argument("--nnodes", type=int, default=1, help="torchrun nodes; >1 needs --rdzv-endpoint on every node")
    parser.add_argument("--rdzv-endpoint", default=None, metavar="HOST:PORT", help="torchrun c10d rendezvous endpoint")
    parser.add_argument("--rdzv-conf", default=None, metavar="K=V,...",
                        help="torchrun --rdzv-conf (default join_timeout=60 when multi-node)")
    parser.add_argument("--distributed-steps", type=types.count(1), default=defaults.distributed_steps,
                        help=f"steps of the distributed check (default {defaults.distributed_steps})")
    parser.add_argument("--timeout", type=types.positive_seconds, default=defaults.timeout_s,
                        help=f"seconds before a worker (or torchrun) is killed (default {defaults.timeout_s:g})")
    parser.add_argument("--budget", default=None, metavar="DURATION",
                        help="time for the whole check, e.g. 10m: workers end at the budget's end, recovery and "
                             "distributed are sized to the time left from the measured step times, or skipped "
                             "with what they needed (default: none)")
    output.add_format(parser, ("text", "json", "md"))
    output.add_output(parser)
    parser.add_argument("--json", type=output_file, metavar="FILE",
                        help="also write the checks as JSON to FILE (old spelling; prefer --format json -o FILE)")
    parser.add_argument("--work-dir", type=Path, metavar="DIR",
                        help="keep checkpoints and tensors here (default: a temporary folder, removed)")
    from torchport.remote.commands import add_target_arguments

    add_target_arguments(parser, out_dir=True)
    parser.set_defaults(func=run)


def options_from_args(args: argparse.Namespace):
    from torchport.check.runner import CheckOptions
    from torchport.app import spec_from_args

    names = [name.strip() for item in args.backend for name in item.split(",") if name.strip()]
    only = tuple(name.strip() for name in args.only.split(",") if name.strip())
    from torchport.budget import parse_duration

    budget_s = parse_duration(args.budget) if args.budget is not None else None
    return CheckOptions(
        app=spec_from_args(args), backends=names, only=only, steps=args.steps, dtype=args.dtype, seed=args.seed,
        timeout_s=args.timeout, work_dir=args.work_dir, recovery_steps=args.recovery_steps,
        recovery_every=args.checkpoint_every, kill_seed=args.kill_seed, nproc=args.nproc, nnodes=args.nnodes,
        rdzv_endpoint=args.rdzv_endpoint, rdzv_conf=args.rdzv_conf, distributed_steps=args.distributed_steps,
        budget_s=budget_s,
    )


def terminal_table(section: dict) -> Any:
    """The checks as a rich table, one row per check, for the terminal."""
    from rich.markup import escape
    from rich.table import Table

    from torchport.check.report import STATUS_TEXT, budget_line, headline, subject
    from torchport.records import ChecksSection, CheckStatus

    checks = ChecksSection.from_dict(section)
    table = Table(title=escape(f"torchport check {checks.config.app}"), title_justify="left")
    for header in ("check", "backend / pair", "status", "figures", "reason"):
        table.add_column(header, overflow="fold")
    colours: dict[str, str] = {CheckStatus.PASS: "green", CheckStatus.BORDERLINE: "yellow", CheckStatus.FAIL: "red",
               CheckStatus.ERROR: "red", CheckStatus.SKIPPED: "dim", CheckStatus.NOT_APPLICABLE: "dim"}
    for check in checks.checks:
        status = str(STATUS_TEXT.get(check.status, check.status)).strip("*")
        # Reasons quote the app's errors: data, never rich markup.
        table.add_row(escape(check.name), escape(subject(check)),
                      f"[{colours.get(check.status, '')}]{escape(status)}[/]",
                      escape(headline(check)), escape(check.reason))
    if checks.config.budget:
        table.caption = escape(budget_line(checks.config.budget))
        table.caption_justify = "left"
    return table


def run(args: argparse.Namespace) -> int:
    from torchport import output
    from torchport.check.report import markdown
    from torchport.check.runner import CheckEvent, check_section, exit_status, validate
    from torchport.errors import UserError
    from torchport.launch import cancelled
    from torchport.progress import Progress
    from torchport.results import strict_json, write_text_atomic

    options = options_from_args(args)
    validate(options)
    if args.on:
        from torchport.remote.commands import on_targets

        return on_targets(args, "check")

    with Progress("check", unit="") as progress:
        def on_event(event: CheckEvent) -> None:
            if event.kind == "start":
                what = f"{event.check}: {event.backend}"
                progress.status(what)
                progress.note(f"{what} ...", style="dim")
            elif event.kind == "progress":
                progress.phase(f"{event.backend}: {event.phase}")

        checks = check_section(options, on_event=on_event)
    section = checks.to_dict()  # what --json and --format json write
    if cancelled():
        raise KeyboardInterrupt
    if args.json:
        write_text_atomic(args.json, json.dumps(strict_json(section), indent=1, default=str) + "\n")
    chosen = output.chosen_format(args)
    if chosen == "json":
        output.emit(args, json.dumps(strict_json(section), indent=1, default=str))
    elif chosen == "md":
        output.emit(args, markdown(checks))
    else:
        # At a narrow width the figures go first: the status and its reason are the answer.
        output.print_or_emit(args, output.fit_table(terminal_table(section), output.text_width(),
                                                    shown_from={"figures": 100}))
    if args.json:
        print(f"checks: {args.json}")
    if checks.app_error:
        raise UserError(checks.app_error.message or "", location=checks.app_error.location)
    return exit_status(checks)
