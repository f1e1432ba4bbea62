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
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from torchport.check.distributed import launch, launch_failure
from torchport.limits import DEFAULT_TIMEOUT_S
from torchport.protocol import ProtocolConfig
from torchport.records import (BackendStatus, FiredRedirect, ResultDocument, RunRecord, RunStatus, ScriptCoverage,
                               ScriptDistributed, TorchrunRank)
from torchport.stats import median

NPROC = 2
STEPS, BLOCKS, WARMUP = 4, 2, 2
TRACE_STEPS = 3
TRACE_STEP_FACTOR = 2.0  # a traced step against an untraced one (as evaluate's trace stage)


def stage_steps(stage: str) -> int:
    """The steps a script stage runs (per rank for ``script-distributed``)."""
    return TRACE_STEPS if stage == "script-trace" else 1 + WARMUP + STEPS  # STEPS sustained, in BLOCKS blocks


def stage_seconds(stage: str, step_s: float, overhead_s: float) -> float:
    """About how long a script stage takes, for the time budget, from the
    reference's measured step and the time a run pays before its steps:
    ``script-trace`` traces ``TRACE_STEPS`` steps; ``script-distributed`` runs
    the first step, the warm-up and the sustained blocks on ``NPROC`` ranks
    that share the host's cores (so each start-up and step counted ``NPROC``
    times)."""
    if stage == "script-trace":
        return overhead_s + stage_steps(stage) * TRACE_STEP_FACTOR * step_s
    return NPROC * (overhead_s + stage_steps(stage) * step_s)


@dataclass(frozen=True)
class ScriptStageOptions:
    """What script mode's stages read of an evaluation."""

    script: Path
    script_args: tuple[str, ...] = ()
    redirect_cuda: bool = False
    seed: int = 0
    timeout_s: float = DEFAULT_TIMEOUT_S  # the stages' workers run at most this long (and never past 600 s)

    @classmethod
    def from_evaluation(cls, options: Any) -> ScriptStageOptions:
        return cls(script=options.script.resolve(), script_args=tuple(options.script_args),
                   redirect_cuda=options.redirect_cuda, seed=options.protocol.seed,
                   timeout_s=min(options.timeout_s, DEFAULT_TIMEOUT_S))

    def job(self) -> dict[str, Any]:
        """The script's part of a worker job (script_job, script_trace_job)."""
        return {"script": str(self.script), "script_args": list(self.script_args),
                "redirect_cuda": self.redirect_cuda, "cwd": str(Path.cwd())}


def distributed_stage(document: ResultDocument, options: Any, out_dir: Path) -> None:
    stage = ScriptStageOptions.from_evaluation(options)
    reference = document.reference
    section = ScriptDistributed(backend=reference, nproc_per_node=NPROC, status="skipped", ranks={})
    if reference is None or document.backends[reference].status != BackendStatus.OK:
        section.reason = "the script did not run on the reference backend in one process"
        document.put(script_distributed=section)
        return
    config = ProtocolConfig(seed=options.protocol.seed, steps=STEPS, blocks=BLOCKS, max_warmup_steps=WARMUP,
                            steady_tolerance=0.0, inference=False)
    launch_options = SimpleNamespace(app=None, distributed_steps=STEPS, seed=stage.seed, dtype="float32",
                                     nproc=NPROC, nnodes=1, rdzv_endpoint=None, rdzv_conf=None,
                                     timeout_s=stage.timeout_s)
    folder = Path(tempfile.mkdtemp(prefix="torchport-script-ddp-"))
    try:
        launched = launch(launch_options, reference, folder, function="torchport.script.job:script_job",
                          extra={"config": config.as_dict(), **stage.job()})
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    section.torchrun_s = launched["wall_s"]
    for rank, result in sorted(launched["ranks"].items()):
        run = RunRecord.from_dict(result)  # a rank's result, as its worker wrote it
        sustained = run.training.sustained if run.training else None
        blocks = sustained.blocks if sustained else []
        section.ranks[str(rank)] = TorchrunRank(
            status=run.status if "status" in result else None,
            error=run.error,
            step_s=median(sustained.step_times()) if sustained and blocks else None,
            redirects=[FiredRedirect.from_dict(fired) for fired in (run.script or {}).get("redirects", [])],
            losses=[v for b in blocks for v in (b.losses or [])],
            process_groups=(run.script or {}).get("process_groups"),
            user_files=(run.script or {}).get("user_files"),
        )
    ranks = section.ranks
    if len(ranks) == NPROC and all(r.status == RunStatus.OK for r in ranks.values()) and \
            not any(r.process_groups for r in ranks.values()):
        section.status = "not applicable"
        section.reason = (f"the script created no process group: under torchrun each of the {NPROC} processes "
                          "trained alone, so there is no distributed training to check")
    elif len(ranks) == NPROC and all(r.status == RunStatus.OK for r in ranks.values()):
        section.status = "pass"
        section.reason = (f"the script ran unmodified under torchrun on {NPROC} processes "
                          f"({STEPS} sustained steps on every rank)")
    else:
        section.status = "fail"
        section.reason = launch_failure(launched, launch_options)
    section.comparison = ("not made: the script decides how its global batch is split over ranks, so one "
                          "process cannot be made to see the same batches from outside")
    document.put(script_distributed=section)


def trace_stage(document: ResultDocument, options: Any, out_dir: Path) -> None:
    """The op trace of the script's first steps on the CPU (findings at the script's lines)."""
    from torchport.launch import run_worker
    from torchport.trace.analysis import trace_section, validate_targets

    stage = ScriptStageOptions.from_evaluation(options)
    run = run_worker("cpu", "torchport.script.job:script_trace_job", config={"steps": TRACE_STEPS, "seed": stage.seed},
                     extra=stage.job(), timeout=stage.timeout_s)
    from torchport.trace.stage import attach_scan

    section = trace_section(run, f"script:{stage.script}", validate_targets(None))
    attach_scan(section, stage.script)
    document.put(trace=section)
    if run.extra.get("script_coverage"):
        document.put(script_coverage=ScriptCoverage.from_dict(run.extra["script_coverage"]))
