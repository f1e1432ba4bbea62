"""torchport memory SPEC"""
from __future__ import annotations

import argparse
import json

from torchport.options import output_file


def register(subparsers: argparse._SubParsersAction) -> None:
    from torchport.hf import add_batch_arguments
    from torchport.trace.symbolic import DTYPES, MARGIN, OPTIMIZERS, RSS_TOLERANCE, TENSOR_TOLERANCE

    parser = subparsers.add_parser(
        "memory",
        help="memory fit of an hf: model at full size, without allocating it",
        description="Build the model and run one forward + backward pass under torch's FakeTensorMode (nothing "
        "is allocated), count parameters, gradients, optimizer state and activations at the given batch and "
        f"sequence length, add a {MARGIN:.0%} margin, and say per catalogued chip whether it fits on one, or how "
        "many it needs under plain data parallelism and fully sharded. Estimates, labelled as such.",
    )
    parser.add_argument("app", metavar="SPEC", help="hf:MODEL_TYPE[?key=value&...], e.g. "
                        "'hf:llama?batch_size=1&seq_len=2048'")
    add_batch_arguments(parser)
    parser.add_argument("--dtype", action="append", default=[], choices=DTYPES,
                        help=f"parameter and activation dtype (repeatable; default: {', '.join(DTYPES)})")
    parser.add_argument("--optimizer", action="append", default=[], choices=list(OPTIMIZERS),
                        help=f"optimizer (repeatable; default: {', '.join(OPTIMIZERS)})")
    # argparse %-formats help strings: a literal percent sign is written %%.
    parser.add_argument("--measure", action="store_true",
                        help="also run the spec for real on this CPU (float32, AdamW, 2 steps, fresh process) and "
                        f"compare its peak tensor bytes (tolerance {TENSOR_TOLERANCE:.0%}%) and peak RSS (tolerance "
                        f"{RSS_TOLERANCE:.0%}%, judged from a 1 GiB estimate up) with the estimate; exit status 1 "
                        "if outside; configurations that fit this machine only")
    parser.add_argument("--json", type=output_file, metavar="FILE", help="write the result as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from torchport.hf import app_from_args
    from torchport.trace import symbolic

    spec = app_from_args(args)
    assert spec is not None, "SPEC is a required argument"
    result = symbolic.memory_fit(spec, tuple(args.dtype) or symbolic.DTYPES,
                                 tuple(args.optimizer) or tuple(symbolic.OPTIMIZERS))
    if args.measure:
        result["measured"] = compare(result, symbolic.measure(result["spec"]))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print("\n".join(lines(result)))
    if args.json:
        print(f"memory: {args.json}")
    measured = result.get("measured")
    return 1 if measured and not measured["within_tolerance"] else 0


def compare(result: dict, measured: dict) -> dict:
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


def lines(result: dict) -> list[str]:
    from torchport.formatting import size

    out = [f"torchport memory {result['spec']}: {result['config_class']} with a {result['family']} head "
           f"(transformers {result['transformers']}), {result['batch']}", ""]
    counted, analytical = result["parameters"], result["analytical_parameters"]
    if analytical is None:
        check = "no analytical formula for this model type"
    else:
        check = f"analytical {analytical:,}: " + ("match" if result["parameters_match"] else
                                                  f"MISMATCH ({counted - analytical:+,})")
    out.append(f"Parameters: {counted:,} counted from the model built under FakeTensorMode; {check}")
    out.append(f"Estimate ({result['method']})")
    for one in result["passes"]:
        out.append("")
        out.append(f"{one['dtype']}: parameters {size(one['parameter_bytes'])}, gradients {size(one['gradient_bytes'])}, "
                   f"activations {size(one['activation_bytes'])} (alive at the end of the forward pass), "
                   f"forward + backward peak {size(one['step_peak_bytes'])}")
        for row in one["optimizers"]:
            out.append(f"  {row['optimizer']:12} optimizer state {size(row['optimizer_state_bytes'])}, "
                       f"peak {size(row['peak_bytes'])}, with {result['margin']:.0%} margin "
                       f"{size(row['required_bytes'])}")
            for chip in row["chips"]:
                if chip["fits_one"]:
                    verdict = "fits on one chip"
                else:
                    parallel = (f"data parallel: {chip['data_parallel']} chips" if chip["data_parallel"]
                                else "data parallel: no (a batch of 1 cannot be split)" if result["batch_size"] == 1
                                else "data parallel: no (one sample per chip does not fit beside the full state)")
                    sharded = (f"fully sharded: {chip['fully_sharded']} chips" if chip["fully_sharded"]
                               else f"fully sharded: no ({chip.get('why_not')})")
                    verdict = f"does not fit on one; {parallel}; {sharded}"
                out.append(f"      {chip['chip']} ({chip['hbm']}): {verdict}")
    out.append("")
    out.append(f"Chips: torchport's catalogue (retrieved {result['catalogue']['retrieved']}). This run: "
               f"{result['seconds']} s, host peak RSS {size(result['host_peak_rss_bytes'])}.")
    measured = result.get("measured")
    if measured:
        if measured.get("estimate_bytes") is None:
            out.append(f"Measured: {measured['note']}")
        else:
            out.append(f"Measured on this CPU (float32, AdamW, {measured['steps']} steps, fresh process, torch "
                       f"{measured['torch']}): estimate {size(measured['estimate_bytes'])} against peak live tensor "
                       f"bytes {size(measured['tensor_peak_bytes'])} ({measured['tensor_error']:+.1%}, tolerance "
                       f"{measured['tensor_tolerance']:.0%}) and peak RSS above baseline "
                       f"{size(measured['rss_peak_bytes'])} ({measured['rss_error']:+.1%}, "
                       + (f"tolerance {measured['rss_tolerance']:.0%}" if measured["rss_judged"] else
                          "not judged below a 1 GiB estimate: fixed process costs dominate")
                       + f"): {'within' if measured['within_tolerance'] else 'OUTSIDE'}")
    return out
