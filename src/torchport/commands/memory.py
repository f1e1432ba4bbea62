"""torchport memory SPEC"""
from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

from torchport.options import output_file


def register(subparsers: argparse._SubParsersAction) -> None:
    from torchport import output
    from torchport.hf import add_batch_arguments
    from torchport.trace.symbolic import DTYPES, MARGIN, OPTIMIZERS, RSS_TOLERANCE, TENSOR_TOLERANCE

    parser = subparsers.add_parser(
        "memory",
        help="memory fit of an app or an hf: model at full size, without allocating it",
        description="Build the model and run one forward + backward pass under torch's FakeTensorMode (nothing "
        "is allocated), count parameters, gradients, optimizer state and activations (an hf: model at the given "
        "batch and sequence length, an app at its first batch), add a "
        f"{MARGIN:.0%} margin, and say per catalogued chip whether it fits on one, or how "
        "many it needs under plain data parallelism and fully sharded. Estimates, labelled as such.",
    )
    parser.add_argument("app", metavar="SPEC", help="builtin:NAME, path/to/app.py[:function], module:function, or "
                        "hf:MODEL_TYPE[?key=value&...], e.g. 'hf:llama?batch_size=1&seq_len=2048'")
    add_batch_arguments(parser)
    parser.add_argument("--dtype", action="append", default=[], choices=DTYPES,
                        help=f"parameter and activation dtype (repeatable; default: {', '.join(DTYPES)} for hf:, "
                        "float32 for an app)")
    parser.add_argument("--optimizer", action="append", default=[], choices=list(OPTIMIZERS),
                        help=f"optimizer (repeatable; default: {', '.join(OPTIMIZERS)} for hf:, the app's own for "
                        "an app)")
    # argparse %-formats help strings: a literal percent sign is written %%.
    parser.add_argument("--measure", action="store_true",
                        help="hf: specs only: also run the spec for real on this CPU (float32, AdamW, 2 steps, fresh "
                        f"process) and compare its peak tensor bytes (tolerance {TENSOR_TOLERANCE:.0%}%) and peak RSS "
                        f"(tolerance {RSS_TOLERANCE:.0%}%, judged from a 1 GiB estimate up) with the estimate; exit "
                        "status 1 if outside; configurations that fit this machine only")
    output.add_format(parser, ("text", "json", "md"))
    output.add_output(parser)
    parser.add_argument("--json", type=output_file, metavar="FILE",
                        help="also write the result as JSON to this file (old spelling; see --format json)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from torchport import hf, output
    from torchport.errors import UserError
    from torchport.memory_app import memory_fit
    from torchport.results import write_text_atomic
    from torchport.trace import symbolic

    spec = hf.app_from_args(args)
    assert spec is not None, "SPEC is a required argument"
    if args.measure and not hf.is_hf_spec(spec):
        raise UserError("--measure runs hf: specs only; `torchport evaluate` measures an app's real peak", location=spec)
    result = memory_fit(spec, tuple(args.dtype), tuple(args.optimizer))
    if args.measure:
        result["measured"] = compare(result, symbolic.measure(result["spec"]))
    document = json.dumps(result, indent=1) + "\n"
    if args.json:
        write_text_atomic(args.json, document)
    chosen = output.chosen_format(args)
    if chosen == "json":
        output.emit(args, document)
    elif chosen == "md":
        output.emit(args, markdown(result))
    else:
        output.print_or_emit(args, renderable(result, output.text_width()))
    if args.json:
        print(f"memory: {args.json}")
    measured = result.get("measured")
    return 1 if measured and not measured["within_tolerance"] else 0


def compare(result: dict, measured: Mapping[str, Any]) -> dict:
    """The float32/AdamW estimate against the peak measured for real."""
    from torchport.trace.symbolic import RSS_JUDGED_FROM, RSS_TOLERANCE, TENSOR_TOLERANCE, estimate

    float32 = next((p for p in result["passes"] if p["dtype"] == "float32"), None)
    if float32 is None:
        return {**measured, "estimate_bytes": None, "within_tolerance": None,
                "note": "no float32 pass to compare with (add --dtype float32)"}
    predicted = estimate(float32, "adamw")["peak_bytes"]
    tensor_error = (predicted - measured["tensor_peak_bytes"]) / measured["tensor_peak_bytes"]
    rss_error = (predicted - measured["rss_peak_bytes"]) / measured["rss_peak_bytes"]
    return {**measured, "estimate_bytes": predicted, "tensor_error": round(tensor_error, 4),
            "rss_error": round(rss_error, 4), "tensor_tolerance": TENSOR_TOLERANCE, "rss_tolerance": RSS_TOLERANCE,
            "rss_judged": predicted >= RSS_JUDGED_FROM,
            "within_tolerance": abs(tensor_error) <= TENSOR_TOLERANCE
            and (abs(rss_error) <= RSS_TOLERANCE or predicted < RSS_JUDGED_FROM)}


def estimate_rows(result: dict) -> list[list[str]]:
    """One row per dtype and optimizer: what a training step holds."""
    from torchport.formatting import size

    return [[f"{one['dtype']} {row['optimizer']}", size(one["parameter_bytes"]), size(one["gradient_bytes"]),
             size(row["optimizer_state_bytes"]), size(one["activation_bytes"]), size(row["peak_bytes"]),
             size(row["required_bytes"])]
            for one in result["passes"] for row in one["optimizers"]]


ESTIMATE_HEADERS = ["dtype, optimizer", "weights", "gradients", "optimizer state", "activations", "peak",
                    "required"]


def fit_text(chip: dict, required: int) -> str:
    """One chip for one configuration: the share of its capacity on one chip,
    else how many chips each layout needs."""
    if chip["fits_one"]:
        share = required / chip["hbm_bytes"]
        return f"fits ({share:.0%})" if share >= 0.01 else "fits (<1%)"
    layouts = [f"{name} {chip[key]}" for name, key in (("DP", "data_parallel"), ("FSDP", "fully_sharded"))
               if chip[key]]
    return "no: " + (", ".join(layouts) if layouts else "not even sharded")


def chip_rows(result: dict) -> tuple[list[str], list[list[str]]]:
    """Chips as rows, one column per dtype and optimizer."""
    configurations = [(one["dtype"], row) for one in result["passes"] for row in one["optimizers"]]
    headers = ["chip", "capacity"] + [f"{dtype} {row['optimizer']}" for dtype, row in configurations]
    chips = configurations[0][1]["chips"] if configurations else []
    rows = [[chip["chip"], chip["hbm"]] + [fit_text(row["chips"][index], row["required_bytes"])
                                            for _, row in configurations]
            for index, chip in enumerate(chips)]
    return headers, rows


def notes(result: dict) -> list[str]:
    """What the figures are, in a few lines."""
    from torchport.formatting import size

    counted, analytical = result["parameters"], result["analytical_parameters"]
    if result["family"] == "app":
        what = f"{result['config_class']} from {result['spec']}, {result['batch']}; optimizer: {result['app_optimizer']}"
    else:
        what = (f"{result['config_class']} with a {result['family']} head (transformers {result['transformers']}), "
                f"{result['batch']}")
    parameters = f"parameters: {counted:,} counted"
    if analytical is not None:
        parameters += f"; analytical {analytical:,}: " + ("match" if result["parameters_match"] else
                                                         f"MISMATCH ({counted - analytical:+,})")
    out = [what, parameters,
           f"estimates, not measurements: {result['method']}",
           "activations: alive at the end of the forward pass; peak: forward + backward or optimizer step, with the "
           f"optimizer state; required: peak + {result['margin']:.0%} margin; per chip: the share of its capacity "
           "when one chip holds it, else the chips needed under data parallelism (DP) and fully sharded (FSDP)",
           f"chips: torchport's catalogue (retrieved {result['catalogue']['retrieved']}); this run: "
           f"{result['seconds']} s, host peak RSS {size(result['host_peak_rss_bytes'])}"]
    out += [f"{one['dtype']} {row['optimizer']}: {chip['chip']}: not even fully sharded: {chip['why_not']}"
            for one in result["passes"] for row in one["optimizers"] for chip in row["chips"]
            if not chip["fits_one"] and not chip["fully_sharded"] and chip.get("why_not")][:1]
    measured = result.get("measured")
    if measured:
        out.append(measured_line(measured))
    return out


def measured_line(measured: dict) -> str:
    from torchport.formatting import size

    if measured.get("estimate_bytes") is None:
        return f"measured: {measured['note']}"
    return (f"measured on this CPU (float32, AdamW, {measured['steps']} steps, fresh process, torch "
            f"{measured['torch']}): estimate {size(measured['estimate_bytes'])} against peak live tensor "
            f"bytes {size(measured['tensor_peak_bytes'])} ({measured['tensor_error']:+.1%}, tolerance "
            f"{measured['tensor_tolerance']:.0%}) and peak RSS above baseline "
            f"{size(measured['rss_peak_bytes'])} ({measured['rss_error']:+.1%}, "
            + (f"tolerance {measured['rss_tolerance']:.0%}" if measured["rss_judged"] else
               "not judged below a 1 GiB estimate: fixed process costs dominate")
            + f"): {'within' if measured['within_tolerance'] else 'OUTSIDE'}")


def renderable(result: dict, width: int):
    """Two compact tables (what a step holds; the fit per chip) and the notes."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from torchport import output
    from torchport.text import one_line

    estimate = Table(title=Text(one_line(f"torchport memory {result['spec']}")), title_justify="left")
    for index, header in enumerate(ESTIMATE_HEADERS):
        estimate.add_column(header, overflow="fold", no_wrap=index > 0)  # a size is never split
    for row in estimate_rows(result):
        estimate.add_row(*(Text(cell) for cell in row))
    # Narrow: gradients (the weights' size again) and the peak (required is the peak plus the margin) go first.
    output.fit_table(estimate, width, {"gradients": 100, "peak": 100})
    headers, rows = chip_rows(result)
    chips = Table(title="fit per chip (required vs capacity)", title_justify="left")
    for header in headers:
        chips.add_column(header, overflow="fold")
    for row in rows:
        chips.add_row(*(Text(one_line(cell)) for cell in row))
    # Narrow: the first optimizer (AdamW by default, the most state) per dtype stays.
    first = result["passes"][0]["optimizers"][0]["optimizer"] if result["passes"] else None
    output.fit_table(chips, width, {header: 120 for header in headers[2:] if not header.endswith(f" {first}")})
    lines = output.fit_lines("\n".join(f"  - {one_line(line, 2000)}" for line in notes(result)), width)
    return Group(estimate, chips, Text(lines))


def markdown(result: dict) -> str:
    from torchport.report.compare_text import md

    def table(headers: list[str], rows: list[list[str]]) -> list[str]:
        return (["| " + " | ".join(md(h) for h in headers) + " |", "|" + "---|" * len(headers)]
                + ["| " + " | ".join(md(cell) for cell in row) + " |" for row in rows])

    headers, rows = chip_rows(result)
    return "\n".join([f"# torchport memory `{md(result['spec'])}`", "", *table(ESTIMATE_HEADERS, estimate_rows(result)),
                      "", "## Fit per chip (required vs capacity)", "", *table(headers, rows), "",
                      *(f"- {md(line)}" for line in notes(result))]) + "\n"
