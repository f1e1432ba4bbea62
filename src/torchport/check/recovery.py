"""Failure recovery: SIGKILL a training worker, restart it, finish, compare.

1. A worker trains ``recovery_steps`` steps with a checkpoint every
   ``recovery_every`` steps and appends each finished step to a log.  When it
   reports the kill step (chosen at random between the first checkpoint and
   the end; the seed is recorded), the parent sends SIGKILL to the worker
   process: no handler, no cleanup, exactly as an out-of-memory killer or a
   preempted machine would.
2. A new worker finds the newest checkpoint that validates (size and
   checksum), loads it, fast-forwards the data, restores the RNG states and
   trains to the end.
3. A third worker trains uninterrupted from the same seed.

Pass: final parameters equal bit for bit on a CPU backend (deterministic
kernels); elsewhere within ``CLOSE[dtype]`` relative error.  Figures: the
work lost (steps finished after the last checkpoint, and their share of the
run) and the restart time (restart launched to first resumed step finished).
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
import os
import random
import shutil
import signal
import time
from pathlib import Path
from typing import Any

from torchport import backends as backend_registry
from torchport.check import WorkerCost
from torchport.check.checkpoint import flat_parameters, outside_note
from torchport.check.tolerance import CLOSE, tensor_error
from torchport.launch import run_worker
from torchport.records import Check, CheckStatus, RecoveryFigures, RecoveryWorker, Record, RunRecord, RunStatus

RECOVERY_JOB = "torchport.check.jobs:recovery_job"
# Interrupted + resumed (one run's steps in all), then uninterrupted; two checkpoints at least.
COST = WorkerCost(startups=3, step_runs=2, minimum_steps=2 * 1 + 2)


def steps(options: Any) -> int:
    return int(options.recovery_steps)


def with_steps(options: Any, steps: int) -> tuple[Any, str | None]:
    every = max(1, min(options.recovery_every, (steps - 2) // 2))
    if (steps, every) == (options.recovery_steps, options.recovery_every):
        return options, None
    note = (f"{steps} steps, a checkpoint every {every} "
            f"(asked {options.recovery_steps}, every {options.recovery_every})")
    return dataclasses.replace(options, recovery_steps=steps, recovery_every=every), note


@dataclass
class RecoveryConfig(Record):
    steps: int = 0
    every: int = 0


def config(options: Any) -> RecoveryConfig:
    return RecoveryConfig(steps=options.recovery_steps, every=options.recovery_every)


def headline(check: Check) -> str | None:
    figures = check.figures_as(RecoveryFigures)
    if figures.work_lost_steps is None:
        return None
    return (f"{figures.work_lost_steps} steps lost, restart {figures.restart_s or 0.0:.1f} s"
            + (", bit-exact" if figures.bit_exact else ""))


@dataclass
class RecoveryJob(Record):
    """The recovery worker's job (``jobs.recovery_job``), beside the launcher's keys."""

    checkpoint_dir: str = ""
    step_log: str = ""
    final_file: str = ""
    steps: int = 0
    every: int = 0
    dtype: str = "float32"
    seed: int = 0
    resume: bool = False


def _job(options: Any, folder: Path, name: str, resume: bool) -> RecoveryJob:
    return RecoveryJob(checkpoint_dir=str(folder / f"{name}-checkpoints"), step_log=str(folder / f"{name}.steps.jsonl"),
                       final_file=str(folder / f"{name}.final.pt"), steps=options.recovery_steps,
                       every=options.recovery_every, dtype=options.dtype, seed=options.seed, resume=resume)


def _last_logged_step(path: str) -> int:
    last = 0
    try:
        with open(path, encoding="utf-8") as log:
            for line in log:
                try:
                    last = max(last, int(json.loads(line)["step"]))
                except (ValueError, KeyError, json.JSONDecodeError):
                    break  # a line cut by the kill
    except OSError:
        pass
    return last


def _message(run: RunRecord) -> str | None:
    return run.error.message if run.error else None


def check(options: Any, backend: str, folder: Path) -> Check:
    figures = RecoveryFigures.begin()
    result = Check(name="recovery", backend=backend, status=CheckStatus.ERROR, figures=figures)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    kill_seed = options.kill_seed if options.kill_seed is not None else random.SystemRandom().randrange(2 ** 31)
    steps, every = options.recovery_steps, options.recovery_every
    kill_step = random.Random(kill_seed).randint(every + 1, steps - every)
    figures.put(steps=steps, checkpoint_every=every, kill_seed=kill_seed, kill_step=kill_step)

    killed: list[float] = []  # when the SIGKILL was sent

    def kill_at_step(event: Mapping[str, Any]) -> None:
        if event.get("phase") == "step" and event.get("step", 0) >= kill_step and not killed:
            killed.append(time.time())
            os.kill(event["pid"], signal.SIGKILL)

    interrupted_job = _job(options, folder, "interrupted", resume=False)
    first = run_worker(backend, RECOVERY_JOB, app=options.app, extra=interrupted_job.to_dict(),
                       timeout=options.timeout_s, on_progress=kill_at_step)
    if first.status == RunStatus.OK:
        result.reason = (f"the worker finished all {steps} steps before the SIGKILL at step {kill_step} landed; "
                         "use more --recovery-steps")
        return result
    if not killed or first.status != RunStatus.CRASHED:
        result.reason = f"the training worker stopped before the kill: {first.status}: {_message(first)}"
        return result
    died_after = _last_logged_step(interrupted_job.step_log)
    figures.put(died_after_step=died_after, worker_exit=_message(first))

    restart_started = time.time()
    resumed_at: list[float] = []  # when the restarted worker finished its first step

    def first_resumed_step(event: Mapping[str, Any]) -> None:
        if event.get("phase") == "step" and not resumed_at:
            resumed_at.append(event["time"])

    resume_job = dataclasses.replace(interrupted_job, resume=True)
    second_run = run_worker(backend, RECOVERY_JOB, app=options.app, extra=resume_job.to_dict(),
                            timeout=options.timeout_s, on_progress=first_resumed_step)
    if second_run.status != RunStatus.OK:
        result.status = CheckStatus.FAIL
        result.reason = f"restarting from the last checkpoint failed: {_message(second_run)}"
        return result
    second = RecoveryWorker.from_dict(second_run.extra)
    checkpoint_step = second.resumed_from.step if second.resumed_from else 0
    first_step_done = resumed_at[0] if resumed_at else time.time()
    figures.put(
        resumed_from_step=checkpoint_step,
        work_lost_steps=died_after - checkpoint_step,
        work_lost_share=(died_after - checkpoint_step) / steps,
        restart_s=first_step_done - restart_started,
        kill_to_first_resumed_step_s=first_step_done - killed[0],
        invalid_checkpoints=second.invalid_checkpoints,
        not_restored=second.not_restored,
        outside_state_dict=second.outside_state_dict,
        outside_state=second.outside_state,
    )
    if not second.resumed_from:
        result.status = CheckStatus.FAIL
        result.reason = "the restarted worker found no valid checkpoint and trained from scratch"
        return result

    uninterrupted_run = run_worker(backend, RECOVERY_JOB, app=options.app,
                                   extra=_job(options, folder, "uninterrupted", resume=False).to_dict(),
                                   timeout=options.timeout_s)
    if uninterrupted_run.status != RunStatus.OK:
        result.reason = f"the uninterrupted run failed: {_message(uninterrupted_run)}"
        return result
    uninterrupted = RecoveryWorker.from_dict(uninterrupted_run.extra)
    assert second.final_file and uninterrupted.final_file, "a recovery worker that finished saved its parameters"
    error = tensor_error(flat_parameters(second.final_file), flat_parameters(uninterrupted.final_file))
    exact_required = backend_registry.get(backend).device_type == "cpu"
    bound = 0.0 if exact_required else CLOSE[options.dtype]
    figures.put(parameter_error=error, bit_exact=error == 0.0, bound=bound, exact_required=exact_required)
    lost = (f"killed after step {died_after}, resumed from step {checkpoint_step} ({died_after - checkpoint_step} "
            f"steps lost), restart {figures.restart_s:.1f} s")
    if error <= bound:
        result.status = CheckStatus.PASS
        result.reason = f"{lost}; final state {'bit-exact' if error == 0 else f'within {bound:.0e}'} vs uninterrupted"
    else:
        result.status = CheckStatus.FAIL
        result.reason = (f"{lost}; final parameters differ from the uninterrupted run by {error:.2e} "
                         f"({'bit-exact required on a CPU backend' if exact_required else f'bound {bound:.0e}'})"
                         + (f"; {outside_note(figures.outside_state or figures.outside_state_dict)}"
                            if figures.outside_state_dict else ""))
    return result
