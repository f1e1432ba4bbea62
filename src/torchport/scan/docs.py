"""The rule sections of docs/scan.md, generated from the rule table (``scan/rules.py``).

    python -m torchport.scan.docs            # rewrite the generated sections of docs/scan.md
    python -m torchport.scan.docs --check    # exit 1 when they are out of date

Each generated section sits between a BEGIN and an END marker comment; the prose
around them is written by hand and left alone.  tests/test_scan_detectors.py fails
when the committed file differs from what this module generates, so a rule added
to the table cannot be missing from the documentation.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from torchport.scan.sources import urls as source_urls
from torchport.scan.catalogue import markdown_table
from torchport.scan.rules import RULES, SEVERITY_RANK, TARGETS, Rule

DEFAULT_PATH = Path("docs") / "scan.md"
_COMMAND = "python -m torchport.scan.docs"


def _begin(section: str) -> str:
    return f"<!-- BEGIN GENERATED {section}: edit scan/rules.py, then run `{_COMMAND}` -->"


def _end(section: str) -> str:
    return f"<!-- END GENERATED {section} -->"


def _inline(text: str) -> str:
    """One line of markdown: no line breaks, no table-cell separators."""
    return " ".join(text.split()).replace("|", "/")


def rule_reference(rule: Rule) -> str:
    worst_first = sorted(TARGETS, key=lambda t: -SEVERITY_RANK.get(rule.severity[t] or "", 0))
    severity = ", ".join(f"{t} {rule.severity[t] or 'fine'}" for t in worst_first)
    lines = [f"#### {rule.id} `{rule.name}`: {rule.title}", "",
             f"* **Detects:** {_inline(rule.detects)}",
             f"* **Why:** {_inline(rule.why)}",
             f"* **Per target:** {severity}",
             f"* **Instead:** {_inline(rule.replacement)}",
             f"* **Needs:** {'torch>=' + rule.min_torch if rule.min_torch else 'any torch'}; "
             f"**auto-fix:** {'yes (`torchport fix`)' if rule.fixable else 'no'}; "
             f"**manual effort:** {rule.effort}"
             + (f"; **sources:** {', '.join(f'<{url}>' for url in source_urls(rule.sources))}"
                if source_urls(rule.sources) else ""),
             "", "Before:", "", "```python", rule.before.rstrip("\n"), "```", "",
             "After:", "", "```python", rule.after.rstrip("\n"), "```"]
    return "\n".join(lines) + "\n"


SECTIONS = {
    "rules table": markdown_table,
    "rule reference": lambda: "\n".join(rule_reference(rule) for rule in RULES),
}


def render(document: str, where: str = str(DEFAULT_PATH)) -> str:
    """``document`` with every generated section replaced by its current text."""
    for section, generate in SECTIONS.items():
        begin, end = _begin(section), _end(section)
        start, stop = document.find(begin), document.find(end)
        if start == -1 or stop < start:
            raise ValueError(f"{where}: no '{begin}' ... '{end}' markers for the {section}")
        document = document[:start + len(begin)] + "\n\n" + generate() + "\n" + document[stop:]
    return document


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=_COMMAND, description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH, help=f"default: {DEFAULT_PATH}")
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is out of date; write nothing")
    args = parser.parse_args(argv)
    try:
        current = args.path.read_text(encoding="utf-8")
        generated = render(current, str(args.path))
    except (OSError, ValueError) as exc:
        print(f"{_COMMAND}: error: {exc}", file=sys.stderr)
        return 2
    if generated == current:
        return 0
    if args.check:
        print(f"{args.path}: the generated rule sections are out of date; run `{_COMMAND}`", file=sys.stderr)
        return 1
    args.path.write_text(generated, encoding="utf-8")
    print(f"{args.path}: rule sections regenerated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
