"""torchport compare RESULT.json [RESULT.json ...]"""
from __future__ import annotations

import argparse
from pathlib import Path

from torchport.options import output_file


def register(subparsers: argparse._SubParsersAction) -> None:
    from torchport import output

    parser = subparsers.add_parser(
        "compare",
        help="compare results from several machines (ratios, cost, environment differences)",
        description="Put results from several machines side by side: each file (or each result.json in a folder) "
        "is one machine. Entries are matched with the reference by app and effective-configuration hash; "
        "anything not comparable is listed with the reason and left out of the ratios.",
    )
    parser.add_argument("results", nargs="+", type=Path, metavar="RESULT", help="result.json files or folders holding them")
    parser.add_argument("--reference", metavar="MACHINE:BACKEND",
                        help="what the others are compared with (default: the first file's reference backend)")
    parser.add_argument("--price", action="append", default=[], metavar="MACHINE:BACKEND=USD_PER_HOUR",
                        help="price of one machine's backend (repeatable; overrides the price in its result file)")
    parser.add_argument("--label", action="append", default=[], metavar="FILE=NAME",
                        help="name the machine of a result file (default: its host name and accelerators)")
    parser.add_argument("--fail-on-regression", type=float, metavar="PCT",
                        help="exit 1 when an entry is slower than the reference by more than PCT percent, significantly")
    output.add_format(parser, ("text", "json", "md", "html"))
    output.add_output(parser)
    parser.add_argument("--markdown", type=output_file, metavar="FILE",
                        help="also write the comparison as markdown (old spelling; prefer --format md -o FILE)")
    parser.add_argument("--html", type=output_file, metavar="FILE",
                        help="also write a self-contained HTML report with charts (old spelling; prefer --format html -o FILE)")
    parser.add_argument("--json", type=output_file, metavar="FILE",
                        help="also write the comparison document as JSON (old spelling; prefer --format json -o FILE)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import json
    import sys

    from torchport import output
    from torchport.compare import compare_results, regressions
    from torchport.errors import UserError
    from torchport.failures import visible
    from torchport.report import compare_text
    from torchport.report.html import render_comparison

    if args.fail_on_regression is not None and not 0 <= args.fail_on_regression < float("inf"):
        raise UserError(f"--fail-on-regression must be a finite percentage of at least 0, got {args.fail_on_regression}")
    comparison = compare_results(args.results, labels=args.label, reference=args.reference, prices=args.price)
    if args.fail_on_regression is not None:
        found, not_gated = regressions(comparison, args.fail_on_regression)
        comparison.put(regressions=found, regressions_not_gated=not_gated, fail_on_regression_pct=args.fail_on_regression)
    renderings = {"md": lambda: compare_text.markdown(comparison),
                  "html": lambda: render_comparison(comparison),
                  "json": lambda: json.dumps(comparison.to_dict(), indent=1) + "\n"}
    chosen = output.chosen_format(args)
    if chosen == "text" and args.output is None:
        compare_text.print_comparison(comparison)
    elif chosen == "text":
        import contextlib
        import io

        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):  # the table as plain text, 160 columns
            compare_text.print_comparison(comparison)
        output.emit(args, buffer.getvalue())
    else:
        output.emit(args, renderings[chosen]())
    # With a document (json, md, html) on stdout, the lines below go to stderr, so the document stays whole.
    stream = sys.stdout if chosen == "text" or args.output is not None else sys.stderr
    outputs = [(args.markdown, renderings["md"]), (args.html, renderings["html"]), (args.json, renderings["json"])]
    for path, render in outputs:
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(render(), encoding="utf-8")
            print(f"wrote {path}", file=stream)
    regressed = comparison.regressions or []
    for item in regressed:
        low, high = item.ci95
        print(f"regression: {item.machine}:{item.backend} is {item.slower_by:.1%} slower than the reference "
              f"(speed ratio 95% CI [{low:.3f}, {high:.3f}]; threshold {args.fail_on_regression:g}%)", file=stream)
    for item in comparison.regressions_not_gated or []:
        print(f"not gated: {visible(item.machine)}:{visible(item.backend)} looks {item.slower_by:.1%} "
              f"slower, but {item.why}", file=stream)
    return 1 if regressed else 0
