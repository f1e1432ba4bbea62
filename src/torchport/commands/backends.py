"""torchport backends"""
from __future__ import annotations

import argparse
import json
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("backends", help="list every known backend, whether it is available here, and why")
    from torchport import output

    output.add_format(parser, ("text", "json"))
    output.add_json_flag(parser)
    output.add_output(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.markup import escape
    from rich.table import Table

    from torchport import backends, output

    rows = []
    for name, cls in backends.registry().items():
        available = backends.availability(name)
        rows.append({**cls.describe().to_dict(), "trace_target": cls.trace_target(), "scan_target": cls.scan_target(),
                     **available.as_dict()})
    problems = backends.plugin_problems()
    if output.chosen_format(args) == "json":
        # The rows stay a list of backends; a broken plugin is said on stderr (and in every result's environment).
        for problem in problems:
            print(f"torchport backends: backend plugin {problem.source}: {problem.problem}", file=sys.stderr)
        output.emit(args, json.dumps(rows, indent=1))
        return 0
    table = Table(title="torchport backends", title_justify="left")  # cells are data, escaped: never rich markup
    for header in ("backend", "available", "reason / device", "kind", "verified"):
        table.add_column(header, overflow="fold")
    for row in rows:
        kind = f"proxy for {row['proxy_for']}" if row["proxy_for"] else row["title"]
        if row["environment"]:
            kind += f" (environment: {row['environment']})"
        table.add_row(*(escape(str(cell)) for cell in (row["name"], "yes" if row["available"] else "no", row["reason"],
                                                      kind, row["verification"])))
    if problems:
        table.caption = "backend plugins that could not be used: " + "; ".join(
            escape(f"{problem.source}: {problem.problem}") for problem in problems)
        table.caption_justify = "left"
    # Narrow: the verification note and the kind go first; the name, whether it runs and why stay.
    output.print_or_emit(args, output.fit_table(table, output.text_width(), shown_from={"verified": 120, "kind": 100}))
    return 0
