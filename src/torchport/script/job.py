"""The worker side of script mode.

The script runs in the worker's main thread (its signal handlers, its
``__main__``); the timing protocol runs in a second thread and drives it one
step at a time.  The two hand over control at step boundaries, so exactly
one of them runs at any moment:

* a step boundary is the pre-step hook of the first optimizer the script
  steps (one iteration of a GAN's two optimizers is one step: from one step of
  the first optimizer to the next), so a step is [the previous optimizer
  step(s)] + [data, forward, backward];
* the first step runs freely: from the script's first data fetch or first
  forward to the first boundary (init is everything before that);
* afterwards the protocol asks for each step (``ScriptDriver.step``), times
  blocks between the backend's synchronizations, reads the losses (the
  scalars handed to ``backward()``, kept on the device) outside the blocks,
  and when its budget is spent stops the script from the hook
  (``StopScript``, which ``except Exception`` in the script does not catch).

Runs on every torch a backend environment holds (2.9 and newer).
"""
from __future__ import annotations

import contextlib
import os
import runpy
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Iterator

from torchport.engine import seed_everything
from torchport.errors import UserError
from torchport.protocol import (
    Block,
    ProtocolConfig,
    config_hash,
    Scenario,
    host_peak_rss_bytes,
    record_first_step,
    run_warmup_and_sustained,
)
from torchport.records import (
    AutocastRegion,
    EffectiveConfig,
    ErrorKind,
    GradScalerSite,
    MachineLoad,
    ModelFacts,
    ScenarioSamples,
)

CUDA_HINT = ("the script uses CUDA, which this backend does not have: pass the device in its arguments "
             "(-- --device={device}) or run with --redirect-cuda")


class StopScript(BaseException):
    """Raised inside the script (from the optimizer hook) once torchport has
    measured what it needs: a BaseException, so the script's own
    ``except Exception`` handlers let it through."""


class ScriptEnded(Exception):
    """The script finished (or exited) before the protocol's budget."""


# {compile} in the spellings real argument parsers accept: argparse's str flags
# compared with "true", Python-literal configurators (True/False), int flags (1/0).
COMPILE_SPELLINGS = {"{compile}": ("true", "false"), "{compile:py}": ("True", "False"), "{compile:01}": ("1", "0")}


def fill_placeholders(argument: str, backend: Any) -> str:
    for placeholder, (yes, no) in COMPILE_SPELLINGS.items():
        argument = argument.replace(placeholder, yes if backend.compile_backend else no)
    return argument.replace("{device}", str(backend.device)).replace("{backend}", backend.name)


def _leading_dim(value: Any) -> int | None:
    import torch

    if isinstance(value, torch.Tensor):
        return int(value.shape[0]) if value.dim() else None
    if isinstance(value, (list, tuple)):
        for item in value:
            found = _leading_dim(item)
            if found is not None:
                return found
    if isinstance(value, dict):
        for item in value.values():
            found = _leading_dim(item)
            if found is not None:
                return found
    return None


class ScriptDriver:
    """The hooks inside the script and the hand-over to the protocol thread."""

    def __init__(self, backend: Any, script: Path):
        self.backend = backend
        self.script = str(script)
        self._go = threading.Semaphore(0)  # protocol -> script: run one more step
        self._done = threading.Semaphore(0)  # script -> protocol: a boundary (or the end) was reached
        self.started = time.perf_counter()
        self.first_activity: float | None = None
        self.first_boundary: float | None = None
        self.boundaries = 0
        self.stopping = False
        self.allowance = 1  # steps the script may run before it hands control back (the first: one)
        self.finished_steps: list[tuple[Any, float, int, int | None]] = []
        self.ended: str | None = None  # why the script is no longer running, once it is not
        self.boundary_optimizer: int | None = None
        self.optimizers: dict[int, str] = {}
        self.parameters: dict[int, int] = {}
        self.parameter_devices: set[str] = set()
        self.last_loss: Any = None
        self.waited = 0.0
        self.samples: int | None = None
        self.first_step_waited = 0.0
        self.compiled_by_script: list[str] = []
        self.autocasts: dict[str, AutocastRegion] = {}  # per user line: what autocast region it opened
        self.scalers: dict[str, GradScalerSite] = {}  # per user line: the GradScaler made there
        self.model: Any = None
        self.moves: dict[int, str] = {}  # id(module) -> the user's line that moved it (Module.to)
        self.process_groups: list[str] = []  # where the script created a process group (torchrun's stage)
        self._scaled: Any = None  # the last loss a GradScaler scaled (its backward is not the user's loss)
        self._handles: list[Any] = []
        self._restore: list[tuple[Any, str, Any]] = []

    # ---- hooks installed into torch ------------------------------------------------------
    def install(self) -> None:
        import torch
        import torch.utils.data.dataloader as dataloader_module
        from torch.optim.optimizer import register_optimizer_step_pre_hook

        self._handles.append(register_optimizer_step_pre_hook(self._on_optimizer_step))
        self._handles.append(torch.nn.modules.module.register_module_forward_pre_hook(self._on_first_forward))
        driver = self

        original_backward = torch.Tensor.backward

        def backward(tensor, *args, **kwargs):
            if tensor.dim() == 0 and tensor is not driver._scaled:
                driver.last_loss = tensor.detach()
            return original_backward(tensor, *args, **kwargs)

        self._patch(torch.Tensor, "backward", backward)

        # The loss as the user means it: a GradScaler's scale(loss) multiplies it by the scale
        # (65536 at first), so the scalar handed to backward() is not the loss.
        from torch.amp.grad_scaler import GradScaler

        original_scale = GradScaler.scale

        def scale(scaler, outputs, *args, **kwargs):
            scaled = original_scale(scaler, outputs, *args, **kwargs)
            if isinstance(outputs, torch.Tensor) and outputs.dim() == 0:
                driver.last_loss = outputs.detach()
                driver._scaled = scaled
            return scaled

        self._patch(GradScaler, "scale", scale)
        original_scaler_init = GradScaler.__init__

        def scaler_init(scaler, *args, **kwargs):
            original_scaler_init(scaler, *args, **kwargs)
            where = _caller_line()
            if where is not None:
                driver.scalers[where] = GradScalerSite(location=where, device=str(getattr(scaler, "_device", "?")),
                                                       enabled=bool(scaler.is_enabled()))

        self._patch(GradScaler, "__init__", scaler_init)

        original_module_to = torch.nn.Module.to

        def module_to(module, *args, **kwargs):
            where = _caller_line()
            if where is not None:
                driver.moves.setdefault(id(module), where)
            return original_module_to(module, *args, **kwargs)

        self._patch(torch.nn.Module, "to", module_to)

        import torch.distributed as dist

        original_init_process_group = dist.init_process_group

        def init_process_group(*args, **kwargs):
            driver.process_groups.append(_caller_line() or _innermost_user_line() or "?")
            return original_init_process_group(*args, **kwargs)

        self._patch(dist, "init_process_group", init_process_group)

        from torch.amp.autocast_mode import autocast as autocast_class

        original_autocast_init = autocast_class.__init__

        def autocast_init(context, *args, **kwargs):
            requested = kwargs.get("device_type", args[0] if args else None)
            original_autocast_init(context, *args, **kwargs)
            where = _caller_line()
            if where is not None and where not in driver.autocasts:
                enabled = bool(getattr(context, "_enabled", True))
                asked = getattr(context, "_torchport_requested", requested)
                device_type = getattr(context, "device", requested)
                driver.autocasts[where] = AutocastRegion(
                    location=where, requested_device_type=None if asked is None else str(asked),
                    device_type=None if device_type is None else str(device_type),
                    dtype=str(getattr(context, "fast_dtype", "")).replace("torch.", "") if enabled else "float32",
                    enabled=enabled)

        self._patch(autocast_class, "__init__", autocast_init)

        original_next = dataloader_module._BaseDataLoaderIter.__next__

        def timed_next(iterator):
            started = time.perf_counter()
            if driver.first_activity is None:
                driver.first_activity = started
            batch = original_next(iterator)
            driver.waited += time.perf_counter() - started
            driver.samples = _leading_dim(batch)
            return batch

        self._patch(dataloader_module._BaseDataLoaderIter, "__next__", timed_next)

        original_compile = torch.compile

        def compile_(*args, **kwargs):
            driver.compiled_by_script.append(_innermost_user_line() or "?")
            return original_compile(*args, **kwargs)

        self._patch(torch, "compile", compile_)

    def _patch(self, owner: Any, name: str, replacement: Any) -> None:
        self._restore.append((owner, name, getattr(owner, name)))
        setattr(owner, name, replacement)

    def uninstall(self) -> None:
        for handle in self._handles:
            handle.remove()
        for owner, name, original in reversed(self._restore):
            setattr(owner, name, original)

    def _on_first_forward(self, module: Any, inputs: Any) -> None:
        if self.model is None:
            self.model = module  # the first module called is the outermost: the script's model
        if self.first_activity is None:
            self.first_activity = time.perf_counter()
        if self.samples is None:
            self.samples = _leading_dim(inputs)
        if self.samples is not None:
            self._handles[1].remove()  # the first forward says all this hook is for

    def _on_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if self.stopping:
            raise StopScript  # again: a script that swallowed it (a bare except) is stopped at its next step
        key = id(optimizer)
        self.optimizers.setdefault(key, type(optimizer).__name__)
        if key not in self.parameters:
            self.parameters[key] = sum(p.numel() for group in optimizer.param_groups for p in group["params"])
            self.parameter_devices.update(p.device.type for group in optimizer.param_groups for p in group["params"])
        if self.boundary_optimizer is None:
            self.boundary_optimizer = key
        elif key != self.boundary_optimizer:
            return
        self.backend.after_step()
        if self.boundaries == 0:
            self.backend.synchronize()
            self.first_boundary = time.perf_counter()
            self.first_step_waited = self.waited
        else:
            self.finished_steps.append((self.last_loss, self.waited, self.samples or 1, None))
            self.waited = 0.0
        self.boundaries += 1
        self.allowance -= 1
        if self.allowance > 0:
            return  # more steps of the same block: no hand-over
        self._done.release()
        self._go.acquire()
        if self.stopping:
            raise StopScript

    # ---- the protocol thread's side -------------------------------------------------------
    def wait_first_step(self) -> None:
        self._done.acquire()
        if self.ended is not None and self.first_boundary is None:
            raise ScriptEnded(self.ended)

    def run_steps(self, count: int) -> list[tuple[Any, float, int, int | None]]:
        """Let the script run ``count`` steps, then take control back: one
        hand-over per timed block (a hand-over per step cost ~3% of a 7.8 ms step)."""
        if self.ended is not None:
            raise ScriptEnded(self.ended)
        self.finished_steps = []
        self.waited = 0.0
        self.allowance = count
        self._go.release()
        self._done.acquire()
        if self.ended is not None:
            raise ScriptEnded(self.ended)
        return self.finished_steps

    def stop(self) -> None:
        self.stopping = True
        self._go.release()

    def script_finished(self, why: str) -> None:
        """Called in the script's thread when it is no longer running."""
        self.ended = why
        self._done.release()


def argument_parser_error(exc: SystemExit) -> str | None:
    """``PROG: error: MESSAGE`` when the exit came from an argparse parser
    refusing its arguments (what argparse printed to the worker's stderr)."""
    frame = exc.__traceback__
    found = None
    while frame is not None:
        code = frame.tb_frame.f_code
        if code.co_name == "error" and os.path.basename(code.co_filename) == "argparse.py":
            found = frame.tb_frame.f_locals
        frame = frame.tb_next
    if found is None or exc.code != 2:
        return None
    parser = found.get("self")
    return f"{getattr(parser, 'prog', 'script')}: error: {found.get('message')}"


@contextlib.contextmanager
def running_as_main(script: Path, argv: list[str], cwd: str | None) -> Iterator[None]:
    """The script's own sys.argv, sys.path[0] and working directory, restored after."""
    saved = (list(sys.argv), os.getcwd(), list(sys.path))
    sys.argv = argv
    sys.path.insert(0, str(script.parent))
    os.chdir(cwd or script.parent)
    try:
        yield
    finally:
        sys.argv, sys.path[:] = saved[0], saved[2]
        os.chdir(saved[1])


class ScriptScenario(Scenario):
    """The protocol's training scenario, with whole blocks run by the script."""

    def __init__(self, driver: ScriptDriver, backend: Any, check_value: Any, turn: Any = None):
        super().__init__("training", lambda: driver.run_steps(1)[0], backend, check_value, turn)
        self.driver = driver

    def steps(self, count: int) -> list[tuple[Any, float, int, int | None]]:
        return self.driver.run_steps(count)


def _caller_line() -> str | None:
    """The user's file:line that called into a patched entry point (as the redirects decide it)."""
    from torchport.script.redirect import user_line

    return user_line()


def _innermost_user_line() -> str | None:
    """file:line of the innermost frame of the user's code on the current stack."""
    from torchport.app import is_user_file

    found = None
    for frame in traceback.extract_stack()[:-1]:
        if is_user_file(frame.filename):
            found = f"{frame.filename}:{frame.lineno}"
    return found


def script_job(context: Any) -> None:
    """Worker entry point for ``torchport evaluate --script``."""
    from torchport.script import evidence, redirect

    job = context.job
    backend = context.backend
    result = context.result
    if "WORLD_SIZE" in os.environ and job.get("rank_dir"):  # one rank of a torchrun launch: a result file each
        rank = int(os.environ.get("RANK", "0"))
        job["output"] = str(Path(job["rank_dir"]) / f"rank{rank}.json")
        result.put(rank=rank, world_size=int(os.environ["WORLD_SIZE"]))
    config = ProtocolConfig.from_dict(context.config)
    script = Path(job["script"]).resolve()
    argv = [str(script), *(fill_placeholders(arg, backend) for arg in job.get("script_args", []))]
    os.environ["TORCHPORT_DEVICE"] = str(backend.device)
    # What script mode found (RunRecord.script): filled as the script runs.
    script_facts: dict[str, Any] = {
        "path": str(script), "argv": argv[1:], "redirect_cuda": bool(job.get("redirect_cuda")),
        "loss_source": "the scalar passed to backward() last before each step boundary"}
    result.put(script=script_facts)
    seed_everything(config.seed)
    from torchport.script import usercode

    usercode.set_script(str(script))
    usercode.library_roots()  # read the installed distributions now, not inside the script's first step
    script_facts["machine_load"] = machine_load().to_dict()
    driver = ScriptDriver(backend, script)
    redirects = redirect.Redirects(backend, str(script)) if job.get("redirect_cuda") else None
    outcome = ProtocolOutcome()
    protocol = threading.Thread(target=_measure, args=(driver, config, context, outcome), name="torchport-protocol",
                                daemon=True)
    driver.install()
    if redirects is not None:
        redirects.install()
    context.progress("init")
    if backend.compile_backend is not None:
        from torchport import dynamo_counters

        # Here, in the main thread: the protocol thread's first counter
        # snapshot must not import torch._dynamo while the script imports it.
        dynamo_counters.start()
    counters_before = backend.counters()
    protocol.start()
    script_error: BaseException | None = None
    refused: str | None = None
    stopped = False
    with running_as_main(script, argv, job.get("cwd")):
        try:
            runpy.run_path(str(script), run_name="__main__")
            driver.script_finished("the script ended by itself")
        except StopScript:
            stopped = True
        except SystemExit as exc:
            refused = argument_parser_error(exc)
            driver.script_finished(f"the script called sys.exit({exc.code!r})")
        except BaseException as exc:  # the script's own error: this backend's result
            script_error = exc
            driver.script_finished("the script raised")
    protocol.join()
    counters_after = backend.counters()
    if redirects is not None:  # installed last, undone first
        redirects.uninstall()
        script_facts["redirects"] = [fired.to_dict() for fired in redirects.fired()]
        if redirects.cpu_bfloat16 is not None:
            script_facts["cpu_bfloat16"] = redirects.cpu_bfloat16.to_dict()
    driver.uninstall()
    script_facts["compiled_by_script"] = driver.compiled_by_script
    script_facts["autocast"] = list(driver.autocasts.values())
    script_facts["process_groups"] = driver.process_groups
    script_facts["user_files"] = user_files(script)
    script_facts["machine_load"]["end"] = machine_load().start
    script_facts["grad_scalers"] = list(driver.scalers.values())
    if driver.scalers:
        script_facts["loss_source"] = ("the loss passed to GradScaler.scale() (unscaled), else the scalar passed "
                                           "to backward(), last before each step boundary")
    script_facts["optimizers"] = sorted(set(driver.optimizers.values()))
    script_facts["steps_seen"] = driver.boundaries
    script_facts["stopped_by_torchport"] = stopped
    script_facts["ran_s"] = time.perf_counter() - driver.started
    if driver.first_activity is not None:
        context.record_phase("init_s", driver.first_activity - driver.started)
    if script_error is not None:
        error = _with_hint(script_error)
        if driver.boundaries == 0 and isinstance(error, UserError) and argv[1:]:
            # Raised before its first step, often by its own argument parsing: show what it was given.
            error.message = f"{error.message} (its arguments, filled in: {' '.join(argv[1:])[:300]})"
        raise error
    if outcome.error is not None:
        raise outcome.error
    if refused is not None and driver.boundaries == 0:
        raise UserError(f"the script's argument parser refused its arguments: {refused} (arguments after `--` "
                        f"are the script's: {' '.join(argv[1:])[:200] or 'none given'})", location=str(script))
    if driver.boundaries == 0:
        raise UserError(f"no optimizer step was seen: {driver.ended} after {script_facts['ran_s']:.1f} s "
                        f"without calling optimizer.step() (its arguments, filled in: {' '.join(argv[1:])[:300]})",
                        location=str(script))
    if not stopped:
        raise UserError(f"{driver.ended} after {driver.boundaries} optimizer step(s), before torchport's budget "
                        f"(1 + up to {config.max_warmup_steps} warm-up + {config.steps} sustained steps); what was "
                        "measured is kept: give the script more steps or lower --steps/--max-warmup",
                        location=str(script))
    model = model_facts(driver.model, driver.moves)
    script_facts["model"] = model.to_dict() if model else None
    memory = backend.device_memory()
    result.put(memory=memory, host_peak_rss_bytes=host_peak_rss_bytes())
    found = evidence.collect(backend, counters_before, counters_after, driver.parameter_devices, memory)
    script_facts["evidence"] = found.to_dict()
    parameters = sum(driver.parameters.values())
    effective = EffectiveConfig(key_order=()).put(
        script=str(script), args=job.get("script_args", []), protocol=config.as_dict(), parameters=parameters,
        optimizers=script_facts["optimizers"], redirect_cuda=bool(job.get("redirect_cuda")))
    result.put(config=effective, config_hash=config_hash(effective))
    if not found.ran_on_device:
        # What was measured is kept in the run, but it is not this backend's: the run is not "ok".
        raise UserError(found.why or "", location=str(script), kind=ErrorKind.NOT_ON_DEVICE)


def user_files(script: Path) -> list[str]:
    """The script's import closure among the user's files: the modules its
    own ``import`` statements name (and theirs, transitively) that are loaded
    and are not a library's.  Files torch generates and imports itself are
    not the user's even when they are outside every library."""
    import ast

    from torchport.script.usercode import is_user_file

    closure = {os.path.realpath(script)}
    queue: list[tuple[str, str | None]] = [(str(script), None)]
    while queue:
        path, package = queue.pop()
        try:
            tree = ast.parse(Path(path).read_text(encoding="utf-8", errors="replace"))
        except (OSError, SyntaxError, ValueError):
            continue
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    names.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = (package or "").split(".")
                    anchor = anchor[:len(anchor) - node.level + 1] if node.level > 1 else anchor
                    base = ".".join(part for part in [*anchor, base] if part)
                parts = base.split(".") if base else []
                names.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
                names.update(f"{base}.{alias.name}" if base else alias.name for alias in node.names)
        for name in names:
            module = sys.modules.get(name)
            filename = getattr(module, "__file__", None)
            if not isinstance(filename, str) or not filename.endswith(".py") or not is_user_file(filename):
                continue
            resolved = os.path.realpath(filename)
            if resolved not in closure:
                closure.add(resolved)
                spec = getattr(module, "__spec__", None)
                queue.append((resolved, name if getattr(spec, "submodule_search_locations", None) else
                              getattr(module, "__package__", None)))
    return sorted(closure)


def machine_load() -> MachineLoad:
    """The machine's 1-minute load average and CPU count now (``start``; a run records ``end`` too): a
    speed measured while other work loads the machine is flagged (torchport.script.report)."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average on this platform
        return MachineLoad(start=None, cpus=os.cpu_count())
    return MachineLoad(start=round(load, 2), cpus=os.cpu_count())


def model_facts(model: Any, moves: dict[int, str]) -> ModelFacts | None:
    """The script's model as it trained on this backend: parameter tensors and
    elements, the parameters that share one tensor (tied weights), dtypes,
    buffers, and the user's line that moved it to the device."""
    if model is None:
        return None
    names: dict[int, list[str]] = {}
    sizes: dict[int, int] = {}
    for name, parameter in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(parameter), []).append(name)
        sizes[id(parameter)] = parameter.numel()
    return ModelFacts(type=type(model).__name__, parameter_tensors=len(names), parameters=sum(sizes.values()),
                      tied=[group for group in names.values() if len(group) > 1],
                      dtypes=sorted({str(p.dtype).replace("torch.", "") for p in model.parameters()}),
                      buffers=sorted(name for name, _ in model.named_buffers()),
                      moved_at=moves.get(id(model)))


def _with_hint(error: BaseException) -> BaseException:
    text = str(error)
    if any(marker in text for marker in ("CUDA", "cuda", "NVIDIA driver", "nccl")) and not isinstance(error, UserError):
        from torchport.app import user_location

        return UserError(f"{type(error).__name__}: {text.splitlines()[0] if text else ''} ({CUDA_HINT})",
                         location=user_location(error), kind="unsupported-op", original=error)
    if isinstance(error, UserError):
        return error
    from torchport.app import user_error_from

    return user_error_from(error, "the script raised")


@dataclass
class ProtocolOutcome:
    """What the protocol thread hands the script's thread: the error that ended it, if one did."""

    error: BaseException | None = None


def _measure(driver: ScriptDriver, config: ProtocolConfig, context: Any, outcome: ProtocolOutcome) -> None:
    """The protocol thread: first step from the hooks, then warm-up and sustained blocks."""
    backend = driver.backend
    record = ScenarioSamples(key_order=())  # written in the order its keys are set
    try:
        counters_start = backend.counters()
        driver.wait_first_step()
        assert driver.first_boundary is not None, "wait_first_step returns once the first step ended"
        context.progress("training:first_step")
        first_started = driver.first_activity if driver.first_activity is not None else driver.started
        first = Block(driver.first_boundary - first_started, 1, driver.first_step_waited, driver.samples or 1, None,
                      [float(driver.last_loss)] if driver.last_loss is not None else None,
                      backend.new_compilations(counters_start, backend.counters()))
        record_first_step(record, first, backend.summarize_counters(counters_start, backend.counters()))
        context.result.put(training=record)
        context.save()

        def check_loss(value: float, step: int) -> None:
            import math

            if not math.isfinite(value):
                raise UserError(f"the loss is {value} at training step {step} on {backend.name}",
                                location=driver.script, kind="numerical")

        scenario = ScriptScenario(driver, backend, check_loss, getattr(context, "take_turn", None))
        scenario.steps_done = 1
        from torchport.sampling import from_job

        # With a time budget the parent's plan gives this run a deadline (the job's "budget" entry).  Never
        # more sustained blocks than configured: a script whose loop held the fixed protocol still does.
        sampling, _ = from_job(config, context.budget, backend.name, context.started, has_inference=False,
                               max_block_factor=1)
        run_warmup_and_sustained(scenario, config, backend, context.progress, record, context.save, sampling)
    except ScriptEnded:
        pass  # the script's thread reports why
    except BaseException as exc:
        outcome.error = exc
    finally:
        driver.stop()


# --- tracing the script's first steps --------------------------------------------------------


class ScriptTracer:
    """Script mode's op trace: the first ``steps`` steps of the script under
    torchport's OpTracer, step by step at the same boundaries, with phases from
    the same hooks (data from the DataLoader, backward from ``backward()``, the
    optimizer between its pre- and post-step hooks)."""

    def __init__(self, steps: int, checkpoint: Any):
        from torchport.trace.tracer import OpTracer

        self.steps = steps
        self.tracer = OpTracer(None, {}, checkpoint=checkpoint)
        self.tracer.cpu_is_the_device = True
        self.tracer.library_phases = {"optimizer"}
        self.index = 0
        self._step_context: Any = None
        self.model_seen = False
        self.boundary_optimizer: int | None = None  # id() of the first optimizer stepped: its steps are the boundaries

    def begin_step(self) -> None:
        self.index += 1
        self._step_context = self.tracer.step(self.index)
        self._step_context.__enter__()
        self.tracer.phase = "loss"

    def end_step(self) -> None:
        if self._step_context is not None:
            self._step_context.__exit__(None, None, None)
            self._step_context = None


def script_trace_job(context: Any) -> None:
    """Worker entry point of script mode's trace stage: the script on the CPU,
    its first K steps traced op by op (``result["trace"]``, as torchport trace
    records an app's steps)."""
    import torch
    import torch.utils.data.dataloader as dataloader_module
    from torch.nn.modules import module as nn_module
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    from torchport.script import redirect

    job = context.job
    backend = context.backend
    steps = int(context.config.get("steps", 3))
    script = Path(job["script"]).resolve()
    argv = [str(script), *(fill_placeholders(arg, backend) for arg in job.get("script_args", []))]
    os.environ["TORCHPORT_DEVICE"] = str(backend.device)
    trace: dict[str, Any] = {"steps_requested": steps, "steps_done": 0, "step_batches": [], "torch": torch.__version__,
                             "phase_locations": {phase: str(script) for phase in ("data", "forward", "loss", "backward",
                                                                                  "optimizer")}}
    context.result.put(trace=trace)

    def checkpoint() -> None:
        snapshot = traced.tracer.snapshot().to_dict()
        snapshot.pop("activation_bytes", None)
        trace.update(snapshot)
        context.save()

    traced = ScriptTracer(steps, checkpoint)
    handles = []

    def on_forward(module: Any, inputs: Any) -> None:
        began = traced.index == 0
        if began:
            traced.begin_step()
        if not traced.model_seen:
            traced.model_seen = True
            traced.tracer.attach_model(module)
        if began:
            # The tracer's own module hooks start with the step, after this forward's pre-hooks were read.
            traced.tracer.module_started(module, inputs)

    def on_pre_step(optimizer: Any, args: Any, kwargs: Any) -> None:
        if traced.boundary_optimizer is None:
            traced.boundary_optimizer = id(optimizer)
        if id(optimizer) == traced.boundary_optimizer and traced.index:
            traced.end_step()
            snapshot = traced.tracer.snapshot().to_dict()
            snapshot.pop("activation_bytes", None)
            trace.update(snapshot)
            trace["steps_done"] = traced.index
            context.save()
            if traced.index >= steps:
                raise StopScript
            traced.begin_step()
        traced.tracer.phase = "optimizer"

    def on_post_step(optimizer: Any, args: Any, kwargs: Any) -> None:
        traced.tracer.phase = "loss"

    handles.append(nn_module.register_module_forward_pre_hook(on_forward))
    handles.append(register_optimizer_step_pre_hook(on_pre_step))
    handles.append(register_optimizer_step_post_hook(on_post_step))
    original_backward = torch.Tensor.backward
    original_next = dataloader_module._BaseDataLoaderIter.__next__

    def backward(tensor: Any, *args: Any, **kwargs: Any) -> Any:
        previous, traced.tracer.phase = traced.tracer.phase, "backward"
        try:
            return original_backward(tensor, *args, **kwargs)
        finally:
            traced.tracer.phase = previous

    def data_next(iterator: Any) -> Any:
        previous, traced.tracer.phase = traced.tracer.phase, "data"
        try:
            return original_next(iterator)
        finally:
            traced.tracer.phase = previous

    torch.Tensor.backward = backward  # type: ignore[method-assign, assignment]  # script mode wraps it to see an unmodified script's phases
    dataloader_module._BaseDataLoaderIter.__next__ = data_next  # type: ignore[method-assign, assignment]  # script mode wraps it to see an unmodified script's phases
    redirects = redirect.Redirects(backend, str(script)) if job.get("redirect_cuda") else None
    if redirects is not None:
        redirects.install()
    seed_everything(int(context.config.get("seed", 0)))
    context.progress("trace:script")
    from torchport.script import usercode
    from torchport.trace.device_apis import DeviceApiRecorder

    usercode.set_script(str(script))
    usercode.library_roots()
    # Installed after the redirects, so it sees the device the script asked for, not the one it gets.
    device_apis = DeviceApiRecorder(usercode.is_user_file)
    trace["device_apis"] = device_apis.calls
    from torchport.script import linecoverage

    lines = linecoverage.start()
    try:
        with running_as_main(script, argv, job.get("cwd")), device_apis.recording():
            runpy.run_path(str(script), run_name="__main__")
    except (StopScript, SystemExit):
        pass
    finally:
        coverage = linecoverage.stop(lines, steps)
        context.result.put(script_coverage=coverage.to_dict() if coverage else None)
        traced.end_step()
        for handle in handles:
            handle.remove()
        torch.Tensor.backward = original_backward  # type: ignore[method-assign]  # restored
        dataloader_module._BaseDataLoaderIter.__next__ = original_next  # type: ignore[method-assign]  # restored
        if redirects is not None:
            redirects.uninstall()
    snapshot = traced.tracer.snapshot().to_dict()
    snapshot.pop("activation_bytes", None)
    trace.update(snapshot)
    if traced.index == 0:
        raise UserError("no step of the script was traced: it never called a module's forward and an optimizer step",
                        location=str(script))
