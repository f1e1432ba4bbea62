"""Facts about where torchport runs: the machine, its torch and accelerators,
recorded in every result document's ``environment`` (and printed by
``torchport info``), and the git state of an app's source.

Not to be confused with ``torchport.envs``, the cached Python environments
that hold optional backends' packages.
"""
from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from pathlib import Path

from torchport.records import Accelerator, MachineEnvironment


def environment_record() -> MachineEnvironment:
    from torchport.backends import cpu_only_torch, plugin_problems

    cpu_only = cpu_only_torch()
    if cpu_only:  # no GPU runtime to ask about: skip importing torch in the parent
        torch_version, cuda, hip = cpu_only, None, None
    else:
        import torch

        torch_version, cuda, hip = torch.__version__, torch.version.cuda, getattr(torch.version, "hip", None)
    return MachineEnvironment(
        python=platform.python_version(),
        torch=torch_version,
        torch_cuda=cuda,
        torch_hip=hip,
        platform=platform.platform(),
        cpu=_cpu_model(),
        cpu_count=os.cpu_count() or 1,
        memory_bytes=_memory_bytes(),
        hostname=socket.gethostname(),
        executable=sys.executable,
        accelerators=[] if cpu_only else _accelerators(),
        driver=_nvidia_driver(),
        backend_plugin_problems=[problem.as_dict() for problem in plugin_problems()],
    )


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _accelerators() -> list[Accelerator]:
    import torch

    found = []
    if torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(index)
            found.append(Accelerator(type="cuda", index=index, name=props.name, memory_bytes=props.total_memory))
    return found


def _nvidia_driver() -> str | None:
    from torchport.backends.cuda import driver_version

    return driver_version()


def git_state(path: Path) -> tuple[str | None, bool | None]:
    """The commit of the git repository holding ``path`` and whether it has
    uncommitted changes; (None, None) outside a repository."""
    folder = path if path.is_dir() else path.parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        if commit.returncode != 0:
            return None, None
        dirty = subprocess.run(
            ["git", "-C", str(folder), "status", "--porcelain", "--", str(path)],
            capture_output=True, text=True, timeout=10,
        )
        return commit.stdout.strip(), bool(dirty.stdout.strip())
    except (OSError, subprocess.TimeoutExpired):
        return None, None
