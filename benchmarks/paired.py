"""One round of a paired benchmark: torchport's real worker and another
process run at the same time and take turns block by block
(``torchport.turns``), so both see the same machine.  Used by bench_loop.py
(against a hand-written loop) and bench_script.py (against a self-timed script).
"""
from __future__ import annotations

import subprocess
import tempfile
import threading
from typing import Any
from collections.abc import Callable


def run_paired(command: list[str], what: str, worker: Callable[[dict[str, str]], dict[str, Any]],
               expected_turns: int) -> tuple[dict[str, Any], str]:
    """Run ``command`` beside ``worker(turn_environment)`` (a launch.run_worker
    call); return the worker's result and the command's last stdout line.
    Exits with the reason when either fails or when they were not paired."""
    from torchport.launch import worker_environment
    from torchport.turns import TurnCoordinator

    coordinator = TurnCoordinator(parties=2)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        try:
            # The environment torchport gives its workers (allocator settings included).
            other = subprocess.Popen(command, stdout=out, stderr=err, text=True,
                                     env={**worker_environment(), **coordinator.environment})

            def release_if_it_fails() -> None:
                # A process that dies before its turns are done must not leave the worker waiting.
                if other.wait() != 0:
                    coordinator.close()

            threading.Thread(target=release_if_it_fails, daemon=True).start()
            result = worker(coordinator.environment)
            if result.get("status") != "ok":
                coordinator.close()  # let the other process finish alone rather than wait forever
            other.wait()
        finally:
            coordinator.close()
        out.seek(0)
        err.seek(0)
        other_out, other_err = out.read(), err.read()
    if other.returncode != 0:
        raise SystemExit(f"{what} failed:\n{other_err[-2000:]}")
    if result.get("status") != "ok":
        raise SystemExit(f"torchport worker {result.get('status')}: {result.get('error')}\n"
                         + "\n".join(result.get("stderr_tail", [])))
    if coordinator.turns_granted != expected_turns:
        raise SystemExit(f"the two processes took {coordinator.turns_granted} turns, expected {expected_turns}: "
                         "not paired")
    return result, other_out.strip().splitlines()[-1]
