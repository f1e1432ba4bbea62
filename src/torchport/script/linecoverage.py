"""Line coverage of the user's files in script mode's untimed pass, worker processes included.

A Dataset's ``__getitem__``, a ``collate_fn`` or a ``worker_init_fn`` runs
only in the DataLoader's worker processes when ``num_workers > 0``; coverage
of the script's own process alone would call their lines "not executed".
coverage.py follows processes started by ``multiprocessing`` (fork and
spawn, the DataLoader's two start methods here) when its ``concurrency``
setting names ``multiprocessing``: each child measures itself and saves a
data file of its own when it ends, and this process combines them.  That
setting is read from a configuration file only, so the pass writes one, with
the data files, in a folder of its own (never the script's folder).

The patch coverage.py applies to ``multiprocessing`` stays in this process
after the pass; the trace worker ends with the pass, so nothing else starts
a process under it.
"""
from __future__ import annotations

import gc
import glob
import os
import shutil
import tempfile
import time
from typing import Any

from torchport.records import ScriptCoverage

# How long the pass waits for worker processes to end (and save their data)
# once the script stopped: a DataLoader's shutdown joins its workers within
# torch's own 5 s status interval.
CHILDREN_WAIT_S = 15.0
_DATA_FILE = ".coverage"


class LineCoverage:
    """coverage.py over this process and the multiprocessing children it starts."""

    def __init__(self) -> None:
        import coverage

        self.folder = tempfile.mkdtemp(prefix="torchport-coverage-")
        rcfile = os.path.join(self.folder, "coveragerc")
        with open(rcfile, "w", encoding="utf-8") as handle:
            handle.write("[run]\n"
                         f"data_file = {os.path.join(self.folder, _DATA_FILE)}\n"
                         "concurrency = multiprocessing, thread\n"
                         "parallel = True\n"
                         "branch = False\n")
        self.measure = coverage.Coverage(config_file=rcfile)
        self.measure.start()

    def stop(self, is_user_file: Any) -> tuple[dict[str, list[int]], int, int]:
        """Lines run per user file, the number of child processes whose data
        was combined, and the number still running (not measured)."""
        self.measure.stop()
        still_running = _wait_for_children()
        self.measure.save()
        try:
            children = len(glob.glob(os.path.join(self.folder, _DATA_FILE + ".*"))) - 1
            self.measure.combine([self.folder])
            data = self.measure.get_data()
            files = {path: sorted(data.lines(path) or []) for path in data.measured_files()
                     if path.endswith(".py") and is_user_file(path)}
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
        return files, max(children, 0), still_running


def _wait_for_children() -> int:
    """Let the script's DataLoader iterators be collected (their shutdown
    ends the workers, which then save their coverage) and wait for the
    children; returns how many are still running."""
    import multiprocessing

    gc.collect()
    deadline = time.monotonic() + CHILDREN_WAIT_S
    for child in multiprocessing.active_children():
        child.join(max(0.0, deadline - time.monotonic()))
    return len(multiprocessing.active_children())


def start() -> LineCoverage | None:
    """Line coverage of the pass, or None when coverage.py is not installed here."""
    try:
        import coverage  # noqa: F401
    except ImportError:
        return None
    return LineCoverage()


def stop(measure: LineCoverage | None, steps: int) -> ScriptCoverage | None:
    """The pass's coverage as a result records it (``script_coverage``)."""
    if measure is None:
        return None
    import coverage

    from torchport.script.usercode import is_user_file

    files, children, still_running = measure.stop(is_user_file)
    workers = (f"{children} process(es) it started with multiprocessing (DataLoader workers) measured too"
               if children else "it started no process with multiprocessing")
    if still_running:
        workers += f"; {still_running} still running when the pass ended, not measured"
    return ScriptCoverage(source=f"coverage.py {coverage.__version__}: the user's files in the untimed trace pass "
                                 f"(the script on the cpu, its first {steps} steps; {workers})",
                          files=files, processes_measured=1 + children)
