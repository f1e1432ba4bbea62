"""Memory fit of a full-size model without allocating it (``torchport memory``).

The model is built under PyTorch's ``FakeTensorMode``: every tensor has a
shape, a dtype and a storage size but no memory behind it, so a 7-billion-
parameter model costs a few hundred MB of host memory to "build".  One forward
and backward pass runs symbolically on a synthetic batch of the requested size;
a dispatch mode counts the bytes of every storage an op creates and releases
them when the last tensor on the storage dies, which is what a caching-free
allocator would hold at each moment.  From that:

* parameters and gradients: exact (counted from the built model);
* activations: what is still alive when the forward pass ends (the tensors
  autograd keeps for backward, the logits and the loss), batch excluded;
* the peak of forward + backward: parameters, the gradients as they accumulate,
  the activations and every temporary, at the worst moment;
* optimizer state: by formula per optimizer (AdamW keeps two tensors the size of
  the parameters, SGD with momentum one), in the parameters' dtype;
* the optimizer step's own temporaries: one parameter-sized buffer (torch's
  multi-tensor AdamW, the default on accelerators).

estimate = max(peak of forward + backward, parameters + gradients + step
temporaries) + optimizer state; required = estimate x (1 + MARGIN).  The margin
stands for what no symbolic run sees (allocator fragmentation and caching, the
runtime's own reservation, compiled kernels' scratch space); it is a stated
allowance, not a measurement.

The estimate is cross-checked two ways: the parameter count against the
architecture's analytical count (:func:`analytical_parameters`), and, for a
configuration small enough to run, against the peak measured on the CPU in a
fresh process (:func:`measure`).
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
import weakref
from collections.abc import Iterable, Mapping
from typing import Any, NotRequired, TypedDict

from torchport.errors import UserError
from torchport.host_memory import process_peak_bytes
from torchport.limits import DEFAULT_TIMEOUT_S

# Measured on this project's CPU (small llama, float32, AdamW, glibc's default
# malloc): peak RSS ran 18-22% above the tensor bytes the estimate counts.
MARGIN = 0.20
# Optimizer -> (state tensors per parameter, description).
OPTIMIZERS = {
    "adamw": (2, "AdamW: exp_avg and exp_avg_sq per parameter"),
    "sgd-momentum": (1, "SGD with momentum: one momentum buffer per parameter"),
    "sgd": (0, "SGD without momentum: no state"),
}
DTYPES = ("float32", "bfloat16")
# The measured cross-check (``--measure``): the estimate against the peak of
# live tensor bytes of a real run (same counter, real kernels and a real
# AdamW), and against the process's peak RSS (which adds the allocator's
# fragmentation and the kernels' own buffers).
TENSOR_TOLERANCE = 0.05
RSS_TOLERANCE = 0.25
# Below this estimate the process's fixed costs (thread pools, kernel caches,
# the autograd engine: ~100 MiB here) swamp the model in the RSS, which is then
# reported but not judged.
RSS_JUDGED_FROM = 2**30


class LiveBytes:
    """A dispatch mode that counts the bytes of live storages, and their peak."""

    def __init__(self) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        tracker = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                for item in (out if isinstance(out, (list, tuple)) else (out,)):
                    tracker.track(item)
                return out

        self.mode = _Mode()
        self.holders: dict[int, int] = {}  # storage -> live tensors on it
        self.live = 0
        self.peak = 0

    def track(self, tensor: Any) -> None:
        import torch

        if not isinstance(tensor, torch.Tensor):
            return
        storage = tensor.untyped_storage()
        key, nbytes = storage._cdata, storage.nbytes()
        count = self.holders.get(key, 0)
        if count == 0:
            self.live += nbytes
            self.peak = max(self.peak, self.live)
        self.holders[key] = count + 1
        weakref.finalize(tensor, self._release, key, nbytes)

    def _release(self, key: int, nbytes: int) -> None:
        count = self.holders.get(key, 0) - 1
        if count <= 0:
            self.holders.pop(key, None)
            self.live -= nbytes
        else:
            self.holders[key] = count

    def reset_peak(self) -> None:
        self.peak = self.live


class SymbolicPass(TypedDict):
    """One symbolic forward + backward of a model in one dtype: its sizes, in bytes."""

    dtype: str
    parameters: int
    trainable_parameters: int
    parameter_bytes: int
    gradient_bytes: int
    batch_bytes: int
    activation_bytes: int
    forward_peak_bytes: int
    step_peak_bytes: int
    seconds: dict[str, float]
    layers: NotRequired[int | None]


class OptimizerEstimate(TypedDict):
    optimizer: str
    optimizer_state_bytes: int
    peak_bytes: int
    required_bytes: int


class ChipLayouts(TypedDict):
    """One chip of the catalogue: fits one, or the fewest chips under each parallel layout."""

    chip: str
    id: str
    targets: list[str]
    hbm: str
    hbm_bytes: int
    source: str
    fits_one: bool
    data_parallel: int | None
    fully_sharded: int | None
    why_not: NotRequired[str]


class MeasuredStep(TypedDict):
    """The measured cross-check: a real float32/AdamW run's peaks (``python -m torchport.trace.symbolic``)."""

    spec: str
    steps: int
    tensor_peak_bytes: int
    baseline_rss_bytes: int
    rss_peak_bytes: int
    torch: str
    allocator: dict[str, str | None]


def symbolic_pass(resolved: Any, dtype: str) -> SymbolicPass:
    """Build the model and run forward + backward under FakeTensorMode; a
    model that reads a tensor's value on the host cannot be run this way, and
    says so in one line naming the library's line."""
    try:
        return _symbolic_pass(resolved, dtype)
    except Exception as exc:
        import traceback

        from torchport.app import library_file

        frames = [f"{library_file(f.filename)}:{f.lineno}" for f in traceback.extract_tb(exc.__traceback__)
                  if (library_file(f.filename) or "").startswith("transformers/")]
        where = frames[-1] if frames else None
        raise UserError(f"the symbolic forward + backward of {resolved.spec.text} failed ({dtype}): "
                        f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", location=where) from None


def _symbolic_pass(resolved: Any, dtype: str) -> SymbolicPass:
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from torchport import hf

    from transformers.initialization import no_init_weights

    live = LiveBytes()
    started = time.perf_counter()
    # Initial values mean nothing to fake tensors, and some initializers read
    # one on the host (vit's truncated normal), which a fake tensor cannot answer.
    with FakeTensorMode(), live.mode, no_init_weights():
        model = hf.build_model(resolved, dtype=getattr(torch, dtype))
        model.tie_weights()  # skipped with the initialization; shared embeddings are one parameter
        parameters = list(model.parameters())
        parameter_bytes = sum(p.numel() * p.element_size() for p in parameters)
        batch = hf.make_batches(resolved, count=1)[0]
        if "pixel_values" in batch:
            batch["pixel_values"] = batch["pixel_values"].to(getattr(torch, dtype))
        batch_bytes = sum(t.numel() * t.element_size() for t in batch.values())
        built = time.perf_counter()
        before_step = live.live
        live.reset_peak()
        loss = model(**batch).loss
        after_forward = live.live
        forward_peak = live.peak
        loss.backward()
        step_peak = live.peak
        gradient_bytes = sum(p.grad.numel() * p.grad.element_size() for p in parameters if p.grad is not None)
    return {
        "dtype": dtype,
        "parameters": sum(p.numel() for p in parameters),
        "trainable_parameters": sum(p.numel() for p in parameters if p.requires_grad),
        "parameter_bytes": parameter_bytes,
        "gradient_bytes": gradient_bytes,
        "batch_bytes": batch_bytes,
        "activation_bytes": after_forward - before_step,
        "forward_peak_bytes": forward_peak - before_step + parameter_bytes + batch_bytes,
        "step_peak_bytes": step_peak - before_step + parameter_bytes + batch_bytes,
        "seconds": {"build": round(built - started, 2), "forward_backward": round(time.perf_counter() - built, 2)},
    }


def estimate(measured: Mapping[str, Any], optimizer: str) -> OptimizerEstimate:
    per_parameter, _ = OPTIMIZERS[optimizer]
    state = per_parameter * measured["parameter_bytes"]
    # The optimizer step holds parameters, gradients and one parameter-sized temporary.
    step = measured["parameter_bytes"] + measured["gradient_bytes"] + measured["parameter_bytes"]
    peak = max(measured["step_peak_bytes"], step) + state
    return {"optimizer": optimizer, "optimizer_state_bytes": state, "peak_bytes": peak,
            "required_bytes": int(math.ceil(peak * (1 + MARGIN)))}


def chip_fit(measured: Mapping[str, Any], estimated: OptimizerEstimate, batch_size: int) -> list[ChipLayouts]:
    """Per chip: fits on one, or how many under plain data parallelism (each
    chip holds everything, the batch is split) and fully sharded (parameters,
    gradients and optimizer state split N ways; one layer's worth gathered)."""
    from torchport.trace.memory import catalogue

    states = measured["parameter_bytes"] + measured["gradient_bytes"] + estimated["optimizer_state_bytes"]
    # What shrinks with a chip's share of the batch: the forward pass's peak
    # above the parameters (activations and temporaries), per sample.
    per_sample = max(0, measured["forward_peak_bytes"] - measured["parameter_bytes"]) / batch_size
    peak = estimated["peak_bytes"]
    # Fully sharded: one layer's parameters and gradients are gathered whole at a time.
    gathered = 2 * measured["parameter_bytes"] / max(1, measured.get("layers") or 1)

    def data_parallel(n: int) -> float:
        return peak - per_sample * (batch_size - math.ceil(batch_size / n))

    def fully_sharded(n: int) -> float:
        if n == 1:
            return peak
        # Parameters, gradients, optimizer state and the optimizer step's
        # temporary all split n ways; one layer gathered whole; activations of
        # this chip's share of the batch.
        sharded = states + measured["parameter_bytes"]
        return sharded / n + gathered + per_sample * math.ceil(batch_size / n)

    rows = []
    for chip in catalogue().chips:
        capacity = chip.capacity_bytes
        usable = capacity / (1 + MARGIN)  # the margin applies to every layout
        row: ChipLayouts = {"chip": chip.name, "id": chip.id, "targets": chip.targets,
                            "hbm": chip.hbm_text, "hbm_bytes": capacity, "source": chip.source,
                            "fits_one": estimated["required_bytes"] <= capacity,
                            "data_parallel": _smallest(lambda n, usable=usable: data_parallel(n) <= usable, batch_size),
                            "fully_sharded": _smallest(lambda n, usable=usable: fully_sharded(n) <= usable, 4096)}
        if row["fully_sharded"] is None:
            row["why_not"] = (f"activations of one sample ({_gib(per_sample)}) do not fit beside the sharded state "
                              f"on 4096 chips: needs activation checkpointing, sequence or tensor parallelism")
        rows.append(row)
    return rows


def _smallest(fits: Any, limit: int) -> int | None:
    return next((n for n in range(1, limit + 1) if fits(n)), None)


def _gib(value: float) -> str:
    return f"{value / 2**30:.1f} GiB"


# --- the analytical parameter count -------------------------------------------------------

def analytical_parameters(model_type: str, config: Any) -> int | None:
    """The parameter count from the architecture's formula, for the families
    torchport knows; None for the others."""
    if model_type in ("llama", "mistral", "qwen2"):
        hidden, layers, vocab = config.hidden_size, config.num_hidden_layers, config.vocab_size
        heads = config.num_attention_heads
        kv_heads = getattr(config, "num_key_value_heads", None) or heads
        head_dim = getattr(config, "head_dim", None) or hidden // heads
        inner = config.intermediate_size
        attention = hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim + heads * head_dim * hidden
        if model_type == "qwen2" or getattr(config, "attention_bias", False):
            attention += heads * head_dim + 2 * kv_heads * head_dim  # q, k, v biases
        if model_type != "qwen2" and getattr(config, "attention_bias", False):
            attention += hidden  # o_proj bias (llama's attention_bias covers it too)
        mlp = 3 * hidden * inner + (2 * inner + hidden if getattr(config, "mlp_bias", False) else 0)
        per_layer = attention + mlp + 2 * hidden  # two RMSNorm weights
        head = 0 if config.tie_word_embeddings else vocab * hidden
        return vocab * hidden + layers * per_layer + hidden + head
    if model_type == "gpt2":
        hidden, layers, vocab, positions = config.n_embd, config.n_layer, config.vocab_size, config.n_positions
        inner = config.n_inner or 4 * hidden
        per_layer = (2 * 2 * hidden  # two LayerNorms (weight, bias)
                     + hidden * 3 * hidden + 3 * hidden + hidden * hidden + hidden  # attention in/out
                     + hidden * inner + inner + inner * hidden + hidden)  # MLP
        head = 0 if config.tie_word_embeddings else vocab * hidden
        return vocab * hidden + positions * hidden + layers * per_layer + 2 * hidden + head
    return None


# --- the whole report ---------------------------------------------------------------------

def memory_fit(text: str, dtypes: tuple[str, ...] = DTYPES, optimizers: tuple[str, ...] = tuple(OPTIMIZERS)) -> dict:
    from torchport import hf

    if not hf.is_hf_spec(text):
        raise UserError("the symbolic memory fit takes an hf: spec (e.g. 'hf:llama?batch_size=1&seq_len=2048'); "
                        "`torchport memory` on an app spec measures its real step instead", location=text)
    for name in dtypes:
        if name not in DTYPES:
            raise UserError(f"unknown dtype {name!r} (known: {', '.join(DTYPES)})")
    for name in optimizers:
        if name not in OPTIMIZERS:
            raise UserError(f"unknown optimizer {name!r} (known: {', '.join(OPTIMIZERS)})")
    started = time.perf_counter()
    resolved = hf.resolve(text)
    layers = next((getattr(resolved.config, n) for n in ("num_hidden_layers", "n_layer", "num_layers")
                   if isinstance(getattr(resolved.config, n, None), int)), None)
    passes = []
    for dtype in dtypes:
        measured = symbolic_pass(resolved, dtype)
        measured["layers"] = layers
        passes.append(with_fits(measured, optimizers, resolved.spec.batch_size))
    analytical = analytical_parameters(resolved.spec.model_type, resolved.config)
    counted = passes[0]["parameters"] if passes else None
    return {
        "spec": resolved.spec.text, "model_type": resolved.spec.model_type, "family": resolved.family,
        "config_class": type(resolved.config).__name__, "transformers": resolved.transformers_version,
        "batch_size": resolved.spec.batch_size, "seq_len": resolved.spec.seq_len, "batch": hf.batch_text(resolved),
        "parameters": counted,
        "analytical_parameters": analytical,
        "parameters_match": None if analytical is None else analytical == counted,
        "passes": passes,
        **provenance("model built and one forward + backward run", started),
    }


def with_fits(measured: Mapping[str, Any], optimizers: Iterable[str], batch_size: int) -> dict:
    """One symbolic pass with, per optimizer, its estimate and its fit on every chip."""
    rows = []
    for optimizer in optimizers:
        estimated = estimate(measured, optimizer)
        rows.append({**estimated, "chips": chip_fit(measured, estimated, batch_size)})
    return {**measured, "optimizers": rows}


def provenance(what_ran: str, started: float) -> dict:
    """How a memory-fit document was made: the method, the margin, the chip
    catalogue's date, and what making it cost this process."""
    from torchport.trace.memory import catalogue

    return {
        "margin": MARGIN,
        "method": f"symbolic: {what_ran} under torch's FakeTensorMode (no memory allocated); live storage bytes "
                  f"counted per op; optimizer state by formula; required = estimate x {1 + MARGIN:g} (margin for "
                  "fragmentation, runtime reservation, kernel scratch; not measured)",
        "catalogue": catalogue().provenance(),
        "host_peak_rss_bytes": process_peak_bytes(),
        "seconds": round(time.perf_counter() - started, 1),
    }


# --- the measured cross-check -------------------------------------------------------------

def measure(text: str, steps: int = 2, timeout: float = DEFAULT_TIMEOUT_S) -> MeasuredStep:
    """Run the spec for real on the CPU (float32, AdamW) in a fresh process and
    return the peak of its live tensor bytes and its peak RSS above the
    baseline taken before the model was built: the figures the float32/AdamW
    estimate predicts.  glibc's malloc keeps its defaults here (the workers fix
    its thresholds for steady timing, which lets the heap grow step after step)."""
    from torchport.launch import STEADY_ALLOCATOR, worker_environment

    env = {k: v for k, v in worker_environment().items() if k not in STEADY_ALLOCATOR}
    command = [sys.executable, "-m", "torchport.trace.symbolic", text, str(steps)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise UserError(f"the measured run of {text} failed: {last}")
    measured: MeasuredStep = json.loads(done.stdout.strip().splitlines()[-1])
    return measured


def _measure_here(text: str, steps: int) -> MeasuredStep:
    import torch

    from torchport import hf

    resolved = hf.resolve(text)
    batches = hf.make_batches(resolved, count=1)
    torch.manual_seed(0)
    live = LiveBytes()
    baseline = _current_rss_bytes()
    with live.mode:
        model = hf.build_model(resolved)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        live.reset_peak()
        for _ in range(steps):
            optimizer.zero_grad(set_to_none=True)
            model(**batches[0]).loss.backward()
            optimizer.step()
    return {"spec": text, "steps": steps, "tensor_peak_bytes": live.peak, "baseline_rss_bytes": baseline,
            "rss_peak_bytes": process_peak_bytes() - baseline, "torch": torch.__version__,
            "allocator": {k: os.environ.get(k) for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")}}


def _current_rss_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


if __name__ == "__main__":
    print(json.dumps(_measure_here(sys.argv[1], int(sys.argv[2]))))
