"""Peak host memory per worker phase.

Linux keeps a process's resident high-water mark (``VmHWM`` in
``/proc/self/status``) and lets the process reset it to the current resident
size by writing ``5`` to ``/proc/self/clear_refs``.  So at each phase boundary
the peak of the phase that ends is read and the mark reset: every phase gets
its own peak (what that phase added on top of what it inherited), and the
process's peak is at least the largest of them: a spike between a reading and
its reset belongs to no phase, though the kernel may still count it (a thread
that exits leaves its mark in ``ru_maxrss``, and no reset clears that).  Resetting the mark also resets what
``getrusage``'s ``ru_maxrss`` reports for this process, which is why the
process's peak is read through ``process_peak_bytes()`` (it remembers the mark
before every reset), never from ``ru_maxrss`` alone.

Where the mark cannot be read or reset (not Linux, a restricted /proc), only
the process's peak is recorded, from ``ru_maxrss``, and the phases are left out.

Runs in the worker on every torch a backend environment holds: standard library only.
"""
from __future__ import annotations

import resource
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchport.records import HostMemory

STATUS = "/proc/self/status"
CLEAR_REFS = "/proc/self/clear_refs"
RESET_PEAK = "5"  # clear_refs command: reset the peak resident set size (Linux 4.0+)


def _read_kib(field: str) -> int | None:
    try:
        with open(STATUS, encoding="ascii") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


_peak_before_resets = 0  # bytes: the highest mark seen before any reset in this process


def _reset_mark(mark: int | None = None) -> bool:
    """Reset the high-water mark, remembering it first: ``mark`` is the value
    the caller has just read and recorded (KiB), so that the process's peak
    and the phases' figures come from the same reading (the kernel's resident
    counts are updated lazily, so two readings a moment apart can differ by
    megabytes)."""
    global _peak_before_resets
    if mark is None:
        mark = _read_kib("VmHWM")
    if mark is not None:
        _peak_before_resets = max(_peak_before_resets, mark * 1024)
    try:
        with open(CLEAR_REFS, "w", encoding="ascii") as handle:
            handle.write(RESET_PEAK)
        return True
    except OSError:
        return False


def rusage_peak_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def process_peak_bytes() -> int:
    """This process's peak resident size, across the resets of the phases."""
    return max(rusage_peak_bytes(), _peak_before_resets)


class PhasePeaks:
    """``enter(name)`` at each phase boundary; ``record()`` gives the peaks so far."""

    def __init__(self) -> None:
        self.phases: dict[str, int] = {}  # phase -> peak resident bytes, in the order the phases ran
        self.current: str | None = None
        self.per_phase = _read_kib("VmHWM") is not None and _reset_mark()

    def enter(self, name: str) -> None:
        """Close the running phase (its peak) and start ``name``."""
        if not self.per_phase:
            return
        self._close()
        self.current = name

    def _close(self) -> None:
        peak_kib = _read_kib("VmHWM")
        if peak_kib is None:
            return
        name = self.current or "start"
        self.phases[name] = max(self.phases.get(name, 0), peak_kib * 1024)
        _reset_mark(peak_kib)

    def record(self) -> HostMemory:
        """The peak so far and, where the mark resets, each phase's; closes
        the running phase's figure so far (and keeps measuring it)."""
        from torchport.records import HostMemory  # imported with the backends, before the first save

        if not self.per_phase:
            return HostMemory(peak_bytes=process_peak_bytes(), phases=None, method="getrusage ru_maxrss")
        running = self.current
        self._close()
        self.current = running
        return HostMemory(peak_bytes=process_peak_bytes(), phases=dict(self.phases),
                          method="VmHWM per phase, reset at each boundary through /proc/self/clear_refs")
