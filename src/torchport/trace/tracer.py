"""The op tracer: every aten op one training step executes, with where it came from.

Two PyTorch interposition points work together (both run on the CPU):

* a ``TorchDispatchMode`` sees every op overload after autograd and
  decomposition (``aten::addmm``, ``aten::nonzero``, ...): the op, its input
  dtypes and shapes, FLOPs and bytes;
* a ``TorchFunctionMode`` sees the user's own torch calls (``x.item()``,
  ``x.tolist()``, ``print(x)``, ``if x:``), which is where host
  synchronizations are visible even on a CPU, where they cost nothing.

Each op is attributed to the innermost frame in the user's code (not torch, not
torchport; ``torchport.app.is_user_file`` decides).  When a library did the
work on the user's behalf (``transformers`` reading a mask with ``if``), the
innermost library frame is kept beside it (``library``), so a finding can name
the library line that caused it and the user's line that reached it.  Backward ops run inside
the autograd engine with no user frame on the stack, so the forward pass stamps
each autograd node with its user location and the backward ops read it back
(``torch._C._current_autograd_node().metadata``).

Evaluation and sampling that a script runs inside its first iterations (an
``estimate_loss()`` or a ``generate()`` at iteration 0) are kept apart: a
stretch of consecutive ops run with autograd off (``torch.no_grad``,
``torch.inference_mode``) or with the trained model in eval mode, outside
backward and the optimizer step, is evaluation when the trained model's
forward ran in it; its ops and host reads go to ``evaluation_records`` and
``evaluation_syncs``, as do later calls on tensors it produced (printing its
losses).  A stretch without the model's forward (gradient clipping, an EMA
update, a loss read) stays in the step.

Records are aggregated as they come: one record per (op, input signature,
phase, location, module), with a call count, so memory stays small however many
steps are traced.
"""
from __future__ import annotations

import sys
import time
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Iterator

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry, sdpa_backward_flop_count, sdpa_flop_count

from torchport.app import is_user_file, library_file
from torchport.records import (GraphDifference, HostSyncCall, ModelCall, StepGraph, TracedEvaluation, TracedOp,
                               TracerSnapshot)

PHASES = ("data", "forward", "loss", "backward", "optimizer")
# The phases whose ops make the model's graph.  The optimizer's first step
# differs from the others on purpose (it creates its state), and the data
# pipeline runs on the host on every backend.
GRAPH_PHASES = ("forward", "loss", "backward")
LOCATION_KEY = "torchport_trace"

# User-level calls that copy a tensor's value to the host: on an accelerator
# each one waits for all queued device work (and on a lazy backend, runs it).
SYNC_CALLS = {
    "item": "Tensor.item()",
    "tolist": "Tensor.tolist()",
    "numpy": "Tensor.numpy()",
    "__bool__": "bool(tensor) / `if tensor:`",
    "__int__": "int(tensor)",
    "__float__": "float(tensor)",
    "__index__": "tensor used as a Python index",
    "__repr__": "printing a tensor",
    "__format__": "formatting a tensor",
    "__array__": "numpy conversion",
}
COPY_CALLS = ("cpu", "to")
# Calls that make a tensor from nothing: on the host unless given a device object (``device=x.device``).
FACTORY_CALLS = frozenset({"tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full", "arange",
                           "linspace", "logspace", "rand", "randn", "randint", "randperm", "eye", "scalar_tensor"})

# The CPU kernel of scaled-dot-product attention is not in PyTorch's FLOP
# registry; its arguments start like the flash kernel's, so PyTorch's own
# attention formula applies.
SDPA_CPU = {"_scaled_dot_product_flash_attention_for_cpu": "forward",
            "_scaled_dot_product_flash_attention_for_cpu_backward": "backward"}


@dataclass
class OpRecord:
    op: str
    phase: str
    location: str | None
    module: str | None
    inputs: list[str]
    outputs: list[str]
    tags: list[str]
    flops: int | None  # per call; None where PyTorch's FLOP counter does not know the op
    bytes_read: int
    bytes_written: int
    count: int = 0
    in_host_sync_call: bool = False
    # How the location was found: "user" (a user frame on the stack),
    # "autograd" (a backward op, via its forward call), or "phase" (no user
    # frame: library code the harness called, e.g. torch.optim).
    attributed: str = "user"
    library: str | None = None  # innermost library frame below the user's, e.g. transformers/x.py:12
    steps: set[int] = field(default_factory=set)

    def traced(self) -> TracedOp:
        """The op's totals over its calls, as the worker saves them."""
        return TracedOp(op=self.op, phase=self.phase, location=self.location, module=self.module, inputs=self.inputs,
                        outputs=self.outputs, tags=self.tags, count=self.count,
                        flops=None if self.flops is None else self.flops * self.count,
                        bytes_read=self.bytes_read * self.count, bytes_written=self.bytes_written * self.count,
                        in_host_sync_call=self.in_host_sync_call, attributed=self.attributed,
                        steps=sorted(self.steps), library=self.library)


@dataclass
class _Stretch:
    """Ops run outside training (autograd off or the model in eval mode), held
    until the stretch ends and it is known whether the trained model ran in it."""
    records: dict[tuple, OpRecord] = field(default_factory=dict)
    syncs: dict[tuple, HostSyncCall] = field(default_factory=dict)
    sequence: list[tuple] = field(default_factory=list)
    tensors: list[weakref.ref[torch.Tensor]] = field(default_factory=list)
    model_calls: dict[str | None, int] = field(default_factory=dict)  # the user lines that called the model
    ran_model: bool = False
    grad_ops: bool = False  # ops with autograd on: the model in eval mode, not torch.no_grad


def _merge(into: dict[tuple, Any], records: dict[tuple, Any]) -> None:
    for key, record in records.items():
        held = into.get(key)
        if held is None:
            into[key] = record
            continue
        held.count += record.count
        if isinstance(held, OpRecord):
            held.steps |= record.steps


def describe(value: Any) -> str | None:
    """``float32[16,64]`` for a tensor, ``list[12 x float32]`` for a tensor list."""
    if isinstance(value, torch.Tensor):
        layout = "" if value.layout == torch.strided else f"{str(value.layout).replace('torch.', '')}:"
        return f"{layout}{str(value.dtype)[6:]}[{','.join(map(str, value.shape))}]"
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], torch.Tensor):
        dtypes = sorted({str(item.dtype)[6:] for item in value if isinstance(item, torch.Tensor)})
        return f"list[{len(value)} x {'/'.join(dtypes)}]"
    return None


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            if isinstance(item, torch.Tensor):
                yield item


def _nbytes(tensors: Iterator[torch.Tensor]) -> int:
    total = 0
    for tensor in tensors:
        if tensor.layout == torch.strided:
            total += tensor.numel() * tensor.element_size()
    return total


def layout_kind(args: tuple) -> str | None:
    """``sparse``, ``quantized`` or ``nested`` when a tensor argument makes
    the dispatcher pick that kind's key (SparseCUDA, QuantizedCUDA,
    NestedTensorCUDA), else None."""
    for value in args:
        for tensor in _tensors(value):
            if tensor.is_sparse or tensor.layout in (torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr,
                                                     torch.sparse_bsc):
                return "sparse"
            if tensor.is_quantized:
                return "quantized"
            if tensor.is_nested:
                return "nested"
    return None


def op_variant(func: Any, args: tuple) -> str:
    """The op's name, with ``[bool]`` when an index op is given a boolean mask
    (the one case where indexing has a data-dependent output shape), and
    ``[sparse]``, ``[quantized]`` or ``[nested]`` when its tensors dispatch to
    that kind's key (:func:`layout_kind`)."""
    name = func.name()
    kind = layout_kind(args)
    if kind is not None:
        return f"{name}[{kind}]"
    if name in ("aten::index.Tensor", "aten::index_put_", "aten::index_put", "aten::_index_put_impl_"):
        indices = args[1] if len(args) > 1 else ()
        if any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in indices or ()):
            return name + "[bool]"
    return name


def _flops(func: Any, args: tuple, kwargs: dict, out: Any) -> int | None:
    packet = func._overloadpacket
    try:
        if packet in flop_registry:
            return int(flop_registry[packet](*args, **kwargs, out_val=out))
        variant = SDPA_CPU.get(func.__name__.split(".")[0])
        if variant == "forward":
            query, key, value = args[:3]
            return int(sdpa_flop_count(query.shape, key.shape, value.shape))
        if variant == "backward":
            grad_out, query, key, value = args[:4]
            return int(sdpa_backward_flop_count(grad_out.shape, query.shape, key.shape, value.shape))
    except Exception:  # a formula that does not fit these arguments: unknown, not zero
        return None
    return None


class _FunctionLevel(TorchFunctionMode):
    """Sees the user's torch calls: records host syncs, and remembers the call's
    user location so the ops it dispatches need no stack walk of their own."""

    def __init__(self, tracer: OpTracer):
        super().__init__()
        self.tracer = tracer

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tracer = self.tracer
        location, library = tracer.locate(sys._getframe(1))
        name = getattr(func, "__name__", "")
        sync = SYNC_CALLS.get(name)
        # Work on tensors the app keeps on the host (a schedule, a counter) runs on no device: reading
        # them waits for none, and their ops are no device ops.
        on_host = tracer.all_on_host(args, kwargs)
        if on_host:
            sync = None
        tracer.settle()
        evaluation = tracer.all_evaluation(args, kwargs)
        if sync is None and name in COPY_CALLS and _copies_to_host(name, args, kwargs) and not (
                tracer.cpu_is_the_device and name == "to"):
            sync = f"Tensor.{name}(): copy to the host"
        previous_evaluation, tracer.in_evaluation_call = tracer.in_evaluation_call, \
            tracer.in_evaluation_call or evaluation
        if sync is not None and tracer.phase != "data":
            tracer.record_sync(sync, location, library)
        tracer.call_location, tracer.call_library = location, library
        tracer.in_sync_call = sync is not None
        tracer.in_host_call = on_host
        try:
            out = func(*args, **kwargs)
        finally:
            tracer.call_location = tracer.call_library = None
            tracer.in_sync_call = tracer.in_host_call = False
            tracer.in_evaluation_call = previous_evaluation
        tracer.note_evaluation(out, evaluation)
        if tracer.phase in ("forward", "loss") and torch.is_grad_enabled():
            tracer.stamp_autograd_nodes(out, location, library)
        tracer.note_host(name, args, kwargs, out)
        return out


def _copies_to_host(name: str, args: tuple, kwargs: dict) -> bool:
    if name == "cpu":
        return True
    # Only a device written as text is the host for sure: traced on the CPU,
    # every tensor's .device is "cpu", so the portable `x.to(other.device)`
    # (transformers does it for every loss) would look like a copy to the host.
    target = kwargs.get("device")
    if target is None:
        target = next((a for a in args[1:] if isinstance(a, (str, torch.device))), None)
    return isinstance(target, str) and torch.device(target).type == "cpu"


class _DispatchLevel(TorchDispatchMode):
    def __init__(self, tracer: OpTracer):
        super().__init__()
        self.tracer = tracer

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.tracer.record_op(func, args, kwargs, out)
        return out


class OpTracer:
    """Trace a training step op by op.  Use ``with tracer.step(i):`` around one
    step and ``with tracer.in_phase(name):`` around each of its parts."""

    def __init__(self, model: Any = None, phase_locations: dict[str, str | None] | None = None,
                 checkpoint: Any = None, checkpoint_every_s: float = 2.0):
        # Called now and then inside a step, so that a step stopped by a timeout
        # still leaves the ops it had issued.
        self._checkpoint = checkpoint
        self._checkpoint_every_s = checkpoint_every_s
        self._last_checkpoint = time.monotonic()
        self._ops_seen = 0
        self.records: dict[tuple, OpRecord] = {}
        self.syncs: dict[tuple, HostSyncCall] = {}
        self.phase = "data"
        # Script mode traces a script told that the CPU is its device: its
        # .to(device) is the move to the device, not a copy to the host.
        self.cpu_is_the_device = False
        # Phases whose ops are attributed to the phase, not to a user line: a
        # script calls optimizer.step() itself, but what torch.optim does inside
        # (its host-side step counters read with .item()) is not the script's
        # code, exactly as in an app's trace, where torchport makes that call.
        self.library_phases: set[str] = set()
        self.step_index = 0
        self.call_location: str | None = None
        self.call_library: str | None = None
        self.in_sync_call = False
        self.in_host_call = False
        self.phase_locations = phase_locations or {}
        self.step_sequences: list[list[tuple]] = []
        # Per step, the optimizer's ops: on a lazy-tensor backend they are part
        # of the step's graph, and the first step's differ when the optimizer
        # creates its state then (Adam's moments, momentum buffers).
        self.optimizer_sequences: list[list[str]] = []
        self._user_code: dict[Any, str | None] = {}
        self._module_names = {id(m): name or "(model)" for name, m in model.named_modules()} if model is not None else {}
        self._module_stack: list[str] = []
        self._model = model
        self.saved_bytes = 0
        self.saved_bytes_step = 0
        self._saved_storages: set[int] = set()
        self._host_tensors: dict[int, weakref.ref[torch.Tensor]] = {}
        self._parameter_pointers = {p.untyped_storage().data_ptr() for p in model.parameters()} if model is not None else set()
        # Evaluation and sampling inside the traced iterations, kept out of the step (see the module's docstring).
        self.evaluation_records: dict[tuple, OpRecord] = {}
        self.evaluation_syncs: dict[tuple, HostSyncCall] = {}
        self.evaluation_model_calls: dict[str | None, int] = {}
        self.in_evaluation_call = False
        self._stretch: _Stretch | None = None
        self._evaluation_tensors: dict[int, weakref.ref[torch.Tensor]] = {}

    def attach_model(self, model: Any) -> None:
        """Name modules and parameters of a model found after tracing began
        (script mode learns the model from its first forward)."""
        self._model = model
        self._module_names = {id(m): name or "(model)" for name, m in model.named_modules()}
        self._parameter_pointers = {p.untyped_storage().data_ptr() for p in model.parameters()}

    # ---- locating the user's code ---------------------------------------------------
    def user_location(self, frame: Any) -> str | None:
        return self.locate(frame)[0]

    def locate(self, frame: Any) -> tuple[str | None, str | None]:
        """``file:line`` of the innermost user frame, and of the innermost
        library frame below it (None when the user's code called torch
        directly), walking the stack once; what a code object is (user,
        library, neither) is decided once per code object."""
        if self.phase in self.library_phases:
            return None, None
        cache = self._user_code
        library = None
        while frame is not None:
            code = frame.f_code
            kind = cache.get(code)
            if kind is None:
                kind = cache[code] = "user" if is_user_file(code.co_filename) else library_file(code.co_filename)
            if kind == "user":
                return f"{code.co_filename}:{frame.f_lineno}", library
            if kind and library is None:
                library = f"{kind}:{frame.f_lineno}"
            frame = frame.f_back
        return None, library

    def stamp_autograd_nodes(self, out: Any, location: str | None, library: str | None = None) -> None:
        """Label the autograd nodes this user call created with its location, so
        their backward ops point at the same line.  Stops at nodes labelled by
        earlier calls, hence visits each node once."""
        module = self._module_stack[-1] if self._module_stack else None
        pending = [t.grad_fn for t in _tensors(out) if t.grad_fn is not None]
        if isinstance(out, (list, tuple)) and not pending:
            pending = [t.grad_fn for item in out for t in _tensors(item) if t.grad_fn is not None]
        while pending:
            node = pending.pop()
            metadata: dict = node.metadata  # type: ignore[assignment]  # torch types Node.metadata as a method; it is a property
            if LOCATION_KEY in metadata:
                continue
            metadata[LOCATION_KEY] = (location, module, library)
            for parent, _ in node.next_functions:
                if parent is not None and type(parent).__name__ != "AccumulateGrad":
                    pending.append(parent)

    # ---- recording --------------------------------------------------------------------
    def record_op(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
        if self.in_host_call:
            return  # an op on tensors kept on the host: no device runs it
        if func.namespace == "profiler":
            return  # record_function markers (torch.optim issues them): bookkeeping, no work on any device
        phase = self.phase
        location, library = self.call_location, self.call_library
        module = self._module_stack[-1] if self._module_stack else None
        attributed = "user"
        if phase == "backward":
            node = torch._C._current_autograd_node()
            stamped = node.metadata.get(LOCATION_KEY) if node is not None else None  # type: ignore[attr-defined]  # as above
            if stamped is not None:
                (location, module, library), attributed = stamped, "autograd"
        elif location is None:
            location, library = self.locate(sys._getframe(3))
        if location is None:
            location, attributed = self.phase_locations.get(phase), "phase"
        signature = tuple(text for text in map(describe, args) if text is not None)
        key = (func, signature, phase, location, module, library)
        records, sequence = self._destination()
        record = records.get(key)
        if record is None:
            outputs = [d for d in (describe(o) for o in (out if isinstance(out, (list, tuple)) else (out,))) if d]
            name = op_variant(func, args)
            record = records[key] = OpRecord(
                op=name, phase=phase, location=location, module=module, inputs=list(signature), outputs=outputs,
                tags=sorted(str(tag).replace("Tag.", "") for tag in func.tags
                            if str(tag) in ("Tag.dynamic_output_shape", "Tag.data_dependent_output")),
                flops=_flops(func, args, kwargs, out),
                bytes_read=_nbytes(t for a in args for t in _tensors(a)),
                bytes_written=_nbytes(_tensors(out)),
                in_host_sync_call=self.in_sync_call, attributed=attributed, library=library,
            )
        record.count += 1
        record.steps.add(self.step_index)
        if sequence is not None and phase in GRAPH_PHASES:
            sequence.append(key)
        elif self.optimizer_sequences and phase == "optimizer":
            self.optimizer_sequences[-1].append(record.op)
        self._ops_seen += 1
        if self._checkpoint is not None and not self._ops_seen % 256:
            now = time.monotonic()
            if now - self._last_checkpoint > self._checkpoint_every_s:
                self._last_checkpoint = now
                self._checkpoint()

    def all_on_host(self, args: tuple, kwargs: dict) -> bool:
        inputs = [t for a in (*args, *kwargs.values()) for t in _tensors(a)]
        return bool(inputs) and all(self.on_host(t) for t in inputs)

    def on_host(self, value: Any) -> bool:
        if not isinstance(value, torch.Tensor):
            return False
        # By identity: a tensor's == is elementwise, so no set or WeakSet can hold them.
        held = self._host_tensors.get(id(value))
        return held is not None and held() is value

    def note_host(self, name: str, args: tuple, kwargs: dict, out: Any) -> None:
        """Remember tensors that would stay on the host on an accelerator: made
        by a factory call without a device object (``torch.tensor(step)``), or
        computed from such tensors only.  Traced on the CPU every tensor's
        device is "cpu", so where a tensor comes from is what tells them apart."""
        if not isinstance(out, torch.Tensor) or self.cpu_is_the_device:
            return  # a script told the CPU is its device makes its device tensors without one
        if name in FACTORY_CALLS:
            device = kwargs.get("device")
            if device is None or isinstance(device, str) and torch.device(device).type == "cpu":
                self._host_tensors[id(out)] = weakref.ref(out)
            return
        moved = name in ("to", "cuda") and any(isinstance(a, torch.device) for a in (*args[1:], *kwargs.values()))
        if moved:  # .to(x.device): the copy lands on the device
            return
        if self.all_on_host(args, kwargs):
            self._host_tensors[id(out)] = weakref.ref(out)

    # ---- evaluation and sampling, kept out of the step -----------------------------------
    def _outside_training(self) -> bool:
        """Autograd off, or the trained model in eval mode, outside backward and the optimizer step."""
        if self.phase in ("backward", "optimizer"):
            return False
        return not torch.is_grad_enabled() or not getattr(self._model, "training", True)

    def _open_stretch(self) -> _Stretch:
        if self._stretch is None:
            self._stretch = _Stretch()
        return self._stretch

    def _destination(self, syncs: bool = False) -> tuple[dict[tuple, Any], list[tuple] | None]:
        """Where the op (or host read) being recorded goes: the evaluation's
        records, the open stretch's (decided when it ends), or the step's; with
        the op sequence of the step's graph it extends (None for evaluation)."""
        if self.in_evaluation_call:
            return (self.evaluation_syncs if syncs else self.evaluation_records), None
        if self._outside_training():
            stretch = self._open_stretch()
            stretch.grad_ops |= torch.is_grad_enabled()
            return (stretch.syncs if syncs else stretch.records), stretch.sequence
        self.settle()
        return (self.syncs if syncs else self.records), (self.step_sequences[-1] if self.step_sequences else None)

    def settle(self) -> None:
        """Close the open stretch once training resumed."""
        if self._stretch is not None and not self._outside_training():
            # Backward from a loss computed in the stretch: the model trains in eval mode; that was the step.
            self.close_stretch(training=self.phase == "backward" and self._stretch.grad_ops)

    def note_forward(self, module: Any) -> None:
        """The trained model's forward starts: outside training, its stretch is evaluation or sampling."""
        if self._model is not None and module is self._model and self._outside_training():
            stretch = self._open_stretch()
            stretch.ran_model = True
            caller = self.locate(sys._getframe(1))[0]
            stretch.model_calls[caller] = stretch.model_calls.get(caller, 0) + 1

    def close_stretch(self, training: bool = False) -> None:
        """End the open stretch: evaluation when the trained model ran in it
        (and no backward followed), else the step's own (gradient clipping,
        an EMA update, a loss read under torch.no_grad)."""
        stretch, self._stretch = self._stretch, None
        if stretch is None:
            return
        if stretch.ran_model and not training:
            _merge(self.evaluation_records, stretch.records)
            _merge(self.evaluation_syncs, stretch.syncs)
            for caller, count in stretch.model_calls.items():
                self.evaluation_model_calls[caller] = self.evaluation_model_calls.get(caller, 0) + count
            if len(self._evaluation_tensors) > 10_000:
                self._evaluation_tensors = {k: r for k, r in self._evaluation_tensors.items() if r() is not None}
            for ref in stretch.tensors:
                tensor = ref()
                if tensor is not None:
                    self._evaluation_tensors[id(tensor)] = ref
            return
        _merge(self.records, stretch.records)
        _merge(self.syncs, stretch.syncs)
        if self.step_sequences:
            self.step_sequences[-1].extend(stretch.sequence)

    def all_evaluation(self, args: tuple, kwargs: dict) -> bool:
        """Whether a call works only on tensors an evaluation produced (printing its losses, decoding its samples)."""
        if not self._evaluation_tensors:
            return False
        inputs = [t for a in (*args, *kwargs.values()) for t in _tensors(a)]
        if not inputs:
            return False
        for tensor in inputs:
            held = self._evaluation_tensors.get(id(tensor))
            if held is None or held() is not tensor:
                return False
        return True

    def note_evaluation(self, out: Any, evaluation: bool) -> None:
        """Remember what an evaluation call, or a call in an open stretch, produced
        (never a parameter: an in-place op returns its input)."""
        if not evaluation and (self._stretch is None or not self._outside_training()):
            return
        for tensor in _tensors(out):
            if isinstance(tensor, torch.nn.Parameter) or (tensor.requires_grad and tensor.is_leaf):
                continue
            ref = weakref.ref(tensor)
            if evaluation:
                self._evaluation_tensors[id(tensor)] = ref
            else:
                assert self._stretch is not None
                self._stretch.tensors.append(ref)

    def record_sync(self, call: str, location: str | None, library: str | None = None) -> None:
        module = self._module_stack[-1] if self._module_stack else None
        key = (call, self.phase, location, module, library)
        syncs = self._destination(syncs=True)[0]
        record = syncs.get(key)
        if record is None:
            # No user frame: torch's own code called by the harness (torch.optim
            # reads its CPU-side step counter with .item()); not the user's sync.
            attributed = "user" if location is not None else "phase"
            record = syncs[key] = HostSyncCall(call, self.phase, location or self.phase_locations.get(self.phase),
                                                  module, attributed=attributed, library=library)
        record.count += 1

    # ---- phases, modules and steps --------------------------------------------------------
    @contextmanager
    def in_phase(self, name: str) -> Iterator[None]:
        previous, self.phase = self.phase, name
        try:
            yield
        finally:
            self.phase = previous

    def module_started(self, module: Any, args: Any = ()) -> None:
        """A module's forward begins (the tracer's forward pre-hook; script mode
        calls it for the forward whose pre-hook began the step)."""
        self._module_stack.append(self._module_names.get(id(module), type(module).__name__))
        if module is self._model and self.phase == "loss":
            self.phase = "forward"
        self.note_forward(module)

    def _post_hook(self, module: Any, args: Any, output: Any) -> None:
        if self._module_stack:
            self._module_stack.pop()
        if module is self._model and self.phase == "forward":
            # Whatever the loss function does with the model's output is the loss.
            self.phase = "loss"

    def _pack(self, tensor: torch.Tensor) -> torch.Tensor:
        # Tensors autograd keeps for backward: the activations of the step.
        if tensor.layout == torch.strided:
            storage = tensor.untyped_storage()
            pointer = storage.data_ptr()
            if pointer not in self._saved_storages:
                self._saved_storages.add(pointer)
                self.saved_bytes_step += storage.nbytes()
        return tensor

    @contextmanager
    def step(self, index: int) -> Iterator[None]:
        """Trace one training step (modes, module hooks and saved-tensor hooks on)."""
        from torch.nn.modules import module as nn_module

        self.step_index = index
        self.step_sequences.append([])
        self.optimizer_sequences.append([])
        self._module_stack.clear()
        self.saved_bytes_step = 0
        # Parameters are saved for backward too; they are counted as parameters.
        self._saved_storages = set(self._parameter_pointers)
        hooks = [nn_module.register_module_forward_pre_hook(self.module_started),
                 nn_module.register_module_forward_hook(self._post_hook)]
        function_mode, dispatch_mode = _FunctionLevel(self), _DispatchLevel(self)
        try:
            with (torch.autograd.graph.saved_tensors_hooks(self._pack, lambda tensor: tensor),
                  function_mode, dispatch_mode):
                yield
        finally:
            self.close_stretch()
            for hook in hooks:
                hook.remove()
            self.saved_bytes = max(self.saved_bytes, self.saved_bytes_step)
            self._saved_storages = set()

    # ---- results -------------------------------------------------------------------------
    def snapshot(self) -> TracerSnapshot:
        """What the tracer saw so far; the worker saves its ``to_dict()``."""
        return TracerSnapshot(
            ops=[record.traced() for record in self.records.values()],
            host_syncs=list(self.syncs.values()),
            step_graphs=self.step_graphs(),
            optimizer_graphs=self.optimizer_graphs(),
            activation_bytes=self.saved_bytes,
            evaluation=TracedEvaluation(
                ops=[record.traced() for record in self.evaluation_records.values()],
                host_syncs=list(self.evaluation_syncs.values()),
                model_calls=[ModelCall(location=location, count=count)
                             for location, count in self.evaluation_model_calls.items()]))

    def step_graphs(self) -> list[StepGraph]:
        """Per traced step: an identity for its graph (the sequence of ops, each
        with its phase, line and module, of forward, loss and backward) and,
        when it differs from the previous step's, where the first difference is.
        Shapes are left out: shapes that change with the data are reported by
        the shape findings, not as a different graph."""
        graphs: list[StepGraph] = []
        identities: dict[tuple, int] = {}
        previous: tuple | None = None
        for sequence in self.step_sequences:
            structure = tuple((key[0], *key[2:]) for key in sequence)
            identity = identities.setdefault(structure, len(identities))
            entry = StepGraph(graph=identity, ops=len(sequence))
            if previous is not None and structure != previous[0]:
                entry.first_difference = self._first_difference(previous, (structure, sequence))
            graphs.append(entry)
            previous = (structure, sequence)
        return graphs

    def optimizer_graphs(self) -> list[int]:
        """Per traced step, an identity for the optimizer's op sequence."""
        identities: dict[tuple, int] = {}
        return [identities.setdefault(tuple(sequence), len(identities)) for sequence in self.optimizer_sequences]

    def _first_difference(self, before: tuple, after: tuple) -> GraphDifference:
        """The first op where two steps part, named by the op that only one of
        them has (the inserted or removed op, not its innocent neighbour)."""
        (shape_a, keys_a), (shape_b, keys_b) = before, after
        position = next((i for i, (a, b) in enumerate(zip(shape_a, shape_b)) if a != b), min(len(shape_a), len(shape_b)))
        candidates = [(shape_b, keys_b, shape_a), (shape_a, keys_a, shape_b)]
        chosen = next((keys[position] for structure, keys, other in candidates
                       if position < len(structure) and structure[position] not in other), None)
        if chosen is None:
            chosen = keys_b[position] if position < len(keys_b) else keys_a[position]
        record = self.records[chosen]
        return GraphDifference(op_index=position, op=record.op, location=record.location, phase=record.phase,
                               inputs=record.inputs)
