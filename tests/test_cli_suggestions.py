"""Help where people look: a misspelt command or option gets the nearest real
one in its one error line, and every option has help text."""
from __future__ import annotations

import argparse

import pytest

from conftest import run_torchport
from torchport.cli import build_parser


@pytest.mark.parametrize("argv, suggestion", [
    (["evalute"], "(did you mean 'evaluate'?)"),
    (["scna", "."], "(did you mean 'scan'?)"),
    (["evaluate", "--repats", "3"], "(did you mean --repeats?)"),
    (["scan", ".", "--min-severty", "error"], "(did you mean --min-severity?)"),
])
def test_a_misspelling_names_the_nearest_command_or_option(argv, suggestion):
    completed = run_torchport(*argv)
    assert completed.returncode == 2
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("torchport: error: ") and lines[0].endswith(suggestion), lines
    assert "torchport: error: torchport:" not in lines[0]
    assert completed.stdout == ""


def test_another_commands_option_is_named_as_such_not_suggested_as_itself():
    completed = run_torchport("fix", ".", "--format", "json")
    assert completed.returncode == 2
    assert completed.stderr.strip().endswith("(--format is not an option of this command: see its --help)")
    assert "did you mean" not in completed.stderr


def test_nothing_close_suggests_nothing():
    completed = run_torchport("zzzzzz")
    assert completed.returncode == 2 and "did you mean" not in completed.stderr


def test_every_option_and_argument_has_help():
    missing = []

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    walk(sub, f"{name} {sub_name}")
            elif action.help is None and action.dest != "help":
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")

    walk(build_parser(), "torchport")
    assert missing == []
