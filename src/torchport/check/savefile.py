"""Checkpoint files that are validated before they are loaded.

``torch.save`` writes the state; a small JSON sidecar (``FILE.meta.json``)
records its size and SHA-256.  ``load`` refuses a file whose size or checksum
does not match (truncated by a crash, corrupted in a copy) before ``torch.load``
sees a byte of it, and then loads with ``weights_only=True`` so that a
checkpoint can never run code.

Both files are written to a temporary name and renamed, so a process killed
mid-save leaves the previous checkpoint intact.  Runs on torch 2.9 and newer.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from torchport.records import CheckpointFile

# A torch payload: what ``torch.save`` writes and ``torch.load(weights_only=True)`` reads back (state dicts,
# RNG states, tensors by name).  Its keys are torch's and the app's, not torchport's: free-form by nature.
TorchState = dict[str, Any]


class CheckpointError(Exception):
    """A checkpoint that cannot be written or must not be loaded; the message is
    the one-line reason the check reports."""


def sidecar(path: str | Path) -> Path:
    return Path(f"{path}.meta.json")


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def save(state: TorchState, path: str | Path) -> CheckpointFile:
    """Write ``state`` and its sidecar atomically; return the sidecar record."""
    import torch

    path = Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        torch.save(state, temporary)
    except Exception as exc:
        temporary.unlink(missing_ok=True)
        raise CheckpointError(f"torch.save failed: {type(exc).__name__}: {exc}") from None
    record = CheckpointFile(bytes=temporary.stat().st_size, sha256=sha256_file(temporary), step=state.get("step"))
    meta_temporary = sidecar(temporary)
    meta_temporary.write_text(json.dumps(record.to_dict()), encoding="utf-8")
    # The data first, then the sidecar that vouches for it: a crash in between
    # leaves a sidecar that no longer matches, which load() reports.
    os.replace(temporary, path)
    os.replace(meta_temporary, sidecar(path))
    return record


def validate(path: str | Path) -> CheckpointFile:
    """Size and checksum against the sidecar; raises CheckpointError with the reason."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"checkpoint file missing: {path}")
    meta_path = sidecar(path)
    try:
        record = CheckpointFile.from_dict(json.loads(meta_path.read_text(encoding="utf-8")))
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"checkpoint {path.name} has no readable size/checksum record ({meta_path.name}): "
                              f"{type(exc).__name__}; not loaded") from None
    size = path.stat().st_size
    if size != record.bytes:
        what = "truncated" if size < record.bytes else "larger than written"
        raise CheckpointError(f"checkpoint {path.name} is {what}: {size} bytes, {record.bytes} written; not loaded")
    if sha256_file(path) != record.sha256:
        raise CheckpointError(f"checkpoint {path.name} is corrupt: SHA-256 differs from the one recorded at save; not loaded")
    return record


def load(path: str | Path) -> TorchState:
    """Validate, then ``torch.load(weights_only=True)`` onto the CPU."""
    import torch

    validate(path)
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        message = str(exc).strip().splitlines()
        detail = next((line for line in message if "Unsupported global" in line or "GLOBAL" in line),
                      message[0] if message else "")
        raise CheckpointError(f"torch.load(weights_only=True) refused the checkpoint: {type(exc).__name__}: {detail.strip()}") from None
