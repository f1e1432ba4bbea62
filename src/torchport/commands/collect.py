"""torchport collect OUT_DIR"""
from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "collect",
        help="reattach to the remote runs of an `evaluate --on` whose connection dropped, or fetch what they finished",
        description="Read OUT_DIR/targets.json; for each remote run left going when the connection dropped, follow it "
        "to its end (or fetch it if it ended), bring its result home and rewrite the combined report.",
    )
    parser.add_argument("out_dir", type=Path, metavar="OUT_DIR", help="the folder of an `evaluate --on` run")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from torchport.remote.runner import collect

    return collect(args.out_dir)
