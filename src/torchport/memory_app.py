"""Memory fit of any app spec (``torchport memory``): ``hf:`` specs go to
:mod:`torchport.trace.symbolic`; an app (``builtin:NAME``, ``path/app.py``,
``path/app.py:function``, ``module:function``) is measured the same way: its
model built and one forward + backward of its first batch run under torch's
``FakeTensorMode`` (nothing allocated), live storage bytes counted per op,
optimizer state by formula from the optimizer the app builds."""
from __future__ import annotations

import time
from typing import Any

from torchport.errors import UserError


def memory_fit(text: str, dtypes: tuple[str, ...], optimizers: tuple[str, ...]) -> dict[str, Any]:
    from torchport import hf
    from torchport.trace import symbolic

    if hf.is_hf_spec(text):
        return symbolic.memory_fit(text, dtypes or symbolic.DTYPES, optimizers or tuple(symbolic.OPTIMIZERS))
    return app_memory_fit(text, dtypes or ("float32",), optimizers)


def optimizer_kind(optimizer: Any) -> str | None:
    """The key of ``symbolic.OPTIMIZERS`` whose state formula fits this
    optimizer, or None when torchport has no formula for it."""
    name = type(optimizer).__name__
    if name in ("Adam", "AdamW") and not any(group.get("amsgrad") for group in optimizer.param_groups):
        return "adamw"
    if name == "SGD":
        return "sgd-momentum" if any(group.get("momentum") for group in optimizer.param_groups) else "sgd"
    return None


def app_memory_fit(text: str, dtypes: tuple[str, ...], optimizers: tuple[str, ...]) -> dict[str, Any]:
    from torchport import app as apps
    from torchport.trace import symbolic

    started = time.perf_counter()
    app = apps.load_app(text)
    passes, app_optimizer = [], None
    for dtype in dtypes:
        measured, app_optimizer = _symbolic_app_pass(app, text, dtype)
        chosen = optimizers or ((app_optimizer,) if app_optimizer else ("adamw",))
        passes.append(symbolic.with_fits(measured, chosen, measured["batch_size"]))
    batch_size = passes[0]["batch_size"]
    return {
        "spec": text, "model_type": None, "family": "app", "config_class": passes[0]["model_class"],
        "transformers": None, "batch_size": batch_size, "seq_len": None,
        "batch": f"the app's first batch ({batch_size} samples)",
        "parameters": passes[0]["parameters"], "analytical_parameters": None, "parameters_match": None,
        "app_optimizer": app_optimizer or "no formula for the app's optimizer: AdamW's state assumed",
        "passes": passes,
        **symbolic.provenance("the app's model built and one forward + backward of its first batch run", started),
    }


def _symbolic_app_pass(app: Any, text: str, dtype: str) -> tuple[dict[str, Any], str | None]:
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._pytree import tree_flatten, tree_map

    from torchport import app as apps
    from torchport.trace.symbolic import LiveBytes

    torch_dtype = getattr(torch, dtype)
    try:
        first = next(iter(apps.call_user(app.data, "data()")))
    except StopIteration:
        raise UserError("the app's data() yields no batch: nothing to size the activations by", location=text) from None
    tensors = [t for t in tree_flatten(first)[0] if isinstance(t, torch.Tensor)]
    if not tensors:
        raise UserError("the app's first batch holds no tensor", location=text)
    batch_size = app.samples(first) if app.samples else (tensors[0].shape[0] if tensors[0].dim() else 1)
    live = LiveBytes()
    fake = FakeTensorMode()

    def to_fake(value: Any) -> Any:
        if not isinstance(value, torch.Tensor):
            return value
        value = value.to(torch_dtype) if value.is_floating_point() else value
        return fake.from_tensor(value)

    try:
        batch = tree_map(to_fake, first)
        batch_bytes = sum(t.numel() * t.element_size() for t in tree_flatten(batch)[0] if isinstance(t, torch.Tensor))
        default_dtype = torch.get_default_dtype()
        # Built in the dtype rather than converted: a fake parameter cannot be swapped for a converted one.
        torch.set_default_dtype(torch_dtype)
        with fake, live.mode:
            try:
                model = app.model()
            finally:
                torch.set_default_dtype(default_dtype)
            parameters = list(model.parameters())
            parameter_bytes = sum(p.numel() * p.element_size() for p in parameters)
            optimizer = apps.make_optimizer(app, model)
            before_step = live.live
            live.reset_peak()
            loss = app.loss(model, batch)
            after_forward = live.live
            forward_peak = live.peak
            loss.backward()
            step_peak = live.peak
            gradient_bytes = sum(p.grad.numel() * p.grad.element_size() for p in parameters if p.grad is not None)
    except UserError:
        raise
    except Exception as exc:
        raise UserError(f"the symbolic forward + backward of {text} failed ({dtype}): {type(exc).__name__}: "
                        f"{str(exc).splitlines()[0] if str(exc) else ''}", location=apps.user_location(exc)) from None
    measured = {
        "dtype": dtype, "model_class": type(model).__name__, "batch_size": int(batch_size),
        "parameters": sum(p.numel() for p in parameters),
        "trainable_parameters": sum(p.numel() for p in parameters if p.requires_grad),
        "parameter_bytes": parameter_bytes, "gradient_bytes": gradient_bytes, "batch_bytes": batch_bytes,
        "activation_bytes": after_forward - before_step,
        "forward_peak_bytes": forward_peak - before_step + parameter_bytes + batch_bytes,
        "step_peak_bytes": step_peak - before_step + parameter_bytes + batch_bytes,
        "layers": None,
    }
    return measured, optimizer_kind(optimizer)
