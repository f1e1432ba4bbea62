"""Whether this CPU runs bfloat16 natively: looked up in a named source, never guessed.

``--redirect-cuda`` turns a script's CUDA autocast into bfloat16 autocast on
the backend's device.  A CPU without bfloat16 instructions emulates it
(measured 2026-12-02 on an AMD EPYC with AVX2 only: 2.03 s against 0.08 s a
step in float32, three convolutions at batch 64), so the step times are the
emulation's, not the target's, and the report has to say so.

The sources: on Linux x86 the ``flags`` line of /proc/cpuinfo
(``avx512_bf16``, ``amx_bf16``), on Linux aarch64 its ``Features`` line
(``bf16``), on macOS arm64 ``sysctl hw.optional.arm.FEAT_BF16``.  Anywhere
else, or where the source does not answer, the answer is unknown.  Parsing is
a pure function of the text, so it is tested on real cpuinfo text.
"""
from __future__ import annotations

import functools
import platform
import subprocess
from pathlib import Path

from torchport.records import CpuBfloat16
from torchport.text import one_line

CPUINFO = "/proc/cpuinfo"
MACOS_KEY = "hw.optional.arm.FEAT_BF16"
# Per architecture (platform.machine()): the cpuinfo line that lists the ISA extensions, and the
# extensions that execute bfloat16 arithmetic (any one is enough).
_CPUINFO_LOOKUPS = {
    "x86_64": ("flags", ("avx512_bf16", "amx_bf16")),
    "amd64": ("flags", ("avx512_bf16", "amx_bf16")),
    "aarch64": ("Features", ("bf16",)),
    "arm64": ("Features", ("bf16",)),
}


def _listed(text: str, key: str) -> list[set[str]]:
    """The extensions each processor's ``key`` line lists (one set per processor, in order)."""
    found = []
    for line in text.splitlines():
        name, colon, value = line.partition(":")
        if colon and name.strip() == key:
            found.append(set(value.split()))
    return found


def from_cpuinfo(text: str, machine: str) -> CpuBfloat16:
    """Read /proc/cpuinfo's ``text`` on a ``machine`` (platform.machine()): native only when every
    processor lists a bfloat16 extension, emulated when none does, unknown otherwise."""
    lookup = _CPUINFO_LOOKUPS.get(machine.lower())
    if lookup is None:
        return CpuBfloat16(native=None, source=CPUINFO,
                           evidence=f"no bfloat16 lookup for the {one_line(machine, 40) or 'unnamed'} architecture")
    key, extensions = lookup
    source = f"{CPUINFO} {key}"
    wanted = "/".join(extensions)
    processors = _listed(text, key)
    if not processors:
        return CpuBfloat16(native=None, source=source, evidence=f"no '{key}' line in {CPUINFO}")
    having = [sorted(flags.intersection(extensions)) for flags in processors]
    if all(having):
        named = "/".join(sorted({name for names in having for name in names}))
        return CpuBfloat16(native=True, source=source, evidence=f"{named} in {CPUINFO}")
    if not any(having):
        return CpuBfloat16(native=False, source=source, evidence=f"no {wanted} in {CPUINFO}")
    # A hybrid CPU whose cores differ: which of them the run used is not known.
    count = sum(1 for names in having if names)
    return CpuBfloat16(native=None, source=source,
                       evidence=f"{wanted} on {count} of {len(processors)} processors in {CPUINFO}")


def from_sysctl(value: str | None) -> CpuBfloat16:
    """Read ``sysctl -n hw.optional.arm.FEAT_BF16``'s output (None: sysctl has no such key)."""
    source = f"sysctl {MACOS_KEY}"
    answer = (value or "").strip()
    if answer == "1":
        return CpuBfloat16(native=True, source=source, evidence=f"{MACOS_KEY}: 1")
    if answer == "0":
        return CpuBfloat16(native=False, source=source, evidence=f"{MACOS_KEY}: 0")
    if value is None:
        return CpuBfloat16(native=None, source=source, evidence=f"sysctl has no {MACOS_KEY}")
    return CpuBfloat16(native=None, source=source, evidence=f"{MACOS_KEY}: {one_line(answer, 40)!r}")


def _sysctl(key: str) -> str | None:
    try:
        completed = subprocess.run(["sysctl", "-n", key], capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return completed.stdout if completed.returncode == 0 else None


def torch_cpu_capability() -> str | None:
    """The vector instruction set torch's CPU kernels dispatch to ("AVX2", "AVX512", "DEFAULT", ...): it says
    nothing about bfloat16 instructions (an AVX-512 CPU without avx512_bf16 reads "AVX512"), so it is
    recorded beside the lookup, never used for it."""
    try:
        import torch

        return str(torch.backends.cpu.get_cpu_capability())
    except (ImportError, AttributeError, RuntimeError):
        return None


@functools.cache
def detect() -> CpuBfloat16:
    """This CPU's answer, from the source its system has (looked up once per process)."""
    system, machine = platform.system(), platform.machine()
    if system == "Linux":
        try:
            text = Path(CPUINFO).read_text(errors="replace")
        except OSError as exc:
            found = CpuBfloat16(native=None, source=CPUINFO, evidence=f"{CPUINFO} unreadable: {exc.strerror}")
        else:
            found = from_cpuinfo(text, machine)
    elif system == "Darwin" and machine == "arm64":
        found = from_sysctl(_sysctl(MACOS_KEY))
    else:
        found = CpuBfloat16(native=None, source="",
                            evidence=f"no bfloat16 lookup on {one_line(system, 40)} {one_line(machine, 40)}")
    found.torch_cpu_capability = torch_cpu_capability()
    return found


def emulation_note(found: CpuBfloat16) -> str | None:
    """What a bfloat16 autocast's record adds on this CPU: None where it is native."""
    if found.native is True:
        return None
    if found.native is False:
        return f"bfloat16 emulated on this CPU ({found.evidence})"
    return f"bfloat16 on this CPU: native or emulated unknown ({found.evidence})"
