"""torchport schema"""
from __future__ import annotations

import argparse
import json


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("schema", help="print the JSON Schema of the result document")
    from torchport import output

    output.add_output(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from torchport import output
    from torchport.document import load_schema

    output.emit(args, json.dumps(load_schema(), indent=1))
    return 0
