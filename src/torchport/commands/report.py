"""torchport report RESULT.json"""
from __future__ import annotations

import argparse
from pathlib import Path

from torchport.options import output_file


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("report", help="re-render report.md and the summary from a result.json")
    parser.add_argument("result", type=Path, help="a result.json written by torchport evaluate")
    parser.add_argument("-o", "--out", type=output_file, help="where to write the markdown (default: beside the result)")
    parser.add_argument("--html", nargs="?", type=output_file, const=True, default=None, metavar="FILE",
                        help="also write the HTML report with charts (default: report.html beside the result)")
    parser.add_argument("--validate", action="store_true", help="also check the document against its JSON Schema")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from torchport import results, summary
    from torchport.errors import UserError
    from torchport.report.markdown import render
    from torchport.report.terminal import print_summary

    document = results.read(args.result)  # validated against the schema (--validate is kept for scripts)
    try:
        document = summary.refresh(document)
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
