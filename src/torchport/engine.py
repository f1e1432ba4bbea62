"""The one training-step engine: how every torchport job builds an app and
runs its steps.

``evaluate`` (``torchport.protocol.evaluate_job``), the checks
(``torchport.check.training.TrainingRun``), the op trace
(``torchport.trace.job``) and the benchmarks all build the app here, in one
fixed order:

1. seed (python, numpy, torch and every device generator torch seeds);
2. import the app (its module and its factory run: they may draw from the RNGs);
3. the model, placed on the backend's device (and cast to the run's dtype);
4. the optimizer, over the placed model's parameters;
5. optionally ``torch.compile`` through the backend;
6. the data stream.

A worker that builds the app more than once (the checks train several runs in
one process) imports it once and starts every later build from the RNG state
the import left: each build's model and data see exactly what the first
build's did, i.e. what a fresh ``evaluate`` worker sees.  Before, the checks
seeded after the import, so an app whose factory drew random numbers trained
on other data there than in ``evaluate``.

The step (data, zero_grad, loss, backward, optimizer step) is written once,
with one message for a loss that is not a scalar tensor.  What a caller adds
goes through :class:`StepHooks`: trace records dispatch per phase
(``phase``), the checks capture gradients between backward and the update
(``after_backward``) and train on a shard of each batch (``on_batch``),
evaluate counts samples and tokens of each batch (``on_batch``).  Timing
blocks, compiler counters and turn-taking live in ``torchport.protocol``
around the step, never inside it.

Runs on every torch a backend environment holds (2.9 and newer); imports torch
lazily so that the parent process can import it without torch.
"""
from __future__ import annotations

import inspect
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from torchport.app import call_user, load_app, make_optimizer, user_error_from
from torchport.errors import UserError

# --- seeding ----------------------------------------------------------------------------------


def seed_everything(seed: int) -> None:
    import torch

    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy

        numpy.random.seed(seed)
    except ImportError:
        pass


@dataclass(frozen=True)
class HostRngState:
    """The host generators (torch's CPU one, python's, numpy's) at one moment."""

    torch_cpu: Any
    python: Any
    numpy: Any

    @classmethod
    def capture(cls) -> HostRngState:
        import torch

        try:
            import numpy

            numpy_state = numpy.random.get_state()
        except ImportError:
            numpy_state = None
        return cls(torch.get_rng_state(), random.getstate(), numpy_state)

    def restore(self) -> None:
        import torch

        torch.set_rng_state(self.torch_cpu)
        random.setstate(self.python)
        if self.numpy is not None:
            import numpy

            numpy.random.set_state(self.numpy)


def function_location(function: Callable[..., Any]) -> str | None:
    """``file:line`` where a user function is defined, for error messages."""
    try:
        target = inspect.unwrap(function)
        return f"{inspect.getsourcefile(target)}:{inspect.getsourcelines(target)[1]}"
    except (TypeError, OSError):
        return None


# --- data ---------------------------------------------------------------------------------


class BatchStream:
    """Endless batches from the app's data factory, one epoch after another,
    with the host time spent waiting for each."""

    def __init__(self, factory: Callable[[], Any]):
        self._factory = factory
        self._data = self._call_factory()
        self._iterator: Iterator[Any] | None = None
        self.epochs_started = 0
        self.signatures: set[tuple] = set()

    def _call_factory(self) -> Any:
        try:
            data = self._factory()
        except UserError:
            raise
        except Exception as exc:
            raise user_error_from(exc, "the app's data factory raised") from None
        return data

    @property
    def data(self) -> Any:
        """The iterable the factory returned (the current epoch's)."""
        return self._data

    @property
    def steps_per_epoch(self) -> int | None:
        try:
            return len(self._data)
        except TypeError:
            return None

    def next(self) -> tuple[Any, float]:
        started = time.perf_counter()
        batch = self._next_batch()
        waited = time.perf_counter() - started
        self.signatures.add(batch_signature(batch))
        return batch, waited

    def _next_batch(self) -> Any:
        for _ in range(2):
            if self._iterator is None:
                if self.epochs_started and hasattr(self._data, "__next__"):
                    # A generator is spent after one epoch: ask the factory for the next.
                    self._data = self._call_factory()
                self._iterator = iter(self._data)
                self.epochs_started += 1
            try:
                return next(self._iterator)
            except StopIteration:
                self._iterator = None
        raise UserError("the app's data is empty: a fresh epoch yielded no batch",
                        location=function_location(self._factory))


def batch_signature(batch: Any) -> tuple:
    """Shapes and dtypes of every tensor in a batch: metadata only, no device sync."""
    import torch

    if isinstance(batch, torch.Tensor):
        return (tuple(batch.shape), str(batch.dtype).replace("torch.", ""))
    if isinstance(batch, (list, tuple)):
        return tuple(batch_signature(item) for item in batch)
    if isinstance(batch, dict):
        return tuple((key, batch_signature(value)) for key, value in sorted(batch.items()))
    return (type(batch).__name__,)


def leading_dim(batch: Any) -> int:
    import torch

    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() else 1
    if isinstance(batch, (list, tuple)) and batch:
        return leading_dim(batch[0])
    if isinstance(batch, dict) and batch:
        return leading_dim(next(iter(batch.values())))
    raise UserError("cannot count samples in a batch: give the App a samples=(batch) -> int function")


# --- hooks --------------------------------------------------------------------------------

class StepHooks:
    """What a caller adds to the engine's step; here, nothing.

    ``enter_phase(name)`` is called as the step enters each of its parts
    ("data", "optimizer" (zero_grad, and the update), "loss", "backward"; the
    build's "build:model", "build:optimizer", "build:data") and with None as it
    leaves one; ``on_batch(batch)`` sees the host batch before it is placed
    and returns the batch to train on; ``after_backward()`` runs once the
    gradients exist, before the update; ``data_factory(factory)`` returns the
    factory the data stream calls instead of the app's (the trace records
    every call).  Each is None unless a caller sets
    it: the step then makes no call for it, so the timed step costs what a
    hand-written one does (plain attributes, not context managers: measured
    4-5% of a 0.14 ms step otherwise)."""

    enter_phase: Callable[[str | None], None] | None = None
    on_batch: Callable[[Any], Any] | None = None
    after_backward: Callable[[], None] | None = None
    data_factory: Callable[[Callable[[], Any]], Callable[[], Any]] | None = None


NO_HOOKS = StepHooks()


def _no_phase(name: str | None) -> None:
    pass


# --- building the app ---------------------------------------------------------------------


class ImportedApp:
    """An app imported right after seeding, with the RNG state its import left:
    every :meth:`build` with the same seed starts from that state."""

    def __init__(self, app: Any, seed: int):
        self.app = app
        self.seed = seed
        self._after_import = HostRngState.capture()
        self._builds = 0

    def build(self, backend: Any, *, dtype: str = "float32", seed: int | None = None, compile: bool = True,
              on_device: bool = True, app_owns_failures: bool = False,
              hooks: StepHooks = NO_HOOKS) -> Engine:
        """Steps 3-6 of the fixed order: model, optimizer, optional compile, data.

        ``on_device=False`` leaves the model and batches where the app makes
        them (the op trace runs the app as written, on the CPU).
        ``app_owns_failures``: an exception in backward or in the optimizer
        step is reported as the app's (where the backend cannot be the cause:
        the trace's plain CPU run); elsewhere it is left to the worker's
        classification, which may blame the backend.  ``hooks.enter_phase``
        sees each factory call ("build:model", "build:optimizer", "build:data")."""
        seed = self.seed if seed is None else seed
        if self._builds or seed != self.seed:
            # Back to where the import left the generators; a build with another
            # seed starts from that seed (the import drew from the first one).
            seed_everything(seed)
            if seed == self.seed:
                self._after_import.restore()
        self._builds += 1
        return Engine(self.app, backend, dtype=dtype, seed=seed, compile=compile, on_device=on_device,
                      app_owns_failures=app_owns_failures, hooks=hooks)


def import_app(app_spec: Any, seed: int) -> ImportedApp:
    """Steps 1-2 of the fixed order: seed, then import the app."""
    seed_everything(seed)
    return ImportedApp(load_app(app_spec), seed)


def build_app(app_spec: Any, backend: Any, *, seed: int, **options: Any) -> Engine:
    """The whole fixed order, for a job that builds the app once."""
    return import_app(app_spec, seed).build(backend, **options)


class Engine:
    """One built app on one backend: model, optimizer, the module the steps
    call (compiled or not), the data stream, and the step itself."""

    def __init__(self, app: Any, backend: Any, *, dtype: str, seed: int, compile: bool, on_device: bool,
                 app_owns_failures: bool, hooks: StepHooks = NO_HOOKS):
        import torch

        self.app = app
        self.backend = backend
        self.dtype = dtype
        self.seed = seed
        self.on_device = on_device
        self.app_owns_failures = app_owns_failures
        self.cast = None if dtype == "float32" else getattr(torch, dtype)
        self.loss_location = function_location(app.loss)
        self._tensor = torch.Tensor
        enter = hooks.enter_phase or _no_phase
        enter("build:model")
        model = call_user(app.model, "the app's model factory raised")
        enter(None)
        self.parameters = sum(p.numel() for p in model.parameters())  # counted before any cast or placement
        self.model = backend.prepare_model(model, self.cast) if on_device else model
        enter("build:optimizer")
        self.optimizer = make_optimizer(app, self.model)
        enter(None)
        self.trainable = backend.compile(self.model) if compile and on_device else self.model
        enter("build:data")
        self.data_factory = hooks.data_factory(app.data) if hooks.data_factory else app.data
        self.stream = BatchStream(self.data_factory)
        enter(None)

    # ---- the parts of a step ------------------------------------------------------------
    def place(self, batch: Any) -> Any:
        return self.backend.to_device(batch, self.cast) if self.on_device else batch

    def samples(self, batch: Any) -> int:
        return self.app.samples(batch) if self.app.samples else leading_dim(batch)

    def tokens(self, batch: Any) -> int | None:
        return self.app.tokens(batch) if self.app.tokens else None

    def loss(self, batch: Any) -> Any:
        """The app's loss on a placed batch (not yet checked: see check_loss)."""
        try:
            return self.app.loss(self.trainable, batch)
        except UserError:
            raise
        except Exception as exc:
            raise user_error_from(exc, "the app's loss raised") from None

    def check_loss(self, loss: Any) -> None:
        if not isinstance(loss, self._tensor) or loss.dim() != 0:
            self.refuse_loss(loss)

    def refuse_loss(self, loss: Any) -> None:
        """The one place a loss that is not a scalar tensor is refused."""
        got = type(loss).__name__ if not isinstance(loss, self._tensor) else f"shape {tuple(loss.shape)}"
        raise UserError(f"the loss must return a scalar tensor, got {got}", location=self.loss_location)

    # ---- the steps ----------------------------------------------------------------------
    def train_step(self, hooks: StepHooks = NO_HOOKS) -> tuple[Any, Any, float]:
        """One training step: next batch, zero_grad, loss, backward, update,
        the backend's end of step.  Returns (loss, host batch, host seconds
        spent waiting for the batch).  The loss is returned as the app made
        it: a caller that keeps it detaches it (outside a traced step, where
        the detach would be one more traced op)."""
        enter = hooks.enter_phase
        if enter:
            enter("data")
        host_batch, waited = self.stream.next()
        if enter:
            enter(None)
        batch = hooks.on_batch(host_batch) if hooks.on_batch else host_batch
        if self.on_device:
            batch = self.backend.to_device(batch, self.cast)
        if enter:
            enter("optimizer")
        self.optimizer.zero_grad(set_to_none=True)
        if enter:
            enter("loss")
        # self.loss() and self.check_loss(), written out: two calls fewer in the timed step.
        try:
            loss = self.app.loss(self.trainable, batch)
        except UserError:
            raise
        except Exception as exc:
            raise user_error_from(exc, "the app's loss raised") from None
        if enter:
            enter(None)
        if not isinstance(loss, self._tensor) or loss.dim() != 0:
            self.refuse_loss(loss)
        if enter:
            enter("backward")
        if self.app_owns_failures:
            call_user(loss.backward, "backward through the app's loss raised")
        else:
            loss.backward()
        if enter:
            enter(None)
        if hooks.after_backward:
            hooks.after_backward()
        if enter:
            enter("optimizer")
        if self.app_owns_failures:
            call_user(self.optimizer.step, "the app's optimizer step raised")
        else:
            self.optimizer.step()
        if enter:
            enter(None)
        self.backend.after_step()
        return loss, host_batch, waited

    def predict(self, batch: Any) -> Any:
        """The app's forward-only call on a placed batch (the caller sets eval
        mode and no_grad), then the backend's end of step."""
        output = call_user(lambda: self.app.predict(self.trainable, batch), "the app's predict raised")
        self.backend.after_step()
        return output

    def forward_step(self, stream: BatchStream, hooks: StepHooks = NO_HOOKS) -> tuple[Any, Any, float]:
        """One forward-only step on ``stream``: (output, host batch, wait).
        The output is returned so that it stays alive until the caller's
        barrier: a lazy backend computes only what is still referenced."""
        host_batch, waited = stream.next()
        batch = hooks.on_batch(host_batch) if hooks.on_batch else host_batch
        return self.predict(self.place(batch)), host_batch, waited

    def first_batch(self) -> Any:
        """The batch step 1 trains on, fetched from a fresh iterator and placed."""
        data = call_user(self.app.data, "the app's data factory raised")
        return self.place(next(iter(data)))
