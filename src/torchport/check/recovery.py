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
from torchport.records import Check, CheckStatus, RunStatus

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


def config(options: Any) -> dict[str, Any]:
    return {"steps": options.recovery_steps, "every": options.recovery_every}


def headline(figures: dict[str, Any]) -> str | None:
    if "work_lost_steps" not in figures:
        return None
    return (f"{figures['work_lost_steps']} steps lost, restart {figures['restart_s']:.1f} s"
            + (", bit-exact" if figures.get("bit_exact") else ""))


def _job(options: Any, folder: Path, name: str, resume: bool) -> dict[str, Any]:
    return {"checkpoint_dir": str(folder / f"{name}-checkpoints"), "step_log": str(folder / f"{name}.steps.jsonl"),
            "final_file": str(folder / f"{name}.final.pt"), "steps": options.recovery_steps,
            "every": options.recovery_every, "dtype": options.dtype, "seed": options.seed, "resume": resume}


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


def check(options: Any, backend: str, folder: Path) -> Check:
    result = Check(name="recovery", backend=backend, status=CheckStatus.ERROR)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    kill_seed = options.kill_seed if options.kill_seed is not None else random.SystemRandom().randrange(2 ** 31)
    steps, every = options.recovery_steps, options.recovery_every
    kill_step = random.Random(kill_seed).randint(every + 1, steps - every)
    figures = result.figures
    figures.update({"steps": steps, "checkpoint_every": every, "kill_seed": kill_seed, "kill_step": kill_step})

    killed: dict[str, Any] = {}

    def kill_at_step(event: dict[str, Any]) -> None:
        if event.get("phase") == "step" and event.get("step", 0) >= kill_step and not killed:
            killed["time"] = time.time()
            killed["pid"] = event["pid"]
            os.kill(event["pid"], signal.SIGKILL)

    interrupted_job = _job(options, folder, "interrupted", resume=False)
    first = run_worker(backend, RECOVERY_JOB, app=options.app, extra=interrupted_job, timeout=options.timeout_s,
                       on_progress=kill_at_step).to_dict()
    if first["status"] == RunStatus.OK:
        result.reason = (f"the worker finished all {steps} steps before the SIGKILL at step {kill_step} landed; "
                         "use more --recovery-steps")
        return result
    if not killed or first["status"] != RunStatus.CRASHED:
        error = first.get("error") or {}
        result.reason = f"the training worker stopped before the kill: {first['status']}: {error.get('message')}"
        return result
    died_after = _last_logged_step(interrupted_job["step_log"])
    figures["died_after_step"] = died_after
    figures["worker_exit"] = (first.get("error") or {}).get("message")

    restart_started = time.time()
    resumed_at: dict[str, float] = {}

    def first_resumed_step(event: dict[str, Any]) -> None:
        if event.get("phase") == "step" and "time" not in resumed_at:
            resumed_at["time"] = event["time"]

    resume_job = {**interrupted_job, "resume": True}
    second = run_worker(backend, RECOVERY_JOB, app=options.app, extra=resume_job, timeout=options.timeout_s,
                        on_progress=first_resumed_step).to_dict()
    if second["status"] != RunStatus.OK:
        error = second.get("error") or {}
        result.status = CheckStatus.FAIL
        result.reason = f"restarting from the last checkpoint failed: {error.get('message')}"
        return result
    resumed_from = second.get("resumed_from") or {}
    checkpoint_step = resumed_from.get("step", 0)
    figures.update({
        "resumed_from_step": checkpoint_step,
        "work_lost_steps": died_after - checkpoint_step,
        "work_lost_share": (died_after - checkpoint_step) / steps,
        "restart_s": resumed_at.get("time", time.time()) - restart_started,
        "kill_to_first_resumed_step_s": resumed_at.get("time", time.time()) - killed["time"],
        "invalid_checkpoints": second.get("invalid_checkpoints", []),
        "not_restored": second.get("not_restored", []),
        "outside_state_dict": second.get("outside_state_dict", []),
        "outside_state": second.get("outside_state", []),
    })
    if not resumed_from:
        result.status = CheckStatus.FAIL
        result.reason = "the restarted worker found no valid checkpoint and trained from scratch"
        return result

    uninterrupted = run_worker(backend, RECOVERY_JOB, app=options.app,
                               extra=_job(options, folder, "uninterrupted", resume=False),
                               timeout=options.timeout_s).to_dict()
    if uninterrupted["status"] != RunStatus.OK:
        result.reason = f"the uninterrupted run failed: {(uninterrupted.get('error') or {}).get('message')}"
        return result
    error = tensor_error(flat_parameters(second["final_file"]), flat_parameters(uninterrupted["final_file"]))
    exact_required = backend_registry.get(backend).device_type == "cpu"
    bound = 0.0 if exact_required else CLOSE[options.dtype]
    figures.update({"parameter_error": error, "bit_exact": error == 0.0, "bound": bound,
                    "exact_required": exact_required})
    lost = (f"killed after step {died_after}, resumed from step {checkpoint_step} ({died_after - checkpoint_step} "
            f"steps lost), restart {figures['restart_s']:.1f} s")
    if error <= bound:
        result.status = CheckStatus.PASS
        result.reason = f"{lost}; final state {'bit-exact' if error == 0 else f'within {bound:.0e}'} vs uninterrupted"
    else:
        result.status = CheckStatus.FAIL
        result.reason = (f"{lost}; final parameters differ from the uninterrupted run by {error:.2e} "
                         f"({'bit-exact required on a CPU backend' if exact_required else f'bound {bound:.0e}'})"
                         + (f"; {outside_note(figures['outside_state'] or figures['outside_state_dict'])}" if figures["outside_state_dict"] else ""))
    return result
