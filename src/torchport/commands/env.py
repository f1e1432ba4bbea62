"""torchport env create|list|remove NAME"""
from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchport.records import EnvState


def register(subparsers: argparse._SubParsersAction) -> None:
    from torchport import output

    parser = subparsers.add_parser(
        "env",
        help="create, list or remove the isolated environments some backends run in (e.g. xla)",
        description="Some backends need another torch than torchport's own (torch_xla 2.9.0 pins torch 2.9.0). "
        "torchport keeps an environment per such backend under $TORCHPORT_CACHE (default ~/.cache/torchport).",
    )
    actions = parser.add_subparsers(dest="env_action", metavar="ACTION", required=True)
    create = actions.add_parser("create", help="create an environment (pip install, several GB), or reuse it")
    create.add_argument("name", help="environment name (see `torchport env list`)")
    create.add_argument("--force", action="store_true", help="rebuild it even if it already exists")
    create.set_defaults(func=run_create)
    listing = actions.add_parser("list", help="list the known environments and their state")
    output.add_format(listing, ("text", "json"))
    output.add_json_flag(listing)
    output.add_output(listing)
    listing.set_defaults(func=run_list)
    remove = actions.add_parser("remove", help="delete an environment")
    remove.add_argument("name", help="environment name (see `torchport env list`)")
    remove.set_defaults(func=run_remove)


def run_create(args: argparse.Namespace) -> int:
    from torchport import envs
    from torchport.output import note as progress  # pip's lines: progress, hidden by -q

    manifest = envs.create(args.name, progress, force=args.force)
    print(f"{args.name}: {envs.env_dir(args.name)} ({envs.versions_text(manifest)})")
    return 0


def run_list(args: argparse.Namespace) -> int:
    from torchport import envs, output

    records = [envs.state(name) for name in envs.SPECS]
    if output.chosen_format(args) == "json":
        output.emit(args, json.dumps([record.to_dict() for record in records], indent=1))
    else:
        output.emit(args, "\n".join(status_lines(records)))
    return 0


def status_lines(records: list[EnvState]) -> list[str]:
    """Each environment's state, two lines each (also used by torchport info)."""
    from torchport import envs

    lines = []
    for record in records:
        if record.ready:
            state = f"ready ({envs.versions_text(record.manifest)})"
        else:
            state = f"not usable: {record.problem}; run: {envs.create_command(record.name)}"
        lines.append(f"{record.name}: {state}\n    {record.path}")
    return lines


def run_remove(args: argparse.Namespace) -> int:
    from torchport import envs

    if envs.remove(args.name):
        print(f"{args.name}: removed {envs.env_dir(args.name)}")
    else:
        print(f"{args.name}: nothing to remove at {envs.env_dir(args.name)}")
    return 0
