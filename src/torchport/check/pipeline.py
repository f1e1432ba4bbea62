"""Input pipeline: can the data keep up with the training step?

The worker times the app's data iterable alone (no model, no device) over the
same number of batches the parity run trains on: batches per second.  The
training step's consumption comes from the backend's own short timed run (or,
inside ``torchport evaluate``, from the evaluation's sustained figures), minus
the time that step spent waiting for data: the compute-only step time.

* Loading in the training process (a list, a generator, or a DataLoader with
  ``num_workers=0``): the step waits for every batch, so the app is
  input-bound when loading takes more than ``INPUT_BOUND_SHARE`` (20%, the
  timing protocol's threshold) of a step.
* A DataLoader with worker processes overlaps loading with compute: it is
  input-bound when one batch takes longer to load than a step takes to compute.

The suggestions name what applies to this app's data object.
"""
from __future__ import annotations

from typing import Any

from torchport.limits import INPUT_BOUND_SHARE

PINNED_MEMORY_DEVICES = ("cuda",)  # page-locked host memory speeds up copies to these devices only


def suggestions(data: dict[str, Any], device_type: str) -> list[str]:
    found = []
    if not data.get("dataloader"):
        found.append("wrap the data in a torch.utils.data.DataLoader with num_workers > 0 so loading overlaps "
                     "compute (the data is a " + data.get("type", "plain iterable").rsplit(".", 1)[-1] + ")")
    else:
        if not data.get("num_workers"):
            found.append("DataLoader(num_workers=N): it loads in the training process now (num_workers=0)")
        else:
            if not data.get("persistent_workers"):
                found.append("DataLoader(persistent_workers=True): workers are restarted every epoch now")
            found.append(f"raise DataLoader(prefetch_factor=...) (now {data.get('prefetch_factor')}) so more batches wait ready")
        if device_type in PINNED_MEMORY_DEVICES and not data.get("pin_memory"):
            found.append(f"DataLoader(pin_memory=True): faster host-to-{device_type} copies")
    if device_type not in PINNED_MEMORY_DEVICES:
        found.append(f"pin_memory does not help on {device_type}")
    return found


def check(backend: str, device_type: str, pipeline: dict[str, Any] | None, step_s: float | None,
          data_wait_per_step_s: float, step_source: str) -> dict[str, Any]:
    result: dict[str, Any] = {"name": "pipeline", "backend": backend, "status": "error", "figures": {}}
    if not pipeline or not pipeline.get("batches_per_s"):
        result["reason"] = "the data pipeline was not timed"
        return result
    if not step_s:
        result["reason"] = "no training step time to compare with"
        return result
    data = pipeline.get("data", {})
    load_s = 1.0 / pipeline["batches_per_s"]
    compute_s = max(step_s - data_wait_per_step_s, 1e-9)
    overlapped = bool(data.get("dataloader") and data.get("num_workers"))
    share = load_s / (load_s + compute_s)
    input_bound = load_s > compute_s if overlapped else share > INPUT_BOUND_SHARE
    result["figures"] = {
        "data_batches_per_s": pipeline["batches_per_s"],
        "data_samples_per_s": pipeline.get("samples_per_s"),
        "train_steps_per_s": 1.0 / step_s,
        "compute_step_s": compute_s,
        "load_share": share,
        "headroom": compute_s / load_s,
        "overlapped": overlapped,
        "input_bound": input_bound,
        "step_time_source": step_source,
        "data": data,
        "suggestions": suggestions(data, device_type) if input_bound else [],
    }
    rates = (f"data alone {pipeline['batches_per_s']:.1f} batches/s, training consumes {1.0 / compute_s:.1f} "
             f"steps/s of compute")
    if input_bound:
        result["status"] = "fail"
        result["reason"] = (f"input-bound: {rates} (loading is {share:.0%} of a step); try: "
                            + "; ".join(result["figures"]["suggestions"][:2]))
    else:
        result["status"] = "pass"
        result["reason"] = f"keeps up: {rates}; loading is {share:.0%} of a step"
    return result
