"""torchport trace APP"""
from __future__ import annotations

import argparse
import json

from torchport.options import output_file


def register(subparsers: argparse._SubParsersAction) -> None:
    from torchport import options as types
    from torchport import output
    from torchport.limits import TRACE_TIMEOUT_S
    from torchport.trace.job import DEFAULT_STEPS
    from torchport.trace.support import TARGETS

    parser = subparsers.add_parser(
        "trace",
        help="trace one training step op by op and say what it means on each target",
        description="Run K training steps of the app on the CPU under an op tracer; report, per target "
        "accelerator, a verdict and the findings (host syncs, data-dependent shapes, shape changes, float64, "
        "tile waste, sparse tensors, custom ops, unsupported ops) at the lines of your code that cause them.",
    )
    parser.add_argument("app", nargs="?", help="app.py, app.py:function, package.module:function, builtin:NAME "
                        "or hf:MODEL_TYPE[?key=value&...] (default: builtin:classifier)")
    from torchport.hf import add_batch_arguments

    add_batch_arguments(parser)
    parser.add_argument("--steps", type=types.count(1), default=DEFAULT_STEPS, help=f"training steps to trace (default {DEFAULT_STEPS})")
    parser.add_argument("--target", action="append", default=[], metavar="T",
                        help=f"target to judge (repeatable or comma-separated; default all: {', '.join(TARGETS)}; "
                             "the other commands' names are accepted too: trainium, torchtpu, amd, ...)")
    output.add_format(parser, ("text", "json", "md"))
    output.add_output(parser)
    parser.add_argument("--json", type=output_file, metavar="FILE",
                        help="also write the trace section as JSON to FILE (old spelling; prefer --format json -o FILE)")
    parser.add_argument("--timeout", type=types.positive_seconds, default=TRACE_TIMEOUT_S,
                        help=f"seconds before tracing is stopped, keeping what was traced (default {TRACE_TIMEOUT_S:g})")
    parser.add_argument("--top", type=types.count(0), default=10, help="findings to print (default 10)")
    parser.add_argument("--no-live", action="store_true",
                        help="use only the shipped op-support tables, even where a backend is installed")
    from torchport.remote.commands import add_target_arguments

    add_target_arguments(parser, out_dir=True)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import sys

    from torchport import output
    from torchport.launch import cancelled
    from torchport.progress import Progress
    from torchport.results import strict_json, write_text_atomic
    from torchport.trace.analysis import raise_if_app_failed, trace_app
    from torchport.app import spec_from_args
    from torchport.trace.report import markdown, terminal_lines
    from torchport.records import TraceStatus

    if args.on:
        from torchport.remote.commands import on_targets

        return on_targets(args, "trace")
    from torchport.glossary import canonical_target

    targets = [canonical_target(t.strip(), "trace") for item in args.target for t in item.split(",") if t.strip()]

    def on_progress(event: dict) -> None:
        progress.status(f"tracing: {event.get('phase', '')}")
        progress.phase(f"trace: {event.get('phase', '')}")

    with Progress("trace", unit="") as progress:
        progress.status("tracing")
        section = trace_app(spec_from_args(args), steps=args.steps, targets=targets or None, timeout=args.timeout,
                            allow_live=not args.no_live, on_progress=on_progress)
    if cancelled():
        raise KeyboardInterrupt
    written = section.to_dict()  # the section's JSON, as the result document holds it
    if args.json:
        write_text_atomic(args.json, json.dumps(strict_json(written), indent=1, default=str) + "\n")
    chosen = output.chosen_format(args)
    if chosen == "json":
        text = json.dumps(strict_json(written), indent=1, default=str)
    elif chosen == "md":
        text = markdown(section)
    else:
        text = "\n".join(terminal_lines(section, top=args.top))
    if args.output is not None:  # a file keeps what was traced, even when the app failed
        output.emit(args, text)
    raise_if_app_failed(section)
    if args.output is None:
        output.emit(args, text)
    if args.json:
        print(f"trace: {args.json}")
    if section.status != TraceStatus.COMPLETE:
        print(f"torchport: trace incomplete: {section.reason}", file=sys.stderr)
        return 1
    return 0
