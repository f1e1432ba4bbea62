"""Test-only backends, discovered through TORCHPORT_BACKEND_PATH: CPU
backends under other names, so that one evaluation can carry a different
fault on each (tests/apps/faults/by_backend.py picks its fault from the
worker's TORCHPORT_BACKEND).  This file is also the proof that a backend is
added in one module."""
from torchport.backends.cpu import CPU

FAULTS = ("unsupported", "oom", "multiline", "hostile", "segfault", "flood", "nan", "exit", "hang", "setsid")


def _backend(fault: str) -> type:
    return type(f"Fault_{fault}", (CPU,), {"name": f"fault-{fault}", "title": f"CPU, with the planted fault {fault!r}",
                                           "verification": "test-only backend"})


for _fault in FAULTS:
    globals()[f"Fault_{_fault}"] = _backend(_fault)


class HostileName(CPU):
    name = "odd[/x]</td><script>`|"
    title = "CPU under a hostile name [bold]x[/bold] </td>"
    verification = "test-only backend"


class ControlName(CPU):
    # Control characters a terminal would obey (colour, bell, carriage return, a new line).
    name = "ctl\x1b[31m\x07\r\nname"
    title = "CPU under a name with control characters \x1b]0;title\x07"
    verification = "test-only backend"
