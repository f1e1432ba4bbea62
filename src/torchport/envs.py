"""Isolated Python environments for backends that need another torch.

The only torch_xla on the package index (2.9.0) requires torch 2.9.0 exactly,
while torchport itself runs on the current torch.  So the ``xla`` backend's
worker runs in a virtual environment of its own, which torchport creates on
request (``torchport env create xla``) under its cache folder and then reuses:

    $TORCHPORT_CACHE/envs/<name>/       (default $XDG_CACHE_HOME/torchport/envs/<name>/, ~/.cache/torchport/...)
        bin/python                       the worker's interpreter
        torchport-env.json               the manifest, written last

An environment holds only the backend's requirements and their dependencies:
the worker imports this torchport through PYTHONPATH (see torchport.launch),
so nothing of torchport is installed there.  The manifest records what was
asked for and what pip actually installed; the result document carries it.

Only an environment with a manifest counts as created: the manifest is written
after pip succeeded, so an interrupted creation never looks usable.

Optional extras follow torchport's own: where ``torchport[hf]`` is installed
(``transformers`` importable here), ``env create`` also installs the same
``transformers`` version into the environment, so ``hf:`` specs run on that
backend too; an environment created before is topped up, not rebuilt.  The
extras are recorded in the manifest (``extras``) but do not decide readiness.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Callable

from torchport.errors import UserError
from torchport.records import EnvManifest, EnvState

MANIFEST = "torchport-env.json"


class EnvironmentMissing(UserError):
    """A backend's environment is absent or unusable: that backend cannot run,
    the others can.  ``kind`` keeps it apart from a fault in the user's app."""

    kind = "environment"


@dataclass(frozen=True)
class EnvSpec:
    name: str
    purpose: str
    requirements: tuple[str, ...]
    # Distributions whose installed versions the manifest records (the rest of
    # `pip freeze` is dependencies nobody compares).
    recorded: tuple[str, ...]
    # What the first creation costs, measured; printed before pip starts.
    size: str = "several GB"


SPECS: dict[str, EnvSpec] = {
    spec.name: spec
    for spec in [
        EnvSpec(
            name="xla",
            purpose="PyTorch/XLA: torch_xla 2.9.0 is the newest release on PyPI and pins torch 2.9.0",
            requirements=("torch==2.9.0", "torch_xla==2.9.0"),
            recorded=("torch", "torch_xla", "libtpu"),
            size="about 7 GB",
        ),
        EnvSpec(
            name="tpu",
            purpose=("TorchTPU: torch_tpu 0.2.0 (with its libtpu) next to the CPU build of torch 2.13.0, for the "
                     "tpu backends where torch_tpu is not importable from torchport's own interpreter; torch is "
                     "pinned in the same pip command so that pip cannot pull a CUDA build"),
            requirements=("torch==2.13.0", "torch_tpu==0.2.0"),
            recorded=("torch", "torch_tpu", "libtpu"),
            # Measured 2026-11-30: 1.9 GB on disk, 3.5 min on a loaded 2-core machine.
            size="about 1.9 GB",
        ),
    ]
}


# Distributions of torchport's optional extras that a backend environment gets
# too when this torchport has them (same version as here).
EXTRA_DISTRIBUTIONS = ("transformers",)


def wanted_extras() -> list[str]:
    """``name==version`` of each optional extra installed in torchport's own environment."""
    from importlib import metadata

    wanted = []
    for name in EXTRA_DISTRIBUTIONS:
        try:
            wanted.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return wanted


def cache_root() -> Path:
    """$TORCHPORT_CACHE, else torchport/ in the XDG cache folder ($XDG_CACHE_HOME, default ~/.cache)."""
    configured = os.environ.get("TORCHPORT_CACHE")
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    # The XDG spec ignores a relative path: it would depend on the folder torchport was started in.
    base = Path(xdg).expanduser() if xdg and Path(xdg).expanduser().is_absolute() else Path.home() / ".cache"
    return base / "torchport"


PACKAGE_DIR = Path(__file__).resolve().parent


def import_root() -> str:
    """The folder a worker puts first on its PYTHONPATH to import this torchport.

    From a checkout that is ``src/``, which holds only the package.  An installed
    copy lives in site-packages, whose torch would shadow the worker environment's
    own (the xla environment's torch 2.9 then fails with an undefined symbol), so
    a cache folder holding only a link to the package stands in for it there."""
    parent = PACKAGE_DIR.parent
    if all(entry.name.startswith(("torchport", "__pycache__", ".")) for entry in parent.iterdir()):
        return str(parent)
    digest = hashlib.sha256(str(PACKAGE_DIR).encode()).hexdigest()[:16]
    root = cache_root() / "import-roots" / digest
    link = root / PACKAGE_DIR.name
    if link.is_symlink() and link.resolve() == PACKAGE_DIR:
        return str(root)
    try:
        root.mkdir(parents=True, exist_ok=True)
        staged = root / f".{PACKAGE_DIR.name}.{os.getpid()}"
        staged.unlink(missing_ok=True)
        staged.symlink_to(PACKAGE_DIR, target_is_directory=True)
        os.replace(staged, link)  # atomic: concurrent commands see the old link or the new one
    except OSError:
        return str(parent)  # no links here: the installed folder, as before
    return str(root)


def spec_for(name: str) -> EnvSpec:
    if name not in SPECS:
        raise UserError(f"unknown environment {name!r} (known: {', '.join(SPECS)})")
    return SPECS[name]


def env_dir(name: str) -> Path:
    return cache_root() / "envs" / spec_for(name).name


def _interpreter(folder: Path) -> Path:
    return folder / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def create_command(name: str) -> str:
    return f"torchport env create {name}"


def read_manifest(name: str) -> EnvManifest | None:
    try:
        data = json.loads((env_dir(name) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return EnvManifest.from_dict(data) if isinstance(data, dict) else None


def state(name: str) -> EnvState:
    """Where the environment is and whether it is usable, without starting it."""
    folder = env_dir(name)
    python = _interpreter(folder)
    manifest = read_manifest(name)
    record = EnvState(name=name, path=str(folder), python=str(python), manifest=manifest)
    if not folder.exists():
        record.problem = f"the {name} environment does not exist ({folder})"
    elif manifest is None:
        record.problem = f"the {name} environment at {folder} is incomplete (no {MANIFEST}: creation did not finish)"
    elif not os.access(python, os.X_OK):
        record.problem = f"the {name} environment at {folder} has no working interpreter ({python})"
    elif manifest.requirements != list(spec_for(name).requirements):
        record.problem = (f"the {name} environment at {folder} was made for {' '.join(manifest.requirements)}, "
                          f"this torchport needs {' '.join(spec_for(name).requirements)}")
    else:
        record.ready = True
    return record


def status(name: str) -> dict[str, Any]:
    """``state(name)`` as JSON (``torchport info``, and readers not yet on the record)."""
    return state(name).to_dict()


def python_for(name: str) -> Path:
    """The environment's interpreter, or a UserError that says how to create it."""
    record = state(name)
    if not record.ready:
        raise EnvironmentMissing(f"{record.problem}; run: {create_command(name)}")
    return Path(record.python)



def create(name: str, progress: Callable[[str], None], force: bool = False) -> EnvManifest:
    """Make (or reuse) the environment; return its manifest.  ``progress`` gets
    one line at a time, pip's output included."""
    spec = spec_for(name)
    folder = env_dir(name)
    current = state(name)
    extras = wanted_extras()
    if current.ready and current.manifest is not None and not force:
        manifest = current.manifest
        missing = [extra for extra in extras if extra not in manifest.extras]
        if missing:
            manifest = add_extras(name, manifest, missing, progress)
        progress(f"{name}: already created at {folder} ({versions_text(manifest)}); "
                 f"use --force to rebuild it")
        return manifest
    if folder.exists():
        progress(f"{name}: removing the previous environment at {folder}")
        shutil.rmtree(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    progress(f"{name}: creating a virtual environment at {folder} (Python {sys.version.split()[0]})")
    _run([_base_python(), "-m", "venv", str(folder)], progress, "creating the virtual environment")
    python = str(_interpreter(folder))
    progress(f"{name}: installing {' '.join(spec.requirements)} ({spec.size}; pip's cache is reused)")
    _run([python, "-m", "pip", "install", "--progress-bar", "off", *spec.requirements], progress,
         f"pip install {' '.join(spec.requirements)}")
    manifest = EnvManifest(
        name=name,
        purpose=spec.purpose,
        requirements=list(spec.requirements),
        extras=[],
        installed=_installed_versions(python, spec.recorded),
        python=_python_version(python),
        created=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    )
    # Written last: its presence is what makes the environment usable.
    _write_manifest(folder, manifest)
    if extras:
        manifest = add_extras(name, manifest, extras, progress)
    progress(f"{name}: ready ({versions_text(manifest)})")
    return manifest


def add_extras(name: str, manifest: EnvManifest, extras: list[str], progress: Callable[[str], None]) -> EnvManifest:
    """Install ``extras`` into a ready environment, keeping its requirements
    pinned (pip must not move torch), and rewrite the manifest."""
    spec = spec_for(name)
    python = str(_interpreter(env_dir(name)))
    progress(f"{name}: adding {' '.join(extras)} (torchport's optional extras)")
    _run([python, "-m", "pip", "install", "--progress-bar", "off", *extras, *spec.requirements], progress,
         f"pip install {' '.join(extras)}")
    by_name = {extra.split("==")[0]: extra for extra in [*manifest.extras, *extras]}  # newest wins
    manifest.put(extras=sorted(by_name.values()))
    _write_manifest(env_dir(name), manifest)
    return manifest


def _write_manifest(folder: Path, manifest: EnvManifest) -> None:
    (folder / MANIFEST).write_text(json.dumps(manifest.to_dict(), indent=1) + "\n", encoding="utf-8")


def remove(name: str) -> bool:
    folder = env_dir(name)
    if not folder.exists():
        return False
    shutil.rmtree(folder)
    return True


def _base_python() -> str:
    # A venv made from inside another venv should start from the real interpreter.
    return getattr(sys, "_base_executable", None) or sys.executable


def _run(command: list[str], progress: Callable[[str], None], what: str) -> None:
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               text=True, bufsize=1)
    tail: list[str] = []
    assert process.stdout is not None
    for line in process.stdout:
        line = line.rstrip()
        if line:
            progress(line)
            tail = (tail + [line])[-3:]
    if process.wait() != 0:
        last = " | ".join(tail) or "no output"
        raise UserError(f"{what} failed (exit status {process.returncode}): {last}")


def _installed_versions(python: str, distributions: tuple[str, ...]) -> dict[str, str]:
    """The `pip freeze` lines of the recorded distributions: what is really there."""
    frozen = subprocess.run([python, "-m", "pip", "freeze"], capture_output=True, text=True, check=True).stdout
    wanted = {_normalise(name) for name in distributions}
    versions = {}
    for line in frozen.splitlines():
        name, sep, version = line.partition("==")
        if sep and _normalise(name) in wanted:
            versions[_normalise(name)] = version.strip()
    return versions


def _normalise(distribution: str) -> str:
    return distribution.lower().replace("-", "_")


def _python_version(python: str) -> str:
    return subprocess.run([python, "-c", "import sys; print(sys.version.split()[0])"],
                          capture_output=True, text=True, check=True).stdout.strip()


def versions_text(manifest: EnvManifest | None) -> str:
    installed = (manifest.installed if manifest else None) or {}
    text = ", ".join(f"{name} {version}" for name, version in installed.items()) or "no versions recorded"
    extras = (manifest.extras if manifest else None) or []
    return f"{text}; extras: {', '.join(extras)}" if extras else text
