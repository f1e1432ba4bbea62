"""The command-line side of ``--on`` (evaluate, trace, check): its options and where the commands hand over."""
from __future__ import annotations

import argparse
from pathlib import Path


def add_target_arguments(parser: argparse.ArgumentParser, out_dir: bool = False) -> None:
    group = parser.add_argument_group("targets (other machines)")
    if out_dir:  # evaluate has its own
        group.add_argument("--out-dir", dest="out", type=Path, metavar="DIR",
                           help="with --on: the folder of the targets' results (default torchport-results/APP-TIME)")
    group.add_argument("--on", action="append", default=[], metavar="TARGET",
                       help="run the same command on TARGET (repeatable): local (this machine), "
                            "ssh://[user@]host[:port], an ssh config alias or sky:ACCELERATOR[:COUNT] (a cluster SkyPilot launches: "
                            "torchport[sky]); results in OUT_DIR/TARGET/ (evaluate: "
                            "compared, the first target being the reference machine)")
    group.add_argument("--ssh-config", type=Path, metavar="FILE", help="ssh config file for the targets (ssh -F FILE; "
                       "default: your own ~/.ssh/config)")
    group.add_argument("--remote-python", default="python3", metavar="PATH",
                       help="the remote's Python with torch installed (default python3)")
    group.add_argument("--workdir", type=Path, metavar="DIR",
                       help="the folder shipped to the targets (default: the app's or script's folder; .gitignore respected)")
    group.add_argument("--max-upload", type=float, metavar="MB", help="cap on the folder shipped (default 200 MB)")
    group.add_argument("--keep-remote", action="store_true", help="leave each remote run's folder in place")
    group.add_argument("--yes", action="store_true", help="sky: targets: launch the clusters SkyPilot proposes without asking "
                       "(they cost money; the resources and hourly price are shown first)")
    group.add_argument("--keep", action="store_true", help="sky: targets: leave the cluster up afterwards (autostop still "
                       "tears it down once idle)")
    group.add_argument("--autostop", type=int, default=30, metavar="MINUTES",
                       help="sky: targets: SkyPilot tears the cluster down after this many idle minutes (default 30)")


def on_targets(args: argparse.Namespace, command: str) -> int:
    from torchport.errors import UserError
    from torchport.remote.runner import plan_from_args, run_plan

    if getattr(args, "format", "text") != "text":
        raise UserError(f"--format {args.format} does not go with --on: the combined files are written to OUT_DIR")
    if not args.autostop > 0:
        raise UserError(f"--autostop must be a positive number of minutes, got {args.autostop}")
    if args.max_upload is not None and not args.max_upload > 0:
        raise UserError(f"--max-upload must be a positive number of MB, got {args.max_upload:g}")
    return run_plan(plan_from_args(args, command))
