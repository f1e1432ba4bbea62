"""Distributed training: the app under DistributedDataParallel, launched by torchrun.

``python -m torch.distributed.run`` starts ``nproc_per_node`` ranks of
``torchport.worker`` running ``torchport.check.jobs:ddp_job``.  The process
group backend is the backend class's ``process_group_backend`` (gloo on the
CPU, nccl on CUDA/ROCm; XLA, TorchTPU and TorchNeuron backends name theirs).
Each rank trains on its equal slice of every global batch; a single-process
run of the same backend trains on the whole batch.

Pass: the final parameters of rank 0 match the single process within
``CLOSE[dtype]`` (the same maths summed in another order) and the scaling
efficiency is at least ``EFFICIENT_FROM`` (50%: with two ranks, no slower
than one process).  **Borderline** when the parameters match but the
efficiency is lower: distributed training survives the move, but it does not
pay on this host (shown as borderline, never as a pass; it does not fail the
command).  On a CPU backend every rank shares the host's cores, so there the
figure says as much about the host (its cores, its load) as about the app.  A model with
BatchNorm fails unless it uses SyncBatchNorm: each rank normalises its own
slice, so the result differs, and the reason says so.

Figures: the slowest rank's median step time (AlgoPerf takes the maximum
across ranks), the single process's, scaling efficiency = single step time /
(slowest-rank step time x processes), i.e. the speedup over one process on
the same global batch divided by the process count.  On a CPU backend every
process (each rank and the single one) runs one intra-op thread, so the
figure compares N one-thread processes with one one-thread process.

Multi-node: ``--nnodes N --rdzv-endpoint HOST:PORT`` are passed to torchrun
(c10d rendezvous); run the same command on every node.  A rendezvous that
cannot complete ends with torchrun's own reason, or at ``--timeout``.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchport import backends as backend_registry
from torchport.check import WorkerCost
from torchport.check.checkpoint import flat_parameters, outside_note
from torchport.check.training import first_difference
from torchport.check.tolerance import CLOSE, tensor_error
from torchport.launch import run_worker, supervise, worker_environment, worker_python
from torchport.records import Check, CheckStatus, DdpWorker, DistributedFigures, FramesCompiled, Record, RunStatus
from torchport.stats import median

DDP_JOB = "torchport.check.jobs:ddp_job"
WARMUP_STEPS = 2  # first steps carry one-off costs (allocation, DDP bucket set-up); not timed
RENDEZVOUS_JOIN_TIMEOUT_S = 60
# Scaling efficiency from which a distributed run that matches one process passes; below it, borderline.
EFFICIENT_FROM = 0.5
# Two ranks sharing the host, then one process; one timed step after the warm-up at least.
COST = WorkerCost(startups=3, step_runs=3, minimum_steps=WARMUP_STEPS + 1)


def steps(options: Any) -> int:
    return int(options.distributed_steps)


def with_steps(options: Any, steps: int) -> tuple[Any, str | None]:
    if steps == options.distributed_steps:
        return options, None
    return dataclasses.replace(options, distributed_steps=steps), f"{steps} steps (asked {options.distributed_steps})"


@dataclass
class DistributedConfig(Record):
    nproc_per_node: int = 0
    nnodes: int = 1
    steps: int = 0


def config(options: Any) -> DistributedConfig:
    return DistributedConfig(nproc_per_node=options.nproc, nnodes=options.nnodes, steps=options.distributed_steps)


def headline(check: Check) -> str | None:
    figures = check.figures_as(DistributedFigures)
    if figures.scaling_efficiency is None:
        return None
    return (f"{figures.world_size} ranks: efficiency {figures.scaling_efficiency:.0%}, slowest rank "
            f"{(figures.slowest_rank_step_s or 0.0) * 1e3:.1f} ms/step")


def torchrun_command(python: str, options: Any, job_path: str) -> list[str]:
    command = [python, "-m", "torch.distributed.run", "--nproc-per-node", str(options.nproc)]
    if options.nnodes == 1 and not options.rdzv_endpoint:
        command += ["--standalone"]
    else:
        conf = options.rdzv_conf or f"join_timeout={RENDEZVOUS_JOIN_TIMEOUT_S}"
        command += ["--nnodes", str(options.nnodes), "--rdzv-backend", "c10d",
                    "--rdzv-endpoint", options.rdzv_endpoint or "localhost:29400", "--rdzv-conf", conf]
    return command + ["-m", "torchport.worker", job_path]


def thread_env(backend_cls: Any) -> dict[str, str]:
    """One intra-op thread per process on a CPU backend, for the ranks and the
    single-process run alike (torchrun's own default for ranks): otherwise the
    single process would use every core while each rank uses one."""
    return {"OMP_NUM_THREADS": "1"} if backend_cls.device_type == "cpu" else {}


def launch(options: Any, backend: str, folder: Path, function: str = DDP_JOB,
           extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run ``function`` in every rank under torchrun (the DDP job, or script
    mode's job); return its exit, the tail of its output and every rank's result."""
    backend_cls = backend_registry.get(backend)
    python = worker_python(backend_cls)
    rank_dir = folder / "ranks"
    rank_dir.mkdir(parents=True, exist_ok=True)
    job = {"backend": backend, "function": function, "app": options.app and options.app.to_dict(), "config": {},
           "output": str(rank_dir / "launcher.json"), "scratch": str(folder), "rank_dir": str(rank_dir),
           "steps": options.distributed_steps, "seed": options.seed, "dtype": options.dtype,
           "process_group_backend": backend_cls.process_group_backend, **(extra or {})}
    job_path = folder / "job.json"
    job_path.write_text(json.dumps(job), encoding="utf-8")
    env = worker_environment()  # the same allocator settings as the single-process run it is compared with
    env.update(thread_env(backend_cls))
    command = torchrun_command(python, options, str(job_path))
    with tempfile.TemporaryFile() as output:
        # The same supervision as every single-process worker (torchport.launch):
        # started with the session markers, ended with its ranks at the timeout
        # or on an interrupt.
        ended = supervise(command, env, timeout=options.timeout_s, stdout=output, stderr=subprocess.STDOUT)
        if ended.exit_code is None:
            return {"exit_code": None, "timed_out": False, "wall_s": 0.0, "output": "interrupted before torchrun started",
                    "ranks": {}, "command": command}
        output.seek(0, os.SEEK_END)
        output.seek(max(0, output.tell() - 256 * 1024))
        text = output.read().decode("utf-8", errors="replace")
    ranks = {}
    for path in sorted(rank_dir.glob("rank*.json")):
        try:
            ranks[int(path.stem[4:])] = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, json.JSONDecodeError):
            pass
    return {"exit_code": ended.exit_code, "timed_out": ended.timed_out, "wall_s": ended.wall_s, "output": text,
            "ranks": ranks, "command": command}


def launch_failure(launched: dict[str, Any], options: Any) -> str:
    text = launched["output"]
    if launched["timed_out"]:
        return (f"torchrun did not finish within {options.timeout_s:g} s (--timeout): waiting for "
                f"{options.nnodes} node(s) to join the rendezvous, or a rank hung")
    for rank, result in sorted(launched["ranks"].items()):
        if result.get("status") not in (RunStatus.OK, RunStatus.RUNNING, None):
            error = result.get("error") or {}
            where = f" at {error['location']}" if error.get("location") else ""
            return f"rank {rank} {result.get('status')}: {error.get('message')}{where}"
    rendezvous = re.search(r"(RendezvousTimeoutError|RendezvousClosedError|RendezvousConnectionError)[^\n]*", text)
    if rendezvous:
        return f"rendezvous failed ({options.nnodes} node(s) expected): {rendezvous.group(0).strip()[:200]}"
    lines = [line for line in text.splitlines() if "Error" in line or "error" in line]
    return f"torchrun exited with status {launched['exit_code']}: {(lines[-1] if lines else text[-200:]).strip()[:200]}"


def _median_after_warmup(times: list[float]) -> float | None:
    kept = times[WARMUP_STEPS:] or times
    return median(kept) if kept else None


def check(options: Any, backend: str, folder: Path) -> Check:
    figures = DistributedFigures.begin()
    result = Check(name="distributed", backend=backend, status=CheckStatus.ERROR, figures=figures)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    backend_cls = backend_registry.get(backend)
    unsupported = backend_cls.distributed_unsupported()
    if unsupported:
        result.status, result.reason = CheckStatus.NOT_APPLICABLE, f"not applicable on {backend}: {unsupported}"
        return result
    figures.put(process_group_backend=backend_cls.process_group_backend, nproc_per_node=options.nproc,
                nnodes=options.nnodes, steps=options.distributed_steps)
    launched = launch(options, backend, folder / "ddp")
    figures.put(torchrun_s=launched["wall_s"])
    # The ranks' JSON read into records once, here (``launch`` serves script mode's ranks too).
    ranks = {rank: DdpWorker.from_dict(raw) for rank, raw in launched["ranks"].items()}
    world = options.nproc * options.nnodes
    if launched["exit_code"] != 0 or len(ranks) < options.nproc or any(r.status != RunStatus.OK for r in ranks.values()):
        result.status = CheckStatus.FAIL
        result.reason = launch_failure(launched, options)
        return result
    single_folder = folder / "single"
    single_folder.mkdir()
    single_run = run_worker(backend, DDP_JOB, app=options.app, timeout=options.timeout_s, env=thread_env(backend_cls),
                            extra={"rank_dir": str(single_folder), "steps": options.distributed_steps,
                                   "seed": options.seed, "dtype": options.dtype,
                                   "process_group_backend": backend_cls.process_group_backend})
    if single_run.status != RunStatus.OK:
        result.reason = f"the single-process run failed: {single_run.error.message if single_run.error else None}"
        return result
    single = DdpWorker.from_dict(single_run.extra)
    per_step_slowest = [max(times) for times in zip(*(r.step_times_s for r in ranks.values()))]
    slowest = _median_after_warmup(per_step_slowest)
    single_step = _median_after_warmup(single.step_times_s)
    if slowest is None or single_step is None:
        result.reason = "no step times were recorded"
        return result
    assert ranks[0].final_file and single.final_file, "rank 0 and the single process save their parameters"
    error = tensor_error(flat_parameters(ranks[0].final_file), flat_parameters(single.final_file))
    bound = CLOSE[options.dtype]
    samples = single.samples_per_step or 0
    scaling_efficiency = single_step / (slowest * world) if slowest else None
    speedup = single_step / slowest if slowest else None
    figures.put(
        world_size=world,
        slowest_rank_step_s=slowest,
        rank_step_s={str(rank): _median_after_warmup(r.step_times_s) for rank, r in ranks.items()},
        single_process_step_s=single_step,
        speedup=speedup,
        scaling_efficiency=scaling_efficiency,
        global_batch_samples=samples,
        samples_per_s=samples / slowest if slowest else None,
        single_process_samples_per_s=samples / single_step if single_step else None,
        parameter_error=error,
        bound=bound,
        init_process_group_s=max(r.init_process_group_s or 0.0 for r in ranks.values()),
        batchnorm_modules=ranks[0].batchnorm_modules,
        batchnorm_lines=ranks[0].batchnorm_lines,
        # Reductions over the batch dimension in rank 0's forward (per-feature statistics of its slice).
        batch_coupled=ranks[0].op_sequence.batch_coupled if ranks[0].op_sequence else [],
        # DDP keeps parameters and buffers in step across ranks; a tensor outside state_dict is not.
        outside_state_dict=ranks[0].outside_state_dict,
        outside_state=ranks[0].outside_state,
        # Dynamo frames each process compiled (None on an eager backend): evidence that the ranks ran compiled.
        # None when every rank ran the same ops in its forward and backward; else where they part.
        rank_op_sequences=first_difference({str(rank): r.op_sequence for rank, r in ranks.items()
                                            if r.op_sequence}),
        frames_compiled=FramesCompiled(ranks={str(rank): r.frames_compiled for rank, r in ranks.items()},
                                       single_process=single.frames_compiled),
    )
    timing = (f"slowest rank {slowest * 1e3:.1f} ms/step vs single process {single_step * 1e3:.1f} ms/step, "
              f"scaling efficiency {scaling_efficiency:.0%}")
    compiled = ""
    if backend_cls.compile_backend is not None:
        frames = figures.frames_compiled or FramesCompiled()
        compiled = (f"; compiled ranks: each ran torch.compile(DistributedDataParallel(model), "
                    f"backend={backend_cls.compile_backend!r}) (Dynamo frames compiled per rank: "
                    f"{', '.join(str(v) for v in frames.ranks.values())}; single process, compiled too: "
                    f"{frames.single_process})")
    figures.put(efficient_from=EFFICIENT_FROM)
    if error <= bound:
        matched = f"{world} ranks over {figures.process_group_backend} match one process (error {error:.1e})"
        if scaling_efficiency is not None and scaling_efficiency >= EFFICIENT_FROM:
            result.status = CheckStatus.PASS
            result.reason = f"{matched}; {timing}{compiled}"
        else:
            result.status = CheckStatus.BORDERLINE
            shared = (" (the ranks share this host's cores: the figure measures the host as much as the app)"
                      if backend_cls.device_type == "cpu" else "")
            result.reason = (f"borderline: {matched}, but {timing} is below {EFFICIENT_FROM:.0%}: "
                             f"{world} ranks gain {speedup:.2f}x over one process{shared}{compiled}")
    else:
        result.status = CheckStatus.FAIL
        hint = ""
        if figures.batchnorm_modules:
            named = [name + (f" at {figures.batchnorm_lines[name]}" if figures.batchnorm_lines.get(name) else "")
                     for name in figures.batchnorm_modules[:3]]
            hint = (f"; BatchNorm ({', '.join(named)}) normalises each rank's slice: "
                    "convert with torch.nn.SyncBatchNorm.convert_sync_batchnorm")
        elif figures.batch_coupled:
            sites = ", ".join(f"{item.op} at {item.line}" for item in figures.batch_coupled[:3])
            hint = (f"; likely cause: the forward computes statistics across the batch ({sites}): each rank "
                    "uses its own slice's statistics, one process the whole batch's; compute them over all ranks "
                    "(torch.distributed.all_reduce) or per sample")
        if figures.outside_state_dict:
            hint += f"; {outside_note(figures.outside_state or figures.outside_state_dict)}, and DDP does not keep it in step across ranks"
        if figures.rank_op_sequences:
            hint += (f"; the ranks ran different ops in their forward and backward ({figures.rank_op_sequences}): "
                     "control flow that depends on the rank, or on each rank's slice of the data")
        result.reason = f"{world} ranks end {error:.2e} away from one process (bound {bound:.0e}){hint}; {timing}{compiled}"
    return result
