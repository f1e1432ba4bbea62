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
from torchport.records import (CheckpointSource, DdpWorker, ErrorRecord, RecoveryWorker, ResumedFrom, ResumedRun,
                               RunTiming, SavedCheckpoint, TrainedRun, TrainSpec)


def set_deterministic(backend: Any) -> bool:
    """Deterministic kernels and a fixed thread count where the device is the
    CPU: the determinism precheck and bit-exact recovery rely on them.  Other
    devices run with their defaults, as the migrated app would."""
    import torch

    if backend.device_type != "cpu":
        return False
    torch.use_deterministic_algorithms(True, warn_only=True)
    # MKL may run a call on fewer threads than it was given (MKL_DYNAMIC, on by
    # default), and a product split another way rounds another way: Intel's
    # reproducibility conditions for oneMKL ask for it off.  at::set_num_threads
    # turns it off (mkl_set_dynamic(false)) and keeps the count torch has.  It
    # costs small CPU steps a few percent (see worker.apply_threads), which the
    # checks' figures, unlike the benchmark's, can afford.
    torch.set_num_threads(torch.get_num_threads())
    settle_vector_math(torch)
    return True


# Elements per intra-op thread for the settling calls: ATen's minimum task size
# (at::internal::GRAIN_SIZE), so at::parallel_for splits a tensor of this many
# elements per thread into one chunk for each thread of the pool.
_ELEMENTS_PER_THREAD = 32768


def settle_vector_math(torch: Any) -> None:
    """Make one call into MKL's vector math (VML: torch's sqrt, exp, log,
    tanh, erf, ... of contiguous float tensors) on every thread of the
    intra-op pool before the app runs.  Measured on the 2-core machines: when
    a thread's first VML call comes after MKL matrix products, it sometimes
    rounds differently from every later call (AdamW's first sqrt then differed
    in one thread's half of a parameter, and two identical runs of a clean app
    in one worker differed from step 2: 8 of 20 fresh processes of the clean
    control's model on an idle machine); once a thread has made any VML call,
    before or after a product, its later calls agree (0 of 20 with this call;
    tests/test_check_determinism.py).  The cause inside MKL is not known, so
    both functions AdamW and common activations use are called, in both float
    types.  Threads the app starts itself, or adds with a larger
    set_num_threads, are not covered."""
    for dtype in (torch.float32, torch.float64):
        values = torch.ones(_ELEMENTS_PER_THREAD * torch.get_num_threads(), dtype=dtype)
        torch.exp(values)
        torch.sqrt(values)


def train_job(context: Any) -> None:
    """Train each run in ``job["runs"]`` (``TrainSpec``), optionally time the data pipeline,
    then, for each checkpoint in ``job["resume"]`` (``CheckpointSource``), load it into a fresh run
    built as its ``into`` spec (default ``job["resume_spec"]``) says and train
    on to that run's last step.  ``result["resumed"][into][source]``."""
    job = context.job
    work = ensure_folder(job["work_dir"])
    backend = context.backend
    result = context.result  # the job's keys go to the run record's ``extra``
    result.put(deterministic_algorithms=set_deterministic(backend))
    # The job's JSON read into records once, here.
    runs = [TrainSpec.from_dict(spec) for spec in job["runs"]]
    sources = [CheckpointSource.from_dict(source) for source in job.get("resume", [])]
    resume_spec = TrainSpec.from_dict(job["resume_spec"]) if job.get("resume_spec") else None
    # Seed, then import (the engine's fixed order); every run below is built from here.
    imported = import_app(context.app_spec, runs[0].seed if runs else int(job.get("seed", 0)))
    app = imported.app
    runs_trained: dict[str, dict] = {}
    result.put(app_has={"predict": app.predict is not None, "metric": app.metric is not None}, runs=runs_trained)
    for spec in runs:
        context.progress(f"train:{spec.label}")
        if spec.dtype == "float64":
            # The ground truth is torchport's construction, not the app: its failure is
            # recorded for parity to report, and the app's own runs go on.
            try:
                trained = train_run(imported, backend, spec, work, context)
            except Exception as exc:  # noqa: BLE001  any failure of the float64 build is reported as such
                trained = TrainedRun(dtype="float64", error=ErrorRecord.from_dict(failures.record(exc)))
        else:
            trained = train_run(imported, backend, spec, work, context)
        runs_trained[spec.label] = trained.to_dict()
        context.save()
    resumed_runs: dict[str, dict] = {}
    result.put(resumed=resumed_runs)
    for source in sources:
        into = source.into or resume_spec
        assert into is not None, "a resume names the run it resumes into, or the job has a resume_spec"
        context.progress(f"resume:{source.label}->{into.label}")
        resumed = resume_run(imported, backend, into, source, work)
        resumed_runs.setdefault(into.label, {})[source.label] = resumed.to_dict()
        context.save()


def train_run(imported: ImportedApp, backend: Any, spec: TrainSpec, work: Path, context: Any) -> TrainedRun:
    import torch

    app = imported.app

    label, steps = spec.label, spec.steps
    record = TrainedRun(dtype=spec.dtype, steps=steps)
    run = TrainingRun(imported, backend, dtype=spec.dtype, seed=spec.seed, eager=spec.eager)
    use_predict = spec.outputs and app.predict is not None and spec.app_inference
    if use_predict:
        output = run.predict_output()
        record.output_source = "predict(model, first batch), before training"
    else:
        output = None
    modules, remove_hooks = record_module_outputs(run.model) if spec.modules else ({}, lambda: None)
    first_output: list[Any] = []
    top_hook = None
    if spec.outputs and not use_predict:
        def keep_first_output(module: Any, inputs: Any, out: Any) -> None:  # returns None: leaves the output alone
            if not first_output:
                first_output.append(as_float64(out))

        top_hook = run.model.register_forward_hook(keep_first_output)
        record.output_source = "model output in training step 1 (forward hook)"

    def keep_gradient_norms() -> None:
        record.grad_norms = run.gradient_norms()

    losses = [run.train_step(after_backward=keep_gradient_norms)]
    remove_hooks()
    if top_hook is not None:
        top_hook.remove()
        output = first_output[0] if first_output else None
    if output is not None:
        record.output_file = str(work / f"{label}.output.pt")
        torch.save(output, record.output_file)
    if spec.modules:
        record.modules = list(modules)
        record.module_types = {name or "(top)": type(module).__name__ for name, module in run.model.named_modules()}
        record.modules_file = str(work / f"{label}.modules.pt")
        torch.save(modules, record.modules_file)
    if spec.checkpoint_step == 1:
        record.checkpoint = write_checkpoint(run, work / f"{label}.ckpt")

    backend.synchronize()
    wait_before, saving_s = run.data_wait_s, 0.0
    started = time.perf_counter()
    for step in range(2, steps + 1):
        losses.append(run.train_step())
        if step == spec.checkpoint_step:
            backend.synchronize()
            save_started = time.perf_counter()
            record.checkpoint = write_checkpoint(run, work / f"{label}.ckpt")
            saving_s += time.perf_counter() - save_started
    backend.synchronize()
    elapsed = time.perf_counter() - started - saving_s
    if steps > 1:
        record.timing = RunTiming(steps=steps - 1, seconds=elapsed, step_s=elapsed / (steps - 1),
                                  data_wait_s=run.data_wait_s - wait_before,
                                  samples_per_step=_samples(app, run.first_batch()))
    record.losses = [float(loss) for loss in losses]
    # The metric and predict run the model in eval mode without gradients: one
    # more graph for a compiling backend to build, which the evaluate stage skips.
    record.metric = run.metric() if spec.app_inference else None
    record.metric_higher_is_better = app.metric_higher_is_better
    if run.hold is not None:
        record.casts_held = run.hold.casts_held
    if spec.save_final:
        record.final_file = str(work / f"{label}.final.pt")
        torch.save(run.parameters_cpu(), record.final_file)
    if spec.pipeline:  # last: its steps change the model after everything above was read
        context.progress(f"pipeline:{label}")
        record.pipeline = pipeline.measure(run, per_round=spec.pipeline_per_round or pipeline.PER_ROUND)
    return record


def write_checkpoint(run: TrainingRun, path: Path) -> SavedCheckpoint:
    found = run.outside_state()
    record = SavedCheckpoint(path=str(path), step=run.step, outside_state_dict=[item.name for item in found],
                             outside_state=found)
    try:
        written = savefile.save(run.checkpoint_state(), path)
    except savefile.CheckpointError as exc:
        record.error = str(exc)
        return record
    record.bytes, record.sha256 = written.bytes, written.sha256
    return record


def resume_run(imported: ImportedApp, backend: Any, spec: TrainSpec, source: CheckpointSource,
               work: Path) -> ResumedRun:
    """A fresh run of this backend, loaded from another run's checkpoint and
    trained to the same final step as ``spec``."""
    import torch

    record = ResumedRun(path=source.path)
    try:
        state = savefile.load(source.path)
    except savefile.CheckpointError as exc:
        record.error = str(exc)
        return record
    run = TrainingRun(imported, backend, dtype=spec.dtype, seed=spec.seed, eager=spec.eager)
    run.skip_batches(int(state["step"]))
    try:
        record.changed_on_load = run.load_state(state)
    except Exception as exc:  # a state that does not fit this model is the finding, not a crash
        record.error = f"the checkpoint does not load on {backend.name}: {getattr(exc, 'message', exc)}"
        return record
    record.not_restored = restore_rng(state["rng"], backend)
    record.start_step = run.step
    losses = []
    while run.step < spec.steps:
        losses.append(run.train_step())
    found = run.outside_state()
    record.outside_state_dict, record.outside_state = [item.name for item in found], found
    record.losses = [float(loss) for loss in losses]
    record.final_file = str(work / f"{spec.label}.from-{source.label}.final.pt")
    torch.save(run.parameters_cpu(), record.final_file)
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
    record = RecoveryWorker(deterministic_algorithms=set_deterministic(backend))
    imported = import_app(context.app_spec, int(job["seed"]))
    folder = ensure_folder(job["checkpoint_dir"])
    steps, every = int(job["steps"]), int(job["every"])
    run = TrainingRun(imported, backend, dtype=job["dtype"], seed=job["seed"])
    record.outside_state = run.outside_state()
    record.outside_state_dict = [item.name for item in record.outside_state]
    if job.get("resume"):
        latest, record.invalid_checkpoints = newest_valid_checkpoint(folder)
        if latest is not None:
            state = savefile.load(latest)
            run.skip_batches(int(state["step"]))
            run.load_state(state)
            record.not_restored = restore_rng(state["rng"], backend)
            record.resumed_from = ResumedFrom(path=str(latest), step=run.step)
    context.result.put(**record.to_dict())
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
    record.outside_state = run.outside_state()
    record.outside_state_dict = [item.name for item in record.outside_state]
    record.final_step, record.final_file = run.step, job["final_file"]
    torch.save(run.parameters_cpu(), job["final_file"])
    context.result.put(**record.to_dict())


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
    record = DdpWorker(rank=rank, world_size=world, local_rank=int(os.environ.get("LOCAL_RANK", "0")),
                       deterministic_algorithms=set_deterministic(backend))
    distributed = world > 1
    if distributed:
        context.progress("rendezvous")
        started = time.perf_counter()
        backend.init_process_group()
        record.init_process_group_s = time.perf_counter() - started
        record.process_group_backend = dist.get_backend()
        if backend.device_type == "cuda":
            # The worker set the backend up on the current device, which is
            # device 0 in every rank: give each rank its own GPU.
            torch.cuda.set_device(record.local_rank)
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
    record.batchnorm_modules = [name for name, module in run.model.named_modules()
                                if isinstance(module, torch.nn.modules.batchnorm._BatchNorm)]
    record.batchnorm_lines = {name: submodule_line(run.model, name) for name in record.batchnorm_modules}
    context.result.put(**record.to_dict())
    context.save()
    losses = []
    for _ in range(int(job["steps"])):
        backend.synchronize()
        started = time.perf_counter()
        loss = run.train_step()
        backend.synchronize()
        record.step_times_s.append(time.perf_counter() - started)
        losses.append(loss)
    record.outside_state = run.outside_state()
    record.outside_state_dict = [item.name for item in record.outside_state]
    record.losses = [float(loss) for loss in losses]
    if backend.compile_backend is not None:
        from torchport import dynamo_counters

        # Evidence that this process ran compiled code, not only that it asked to.
        record.frames_compiled = dynamo_counters.snapshot().get("frames_ok")
    record.samples_per_step = _samples(app, run.first_batch())
    if rank == 0:
        record.final_file = str(Path(job["rank_dir"]) / f"world{world}.final.pt")
        torch.save(run.parameters_cpu(), record.final_file)
    if distributed:
        # After the training steps and the saved parameters: what each rank's
        # own forward and backward runs, for a divergence's cause.
        context.progress("op sequence")
        record.op_sequence = op_sequence(run)
    context.result.put(**record.to_dict())
    if distributed:
        dist.barrier()
        dist.destroy_process_group()
