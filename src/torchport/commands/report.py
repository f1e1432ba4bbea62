"""torchport report RESULT.json"""
from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("report", help="re-render report.md and the summary from a result.json")
    parser.add_argument("result", type=Path, help="a result.json written by torchport evaluate")
    parser.add_argument("-o", "--out", type=Path, help="where to write the markdown (default: beside the result)")
    parser.add_argument("--html", nargs="?", type=Path, const=True, default=None, metavar="FILE",
                        help="also write the HTML report with charts (default: report.html beside the result)")
    parser.add_argument("--validate", action="store_true", help="also check the document against its JSON Schema")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from torchport import results, summary
    from torchport.errors import UserError
    from torchport.report.markdown import render
    from torchport.report.terminal import print_summary

    document = summary.refresh(results.read(args.result))
    if args.validate:
        import jsonschema

        try:
            results.validate(document)
        except jsonschema.ValidationError as exc:
            path = "/".join(str(p) for p in exc.absolute_path)
            raise UserError(f"does not match the result schema at {path or '(root)'}: {exc.message}",
                            location=str(args.result)) from None
    out = args.out or args.result.with_name("report.md")
    out.write_text(render(document), encoding="utf-8")
    print_summary(document)
    print(f"report: {out}")
    if args.html is not None:
        from torchport.report.html import render as render_html

        html_out = args.result.with_name("report.html") if args.html is True else args.html
        html_out.write_text(render_html(document), encoding="utf-8")
        print(f"html: {html_out}")
    return 0
