"""Script mode's distributed stage: the script itself under torchrun.

After the timing rounds, ``evaluate --script`` launches the unmodified script
with torchrun on the reference backend (2 processes, the backend's process
group, gloo on the CPU; with ``--redirect-cuda`` an ``nccl`` group becomes
that one), each rank through script mode's own job for a few steps.  It
records, per rank, whether the script ran, its step time and losses.  A loss
comparison with one process is not made: only the script knows how it splits
its global batch over ranks (DistributedSampler, a per-rank batch size), and
torchport cannot rebuild the same global batch from outside.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from torchport.check.distributed import launch, launch_failure
from torchport.limits import DEFAULT_TIMEOUT_S
from torchport.protocol import ProtocolConfig
from torchport.stats import median

NPROC = 2
STEPS, BLOCKS, WARMUP = 4, 2, 2


def distributed_stage(document: dict[str, Any], options: Any, out_dir: Path) -> None:
    reference = document.get("reference")
    section: dict[str, Any] = {"backend": reference, "nproc_per_node": NPROC, "status": "skipped", "ranks": {}}
    if reference is None or document["backends"][reference].get("status") != "ok":
        section["reason"] = "the script did not run on the reference backend in one process"
        document["script_distributed"] = section
        return
    config = ProtocolConfig(seed=options.protocol.seed, steps=STEPS, blocks=BLOCKS, max_warmup_steps=WARMUP,
                            steady_tolerance=0.0, inference=False)
    launch_options = SimpleNamespace(app=None, distributed_steps=STEPS, seed=options.protocol.seed, dtype="float32",
                                     nproc=NPROC, nnodes=1, rdzv_endpoint=None, rdzv_conf=None,
                                     timeout_s=min(options.timeout_s, DEFAULT_TIMEOUT_S))
    folder = Path(tempfile.mkdtemp(prefix="torchport-script-ddp-"))
    try:
        launched = launch(launch_options, reference, folder, function="torchport.script.job:script_job",
                          extra={"config": config.as_dict(), "script": str(options.script.resolve()),
                                 "script_args": list(options.script_args), "redirect_cuda": options.redirect_cuda,
                                 "cwd": str(Path.cwd())})
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    section["torchrun_s"] = launched["wall_s"]
    for rank, result in sorted(launched["ranks"].items()):
        training = result.get("training") or {}
        blocks = (training.get("sustained") or {}).get("blocks") or []
        section["ranks"][str(rank)] = {
            "status": result.get("status"),
            "error": result.get("error"),
            "step_s": median(b["seconds"] / b["steps"] for b in blocks) if blocks else None,
            "redirects": (result.get("script") or {}).get("redirects", []),
            "losses": [v for b in blocks for v in (b.get("losses") or [])],
        }
    ranks = section["ranks"]
    if len(ranks) == NPROC and all(r["status"] == "ok" for r in ranks.values()):
        section["status"] = "pass"
        section["reason"] = (f"the script ran unmodified under torchrun on {NPROC} processes "
                             f"({STEPS} sustained steps on every rank)")
    else:
        section["status"] = "fail"
        section["reason"] = launch_failure(launched, launch_options)
    section["comparison"] = ("not made: the script decides how its global batch is split over ranks, so one "
                             "process cannot be made to see the same batches from outside")
    document["script_distributed"] = section
    if section["ranks"]:
        from torchport.script.crossref import cross_reference

        # The DDP branch of a script runs only here: its lines are run-time evidence too.
        document["script"] = cross_reference(options.script.resolve(), document["backends"], reference,
                                             torchrun_ranks=section["ranks"])


TRACE_STEPS = 3


def trace_stage(document: dict[str, Any], options: Any, out_dir: Path) -> None:
    """The op trace of the script's first steps on the CPU (findings at the script's lines)."""
    from torchport.launch import run_worker
    from torchport.trace.analysis import build_section, validate_targets

    script = str(options.script.resolve())
    run = run_worker("cpu", "torchport.script.job:script_trace_job", config={"steps": TRACE_STEPS,
                                                                            "seed": options.protocol.seed},
                     extra={"script": script, "script_args": list(options.script_args),
                            "redirect_cuda": options.redirect_cuda, "cwd": str(Path.cwd())},
                     timeout=min(options.timeout_s, DEFAULT_TIMEOUT_S))
    document["trace"] = build_section(run, f"script:{script}", validate_targets(None))
