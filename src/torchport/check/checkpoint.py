"""Checkpoint portability: saved on backend A, loaded on backend B, trained on.

Backend A's run saves its full training state at step S of K (model,
optimizer, RNG states, step; ``torch.save`` with a size and checksum beside
it).  A fresh run on B validates the file, loads it with
``torch.load(weights_only=True)``, restores what it can, fast-forwards the
data to step S and trains to K.  The pair passes when:

* the file validates and loads, and the state reads back from B's model
  exactly as saved;
* B's final parameters match B's own uninterrupted run within
  ``max(RATIO_LIMIT x d(A, B), FLOOR[dtype])``, where d(A, B) is how far A's
  and B's uninterrupted runs end apart: a checkpoint from A carries A's
  rounding, and nothing more should be different.  For A = B that bound is the
  floor: a deterministic backend must resume bit for bit.

What was not carried over (a device RNG with no counterpart on B, tensors a
module keeps outside its ``state_dict``) is listed in the figures and the reason.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torchport.check.parity import load_tensor
from torchport.check.tolerance import FLOOR, RATIO_LIMIT, tensor_error, trajectory_error
from torchport.records import (Check, CheckpointFigures, CheckStatus, OutsideState, ResumedRun, SavedCheckpoint,
                               TrainedRun)


def flat_parameters(path: str) -> Any:
    import torch

    parameters = load_tensor(path)
    return torch.cat([parameters[name].to(torch.float64).reshape(-1) for name in sorted(parameters)])


def outside_note(found: Sequence[OutsideState | str]) -> str:
    """The one wording for state a checkpoint cannot carry (the checkpoint,
    recovery and distributed checks share it): each name with its kind and
    the line that created it."""
    items = []
    for item in found[:3]:
        if isinstance(item, str):
            items.append(item)
            continue
        where = f", created at {item.line}" if item.line else ""
        items.append(f"{item.name} ({item.kind}{where})")
    return f"not in the checkpoint (state outside state_dict): {', '.join(items)}"


def check(source: str, target: str, saved: SavedCheckpoint | None, resumed: ResumedRun | None,
          source_run: TrainedRun | None, target_run: TrainedRun, dtype: str) -> Check:
    figures = CheckpointFigures.begin()
    result = Check(name="checkpoint", pair=f"{source} -> {target}", status=CheckStatus.FAIL, figures=figures)
    if saved is None or saved.error:
        result.reason = f"saving on {source} failed: {saved.error if saved else 'no checkpoint was written'}"
        return result
    figures.put(step=saved.step, steps=target_run.steps, bytes=saved.bytes,
                outside_state_dict=saved.outside_state_dict, outside_state=saved.outside_state)
    if resumed is None:
        result.status, result.reason = CheckStatus.ERROR, f"no resume was run on {target}"
        return result
    if resumed.error:
        result.reason = f"loading on {target} failed: {resumed.error}"
        return result
    figures.put(not_restored=resumed.not_restored)
    if resumed.changed_on_load:
        result.reason = (f"state changed on load into {target}: {', '.join(resumed.changed_on_load[:3])} "
                         "does not read back as saved")
        return result
    assert resumed.final_file and target_run.final_file, "a resumed run and the run it resumes save their parameters"
    resumed_final = flat_parameters(resumed.final_file)
    error = tensor_error(resumed_final, flat_parameters(target_run.final_file))
    if source == target:
        apart = 0.0
    else:
        assert source_run is not None and source_run.final_file, f"{source} saved a checkpoint, so it has a run"
        apart = tensor_error(flat_parameters(source_run.final_file), flat_parameters(target_run.final_file))
    bound = max(RATIO_LIMIT * apart, FLOOR[dtype])
    figures.put(
        parameter_error=error,
        backends_apart=apart,
        bound=bound,
        bit_exact=error == 0.0,
        loss_error=trajectory_error(resumed.losses, target_run.losses[saved.step:]),
    )
    notes = []
    if figures.outside_state_dict:
        notes.append(outside_note(figures.outside_state or figures.outside_state_dict))
    if figures.not_restored:
        notes.append(f"not restored: {'; '.join(figures.not_restored)}")
    note = f"; {'; '.join(notes)}" if notes else ""
    if error <= bound:
        result.status = CheckStatus.PASS
        exact = "bit for bit" if error == 0.0 else f"within {bound:.1e} (parameter error {error:.1e})"
        result.reason = f"resumed at step {saved.step} on {target} and matched its uninterrupted run {exact}{note}"
    else:
        result.reason = (f"resumed on {target} ends {error:.2e} away from its uninterrupted run (bound {bound:.1e}, "
                         f"{source} and {target} end {apart:.1e} apart){note or '; the state that differs is not in the checkpoint'}")
    return result
