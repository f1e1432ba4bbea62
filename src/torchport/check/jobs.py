"""Worker-side job functions, started through ``torchport.launch.run_worker``
(``"torchport.check.jobs:train_job"``) or, for distributed training, by
``torchrun`` on ``torchport.worker`` (``"torchport.check.jobs:ddp_job"``).

Each job writes scalars into the worker's JSON result (saved after every
piece, so a killed worker keeps what it measured) and tensors into files under
the job's ``work_dir`` for the parent to compare.

Runs on torch 2.9 and newer.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from torchport import failures
from torchport.check import pipeline, savefile
from torchport.check.training import (
    TrainingRun,
    op_sequence,
    as_float64,
    ensure_folder,
    record_module_outputs,
    restore_rng,
    submodule_line,
)
from torchport.engine import ImportedApp, import_app, leading_dim


def set_deterministic(backend: Any) -> bool:
    """Deterministic kernels where the device is the CPU: the determinism
    precheck and bit-exact recovery rely on it.  Other devices run with their
    defaults, as the migrated app would."""
    import torch

    if backend.device_type != "cpu":
        return False
    torch.use_deterministic_algorithms(True, warn_only=True)
    return True


def train_job(context: Any) -> None:
    """Train each run in ``job["runs"]``, optionally time the data pipeline,
    then, for each checkpoint in ``job["resume"]``, load it into a fresh run
    built as its ``into`` spec (default ``job["resume_spec"]``) says and train
    on to that run's last step.  ``result["resumed"][into][source]``."""
    job = context.job
    work = ensure_folder(job["work_dir"])
    backend = context.backend
    result = context.result
    result["deterministic_algorithms"] = set_deterministic(backend)
    # Seed, then import (the engine's fixed order); every run below is built from here.
    runs = job["runs"]
    imported = import_app(context.app_spec, int(runs[0]["seed"]) if runs else int(job.get("seed", 0)))
    app = imported.app
    result["app_has"] = {"predict": app.predict is not None, "metric": app.metric is not None}
    result["runs"] = {}
    for spec in job["runs"]:
        context.progress(f"train:{spec['label']}")
        if spec["dtype"] == "float64":
            # The ground truth is torchport's construction, not the app: its failure is
            # recorded for parity to report, and the app's own runs go on.
            try:
                result["runs"][spec["label"]] = train_run(imported, backend, spec, work, context)
            except Exception as exc:  # noqa: BLE001  any failure of the float64 build is reported as such
                result["runs"][spec["label"]] = {"dtype": "float64", "error": failures.record(exc)}
        else:
            result["runs"][spec["label"]] = train_run(imported, backend, spec, work, context)
        context.save()
    result["resumed"] = {}
    for source in job.get("resume", []):
        into = source.get("into") or job["resume_spec"]
        context.progress(f"resume:{source['label']}->{into['label']}")
        result["resumed"].setdefault(into["label"], {})[source["label"]] = resume_run(imported, backend, into, source, work)
        context.save()


def train_run(imported: ImportedApp, backend: Any, spec: dict[str, Any], work: Path, context: Any) -> dict[str, Any]:
    import torch

    app = imported.app

    label, steps = spec["label"], int(spec["steps"])
    checkpoint_step = spec.get("checkpoint_step")
    record: dict[str, Any] = {"dtype": spec["dtype"], "steps": steps}
    run = TrainingRun(imported, backend, dtype=spec["dtype"], seed=spec["seed"], eager=spec.get("eager", False))
    use_predict = spec.get("outputs") and app.predict is not None and spec.get("app_inference", True)
    if use_predict:
        output = run.predict_output()
        record["output_source"] = "predict(model, first batch), before training"
    else:
        output = None
    modules, remove_hooks = record_module_outputs(run.model) if spec.get("modules") else ({}, lambda: None)
    top: dict[str, Any] = {}
    top_hook = None
    if spec.get("outputs") and not use_predict:
        def keep_first_output(module: Any, inputs: Any, out: Any) -> None:  # returns None: leaves the output alone
            if "out" not in top:
                top["out"] = as_float64(out)

        top_hook = run.model.register_forward_hook(keep_first_output)
        record["output_source"] = "model output in training step 1 (forward hook)"

    losses = [run.train_step(after_backward=lambda: record.update(grad_norms=run.gradient_norms()))]
    remove_hooks()
    if top_hook is not None:
        top_hook.remove()
        output = top.get("out")
    if output is not None:
        record["output_file"] = str(work / f"{label}.output.pt")
        torch.save(output, record["output_file"])
    if spec.get("modules"):
        record["modules"] = list(modules)
        record["module_types"] = {name or "(top)": type(module).__name__ for name, module in run.model.named_modules()}
        record["modules_file"] = str(work / f"{label}.modules.pt")
        torch.save(modules, record["modules_file"])
    if checkpoint_step == 1:
        record["checkpoint"] = write_checkpoint(run, work / f"{label}.ckpt")

    backend.synchronize()
    wait_before, saving_s = run.data_wait_s, 0.0
    started = time.perf_counter()
    for step in range(2, steps + 1):
        losses.append(run.train_step())
        if step == checkpoint_step:
            backend.synchronize()
            save_started = time.perf_counter()
            record["checkpoint"] = write_checkpoint(run, work / f"{label}.ckpt")
            saving_s += time.perf_counter() - save_started
    backend.synchronize()
    elapsed = time.perf_counter() - started - saving_s
    if steps > 1:
        record["timing"] = {"steps": steps - 1, "seconds": elapsed, "step_s": elapsed / (steps - 1),
                            "data_wait_s": run.data_wait_s - wait_before,
                            "samples_per_step": _samples(app, run.first_batch())}
    record["losses"] = [float(loss) for loss in losses]
    # The metric and predict run the model in eval mode without gradients: one
    # more graph for a compiling backend to build, which the evaluate stage skips.
    record["metric"] = run.metric() if spec.get("app_inference", True) else None
    record["metric_higher_is_better"] = app.metric_higher_is_better
    if run.hold is not None:
        record["casts_held"] = run.hold.casts_held
    if spec.get("save_final"):
        record["final_file"] = str(work / f"{label}.final.pt")
        torch.save(run.parameters_cpu(), record["final_file"])
    if spec.get("pipeline"):  # last: its steps change the model after everything above was read
        context.progress(f"pipeline:{label}")
        record["pipeline"] = pipeline.measure(run, per_round=int(spec.get("pipeline_per_round") or pipeline.PER_ROUND))
    return record


def outside(run: TrainingRun) -> dict[str, Any]:
    """State outside state_dict by name (``outside_state_dict``) and with its
    kind and creating line (``outside_state``)."""
    found = run.outside_state()
    return {"outside_state_dict": [item["name"] for item in found], "outside_state": found}


def write_checkpoint(run: TrainingRun, path: Path) -> dict[str, Any]:
    record: dict[str, Any] = {"path": str(path), "step": run.step,
                              **outside(run)}
    try:
        record.update(savefile.save(run.checkpoint_state(), path))
    except savefile.CheckpointError as exc:
        record["error"] = str(exc)
    return record


def resume_run(imported: ImportedApp, backend: Any, spec: dict[str, Any], source: dict[str, Any], work: Path) -> dict[str, Any]:
    """A fresh run of this backend, loaded from another run's checkpoint and
    trained to the same final step as ``spec``."""
    import torch

    record: dict[str, Any] = {"path": source["path"]}
    try:
        state = savefile.load(source["path"])
    except savefile.CheckpointError as exc:
        record["error"] = str(exc)
        return record
    run = TrainingRun(imported, backend, dtype=spec["dtype"], seed=spec["seed"], eager=spec.get("eager", False))
    run.skip_batches(int(state["step"]))
    try:
        record.update(run.load_state(state))
    except Exception as exc:  # a state that does not fit this model is the finding, not a crash
        record["error"] = f"the checkpoint does not load on {backend.name}: {getattr(exc, 'message', exc)}"
        return record
    record["not_restored"] = restore_rng(state["rng"], backend)
    record["start_step"] = run.step
    losses = []
    while run.step < int(spec["steps"]):
        losses.append(run.train_step())
    record.update(outside(run))
    record["losses"] = [float(loss) for loss in losses]
    record["final_file"] = str(work / f"{spec['label']}.from-{source['label']}.final.pt")
    torch.save(run.parameters_cpu(), record["final_file"])
    return record


def _samples(app: Any, batch: Any) -> int:
    return app.samples(batch) if app.samples else leading_dim(batch)


# --- recovery ---------------------------------------------------------------------------------


def recovery_job(context: Any) -> None:
    """Train to ``steps`` with a checkpoint every ``every`` steps, starting from
    the newest valid checkpoint in ``checkpoint_dir`` when there is one.  Each
    finished step is appended to ``step_log`` so the parent knows, after a
    SIGKILL, how far the dead worker got."""
    import torch

    job = context.job
    backend = context.backend
    result = context.result
    result["deterministic_algorithms"] = set_deterministic(backend)
    imported = import_app(context.app_spec, int(job["seed"]))
    folder = ensure_folder(job["checkpoint_dir"])
    steps, every = int(job["steps"]), int(job["every"])
    run = TrainingRun(imported, backend, dtype=job["dtype"], seed=job["seed"])
    result.update(outside(run))
    result["resumed_from"] = None
    if job.get("resume"):
        latest, skipped = newest_valid_checkpoint(folder)
        result["invalid_checkpoints"] = skipped
        if latest is not None:
            state = savefile.load(latest)
            run.skip_batches(int(state["step"]))
            run.load_state(state)
            result["not_restored"] = restore_rng(state["rng"], backend)
            result["resumed_from"] = {"path": str(latest), "step": run.step}
    context.progress("train", pid=os.getpid(), step=run.step)
    with open(job["step_log"], "a", encoding="utf-8") as log:
        while run.step < steps:
            run.train_step()
            if run.step % every == 0:
                backend.synchronize()
                savefile.save(run.checkpoint_state(), folder / f"step{run.step:06d}.ckpt")
            log.write(json.dumps({"step": run.step, "time": time.time(), "pid": os.getpid()}) + "\n")
            log.flush()
            context.progress("step", step=run.step, pid=os.getpid())
    backend.synchronize()
    result.update(outside(run))
    result["final_step"] = run.step
    result["final_file"] = job["final_file"]
    torch.save(run.parameters_cpu(), job["final_file"])


def newest_valid_checkpoint(folder: Path) -> tuple[Path | None, list[str]]:
    """The newest checkpoint that passes validation, and the reasons the newer
    ones did not."""
    skipped: list[str] = []
    for path in sorted(folder.glob("step*.ckpt"), reverse=True):
        try:
            savefile.validate(path)
            return path, skipped
        except savefile.CheckpointError as exc:
            skipped.append(str(exc))
    return None, skipped


# --- distributed ------------------------------------------------------------------------------


def ddp_job(context: Any) -> None:
    """One rank of a torchrun launch (or the single-process reference when
    WORLD_SIZE is unset): K steps under DistributedDataParallel, each rank on
    its slice of every global batch."""
    import torch
    import torch.distributed as dist

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    job = context.job
    if "WORLD_SIZE" in os.environ:  # launched by torchrun: one result file per rank
        job["output"] = str(Path(job["rank_dir"]) / f"rank{rank}.json")
    backend = context.backend
    result = context.result
    result.update({"rank": rank, "world_size": world, "local_rank": int(os.environ.get("LOCAL_RANK", "0"))})
    result["deterministic_algorithms"] = set_deterministic(backend)
    distributed = world > 1
    if distributed:
        context.progress("rendezvous")
        started = time.perf_counter()
        backend.init_process_group()
        result["init_process_group_s"] = time.perf_counter() - started
        result["process_group_backend"] = dist.get_backend()
        if backend.device_type == "cuda":
            # The worker set the backend up on the current device, which is
            # device 0 in every rank: give each rank its own GPU.
            torch.cuda.set_device(result["local_rank"])
            backend.setup()
    imported = import_app(context.app_spec, int(job["seed"]))
    app = imported.app
    run = TrainingRun(imported, backend, dtype=job["dtype"], seed=job["seed"])
    if distributed:
        from torch.nn.parallel import DistributedDataParallel

        device_ids = [backend.device.index] if backend.device_type == "cuda" else None
        # On a *-compile backend each rank compiles its DDP-wrapped model, as
        # PyTorch documents (wrap, then compile: Dynamo's DDPOptimizer splits
        # the graph at DDP's buckets), so compiled ranks are compared with the
        # compiled single process, like with like.
        run.trainable = backend.compile(DistributedDataParallel(run.model, device_ids=device_ids))
        run.shard = (rank, world)
    result["batchnorm_modules"] = [name for name, module in run.model.named_modules()
                                   if isinstance(module, torch.nn.modules.batchnorm._BatchNorm)]
    result["batchnorm_lines"] = {name: submodule_line(run.model, name) for name in result["batchnorm_modules"]}
    context.save()
    step_times = []
    losses = []
    for _ in range(int(job["steps"])):
        backend.synchronize()
        started = time.perf_counter()
        loss = run.train_step()
        backend.synchronize()
        step_times.append(time.perf_counter() - started)
        losses.append(loss)
    result["step_times_s"] = step_times
    result.update(outside(run))
    result["losses"] = [float(loss) for loss in losses]
    if backend.compile_backend is not None:
        from torchport import dynamo_counters

        # Evidence that this process ran compiled code, not only that it asked to.
        result["frames_compiled"] = dynamo_counters.snapshot().get("frames_ok")
    result["samples_per_step"] = _samples(app, run.first_batch())
    if rank == 0:
        result["final_file"] = str(Path(job["rank_dir"]) / f"world{world}.final.pt")
        torch.save(run.parameters_cpu(), result["final_file"])
    if distributed:
        # After the training steps and the saved parameters: what each rank's
        # own forward and backward runs, for a divergence's cause.
        context.progress("op sequence")
        result["op_sequence"] = op_sequence(run)
        dist.barrier()
        dist.destroy_process_group()
