"""``torchport scan``, ``torchport fix`` and ``torchport rules``: the static portability checks.

The logic lives in ``torchport.scan``; this module only parses arguments.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from torchport import glossary
from torchport.errors import UserError
from torchport.options import output_file

FORMATS = ("text", "json", "sarif")


def register(subparsers) -> None:
    from torchport import output

    scan = subparsers.add_parser(
        "scan", help="find CUDA lock-in in a source tree (static; nothing is imported or run)",
        description="Report every CUDA assumption with its consequence per target and the "
                    "portable replacement. Exit status: 1 when a finding reaches --fail-on "
                    "(or a file could not be analysed), 2 on bad input, else 0.")
    scan.add_argument("paths", nargs="*", default=["."], metavar="PATH",
                      help="files or folders (default: .); explicit paths ignore 'exclude'")
    output.add_format(scan, FORMATS)
    output.add_output(scan)
    scan.add_argument("--fail-on", choices=("error", "silent", "perf", "info", "never"),
                      help="lowest severity that fails the run (order: info < perf < silent < "
                           "error; default from config, else silent)")
    shown = scan.add_mutually_exclusive_group()
    shown.add_argument("--min-severity", choices=("error", "silent", "perf", "info"),
                       help="text output: list findings at this severity or worse on some target "
                            "(default: perf, i.e. info findings are counted, not listed)")
    shown.add_argument("--show-info", action="store_true",
                       help="text output: list info findings too (same as --min-severity info)")
    scan.add_argument("--jobs", type=int, metavar="N", help="worker processes (default: CPU count)")
    _common(scan)
    scan.set_defaults(func=run_scan)

    fix = subparsers.add_parser(
        "fix", help="rewrite the mechanical CUDA lock-in (prints a diff; --write applies it)",
        description="Print a unified diff of the safe rewrites; --write applies them. Files "
                    "with uncommitted changes are refused unless --force.")
    fix.add_argument("paths", nargs="*", default=["."], metavar="PATH",
                     help="files or folders to rewrite (default: the current folder)")
    fix.add_argument("--write", action="store_true", help="apply the changes to the files")
    fix.add_argument("--force", action="store_true",
                     help="write even into files with uncommitted changes or not tracked by git")
    fix.add_argument("-o", "--output", type=output_file, metavar="FILE",
                     help="write the diff to this file instead of stdout (always a file)")
    _common(fix)
    fix.set_defaults(func=run_fix)

    rules = subparsers.add_parser("rules", help="list the scan rules, or explain one",
                                  description="List every rule, or explain one with an example.")
    rules.add_argument("rule", nargs="?", metavar="ID", help="a rule id such as TP101")
    output.add_format(rules, ("text", "json", "md"), aliases=("markdown",))
    output.add_output(rules)
    rules.set_defaults(func=run_rules)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", action="append", metavar="T[,T...]",
                        help=f"targets to judge against: {', '.join(glossary.scan_targets())}; the other "
                             "commands' names are accepted too (neuron, torchtpu, amd, ...) (default: config, else all)")
    parser.add_argument("--select", metavar="IDS", help="comma-separated rule ids or prefixes to enable")
    parser.add_argument("--ignore", metavar="IDS", help="comma-separated rule ids or prefixes to disable")
    parser.add_argument("--min-torch", metavar="X.Y",
                        help="oldest torch the code must run on (default: config, else detected "
                             "from pyproject/requirements, else 2.6)")
    parser.add_argument("--config", metavar="FILE",
                        help="pyproject.toml or torchport.toml to read (default: nearest)")
    parser.add_argument("--no-ignore", action="store_true",
                        help="also scan files that .gitignore leaves out")


def _settings(args):
    from torchport.scan.config import VERSION_PATTERN, load_config
    from torchport.scan.rules import RULES_BY_ID, TARGETS

    paths = [Path(p) for p in args.paths]
    for path in paths:
        if not path.exists() and not path.is_symlink():
            raise UserError("no such file or folder", location=str(path))
    config = load_config(paths[0], Path(args.config) if args.config else None)
    if args.target:
        targets = [glossary.canonical_target(t.strip(), "scan") for value in args.target for t in value.split(",") if t.strip()]
        for target in targets:
            if target not in TARGETS:
                raise UserError(f"unknown target '{target}' (known: {', '.join(TARGETS)})",
                                location="--target")
        config.targets = targets
    for option in ("select", "ignore"):
        value = getattr(args, option)
        if value is not None:
            codes = [c.strip() for c in value.split(",") if c.strip()]
            for code in codes:
                if code != "ALL" and not any(r.startswith(code) for r in RULES_BY_ID):
                    raise UserError(f"no rule matches '{code}' (see torchport rules)", location=f"--{option}")
            setattr(config, option, codes)
    config.use_gitignore = not args.no_ignore
    if args.min_torch and not VERSION_PATTERN.match(args.min_torch):
        raise UserError("expected a version such as 2.9", location="--min-torch")
    return paths, config


def run_scan(args) -> int:
    from torchport import output
    from torchport.scan import report, scanner
    from torchport.scan.config import fail_threshold

    paths, config = _settings(args)
    if args.jobs is not None and args.jobs < 1:
        raise UserError("must be at least 1", location="--jobs")
    result = scanner.scan(paths, config, min_torch=args.min_torch, jobs=args.jobs, debug=args.debug)
    if args.format == "text":
        text = report.render_text(result, "info" if args.show_info else args.min_severity or "perf")
    else:
        text = report.render_json(result) if args.format == "json" else report.render_sarif(result)
    try:
        output.emit(args, text)
    except UserError as exc:  # OutputError's status 1 is scan's "findings": a path that cannot be written is 2
        raise UserError(exc.message, exc.location) from None
    threshold = fail_threshold(args.fail_on or config.fail_on)
    failed = [skipped for skipped in result.skipped if skipped.internal]
    if failed:
        # The scan is incomplete: what those files hold is unknown, so a gate fails as on a finding.
        output.note(f"torchport scan: torchport's own analysis failed on {len(failed)} file(s), listed as "
                    "skipped with the failure (a bug in torchport: `--debug` shows its traceback)")
    for unfinished in result.unfinished:
        output.note(f"torchport scan: the pass over every file that looks at {unfinished.name} did not finish, so "
                    "some findings are missing or reported more severely"
                    + (" (a bug in torchport: `--debug` shows its traceback)" if unfinished.bug else
                       f" ({unfinished.reason})"))
    reached = threshold is not None and (bool(failed or result.unfinished) or report.worst_rank(result) >= threshold)
    return 1 if reached else 0


def run_fix(args) -> int:
    from torchport import output
    from torchport.scan import fixer, scanner
    from torchport.scan.rules import RULES_BY_ID, finding_worst

    paths, config = _settings(args)
    min_torch, source = scanner.resolve_min_torch(args.min_torch, config, paths[0])
    fixes = fixer.fix_paths(paths, config, min_torch, debug=args.debug)
    diff = "".join(fix.diff() for fix in fixes if fix.changed)
    if args.output is not None:
        output.write_file(args.output, diff)
    else:
        sys.stdout.write(diff)
    refused = fixer.write(fixes, args.force, fixer.project_roots(paths)) if args.write else []
    changed = [f for f in fixes if f.changed and f not in refused]
    applied = sum(len(f.applied) for f in changed)
    verb = "applied" if args.write else "proposed (rerun with --write to apply)"
    err = sys.stderr
    output.note(f"torchport fix: {applied} fix(es) {verb} in {len(changed)} file(s) "
                f"(torch>={min_torch}, from {source})")
    for fix in fixes:
        if fix.skipped:
            output.note(f"{fix.display}: skipped: {fix.skipped}")
    remaining = [finding for fix in fixes for finding in fix.remaining]
    # As in scan's text output: info findings change nothing on any target; counted, not listed.
    listed = [f for f in remaining if finding_worst(f, config.targets) not in (None, "info")]
    if len(listed) < len(remaining):
        print(f"{len(remaining) - len(listed)} info finding(s) left as they are "
              "(`torchport scan --show-info` lists them)", file=err)
    if listed:
        print(f"{len(listed)} finding(s) need a manual change:", file=err)
        for finding in listed:
            rule = RULES_BY_ID[finding.rule_id]
            note = f" ({finding.fix_note})" if finding.fix_note else ""
            print(f"  {finding.path}:{finding.line}:{finding.column}: {rule.id} {rule.title}: "
                  f"{finding.detail}{note}", file=err)
    return 1 if refused or any(fix.internal for fix in fixes) else 0


def run_rules(args) -> int:
    from torchport import output
    from torchport.scan import catalogue

    chosen = output.chosen_format(args)
    if args.rule:
        rule = catalogue.find(args.rule)
        text = (json.dumps(catalogue.rule_dict(rule), indent=2) + "\n" if chosen == "json"
                else catalogue.explain(rule))
    elif chosen == "json":
        text = json.dumps([catalogue.rule_dict(r) for r in catalogue.RULES], indent=2) + "\n"
    elif chosen == "md":
        text = catalogue.markdown_table()
    else:
        text = catalogue.listing()
    output.emit(args, text)
    return 0
