"""torchport report [RESULT.json | FOLDER]"""
from __future__ import annotations

import argparse
from pathlib import Path

from torchport.options import output_file


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("report", help="re-render report.md and the summary from a result.json")
    parser.add_argument("result", type=Path, nargs="?",
                        help="a result.json written by torchport evaluate, or its folder (default: the newest "
                             "result under ./torchport-results/)")
    parser.add_argument("-o", "--out", type=output_file, help="where to write the markdown (default: beside the result)")
    parser.add_argument("--html", nargs="?", type=output_file, const=True, default=None, metavar="FILE",
                        help="also write the HTML report with charts (default: report.html beside the result)")
    parser.add_argument("--validate", action="store_true", help="also check the document against its JSON Schema")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from torchport import results, summary
    from torchport.document import read_document, result_record
    from torchport.errors import UserError
    from torchport.report.markdown import render
    from torchport.report.terminal import print_summary

    args.result = _result_path(args.result)
    raw = read_document(args.result)  # validated against the schema (--validate is kept for scripts)
    try:
        document = summary.refresh(result_record(raw))
        text = render(document)
    except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError, OverflowError) as exc:
        if args.debug:
            raise
        # Valid against the schema, but its parts do not fit together (a hand-edited file, say).
        raise UserError(f"the result document is inconsistent: {type(exc).__name__}: {str(exc)[:200]}",
                        location=str(args.result)) from None
    out = args.out or args.result.with_name("report.md")
    results.write_text_atomic(out, text)
    print_summary(document)
    print(f"report: {out}")
    if args.html is not None:
        from torchport.report.html import render as render_html

        html_out = args.result.with_name("report.html") if args.html is True else args.html
        results.write_text_atomic(html_out, render_html(document))
        print(f"html: {html_out}")
    return 0


def _result_path(given: Path | None) -> Path:
    """The result.json to render: the one given, the one in the folder given, or the newest
    evaluate wrote under its default folder (said on stderr, so that nobody renders an old one
    unknowingly)."""
    import sys

    from torchport.errors import UserError
    from torchport.evaluate import RESULTS_ROOT

    if given is not None:
        return given / "result.json" if given.is_dir() else given
    found = sorted(RESULTS_ROOT.glob("*/result.json"), key=lambda path: path.stat().st_mtime)
    if not found:
        raise UserError(f"no result given and none under ./{RESULTS_ROOT}/: name a result.json or its folder "
                        "(evaluate -o DIR writes DIR/result.json)")
    print(f"report: the newest result, {found[-1]}", file=sys.stderr)
    return found[-1]
