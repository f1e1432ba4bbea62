"""What goes to a remote: torchport as a wheel of the running code, and the app's folder.

The wheel is built from the files of the ``torchport`` package being run, so
the remote runs exactly this code; its version carries a hash of those files
(``0.1.0+t1a2b3c4d5e6``), which also names the remote venv it is installed in:
the same code reuses the venv, other code gets its own.
"""
from __future__ import annotations

import base64
import hashlib
import io
import os
import subprocess
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import torchport
from torchport.errors import UserError

DEFAULT_MAX_UPLOAD_MB = 200
# Skipped when the folder is not in git (in git, .gitignore decides).
_NOT_SHIPPED = {".git", "__pycache__", ".venv", "venv", ".mypy_cache", ".ruff_cache", ".pytest_cache",
                "node_modules", "torchport-results"}
_PACKAGE_DATA = (".py", ".json", ".toml")
# Installed on the remote next to torch, which must already be there (never downloaded by torchport).
FALLBACK_REQUIREMENTS = ("rich>=13", "jsonschema>=4.20", "packaging>=22", "numpy>=1.24", "coverage>=7", "psutil>=5.9")


@dataclass(frozen=True)
class Wheel:
    filename: str
    data: bytes
    key: str  # the code's hash: names the remote venv
    requirements: tuple[str, ...]


def _package_files() -> list[tuple[str, bytes]]:
    root = Path(torchport.__file__).resolve().parent
    files = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.suffix in _PACKAGE_DATA and "__pycache__" not in path.parts:
            files.append(("torchport/" + path.relative_to(root).as_posix(), path.read_bytes()))
    return files


def _requirements() -> tuple[str, ...]:
    try:
        from importlib.metadata import requires

        found = requires("torchport") or []
    except Exception:  # not installed as a distribution: the running code alone
        found = []
    kept = tuple(r for r in found if "extra ==" not in r and not r.replace(" ", "").startswith("torch"))
    return kept or FALLBACK_REQUIREMENTS


def build_wheel() -> Wheel:
    files = _package_files()
    requirements = _requirements()
    digest = hashlib.sha256()
    for name, data in files:
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    digest.update("\n".join(requirements).encode())
    key = digest.hexdigest()[:12]
    version = f"{torchport.__version__}+t{key}"
    dist_info = f"torchport-{version}.dist-info"
    metadata = "".join([f"Metadata-Version: 2.1\nName: torchport\nVersion: {version}\n",
                        *(f"Requires-Dist: {r}\n" for r in requirements)])
    extra = [(f"{dist_info}/METADATA", metadata.encode()),
             (f"{dist_info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: torchport\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
             (f"{dist_info}/entry_points.txt", b"[console_scripts]\ntorchport = torchport.cli:main\n")]
    record = []
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in [*files, *extra]:
            # A fixed date: the same code gives the same wheel.
            archive.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), data, zipfile.ZIP_DEFLATED)
            hashed = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{name},sha256={hashed},{len(data)}")
        record.append(f"{dist_info}/RECORD,,")
        archive.writestr(zipfile.ZipInfo(f"{dist_info}/RECORD", date_time=(2020, 1, 1, 0, 0, 0)), "\n".join(record) + "\n")
    return Wheel(f"torchport-{version}-py3-none-any.whl", buffer.getvalue(), key, requirements)


def _git_files(folder: Path) -> list[str] | None:
    """Files git would keep (tracked and untracked, .gitignore respected), or None outside git."""
    try:
        listed = subprocess.run(["git", "-C", str(folder), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if listed.returncode != 0:
        return None
    return [name for name in listed.stdout.decode(errors="surrogateescape").split("\0") if name]


def folder_files(folder: Path) -> list[str]:
    names = _git_files(folder)
    if names is None:
        names = []
        for current, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if d not in _NOT_SHIPPED)
            rel = Path(current).relative_to(folder)
            names += [(rel / f).as_posix() for f in sorted(files) if not f.endswith(".pyc")]
    return [n for n in names if (folder / n).is_file() and not (folder / n).is_symlink()]


def pack_folder(folder: Path | None, max_bytes: int) -> bytes:
    """The folder as a tar.gz (an empty one for None); refused above max_bytes."""
    names = folder_files(folder) if folder is not None else []
    if folder is not None:
        sizes = {n: (folder / n).stat().st_size for n in names}
        total = sum(sizes.values())
        if total > max_bytes:
            largest = ", ".join(f"{n} ({s / 1e6:.1f} MB)" for n, s in sorted(sizes.items(), key=lambda i: -i[1])[:3])
            raise UserError(f"the app's folder holds {total / 1e6:.1f} MB to ship, above the {max_bytes / 1e6:.0f} MB cap "
                            f"(largest: {largest}); add them to .gitignore, ship a smaller --workdir or raise --max-upload",
                            location=str(folder))
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name in names:
            assert folder is not None
            archive.add(folder / name, arcname=name, recursive=False)
    return buffer.getvalue()
