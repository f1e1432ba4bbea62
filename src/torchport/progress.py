"""What a long command shows while it works.

In a terminal: rich's live line (what runs now, runs done / planned, elapsed
and estimated remaining time).  The estimate is the time budget's plan when
there is one (``eta()``: overall and per backend, corrected after every run),
else the mean time of the runs done so far times the runs left.  When stderr is not a terminal (CI logs, a
pipe) a live line would be invisible, so a plain line is printed every
``TORCHPORT_PROGRESS_INTERVAL`` seconds (default 10) and whenever a run ends,
instead of silence.  ``-q`` shows neither; ``-v`` adds a line per worker phase.

Descriptions quote backend names and app text: printed literally, never as
rich markup.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

from torchport import output
from torchport.text import one_line

DEFAULT_INTERVAL_S = 10.0
# A note quotes app messages and paths: one line, capped.
NOTE_CHARS = 2000
INTERVAL_VARIABLE = "TORCHPORT_PROGRESS_INTERVAL"


def _interval() -> float:
    try:
        value = float(os.environ.get(INTERVAL_VARIABLE, DEFAULT_INTERVAL_S))
    except ValueError:
        return DEFAULT_INTERVAL_S
    return value if value > 0 else DEFAULT_INTERVAL_S


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class Progress:
    """``with Progress("evaluate", unit="runs") as progress: ...``"""

    def __init__(self, command: str, unit: str = "runs"):
        from rich.console import Console

        self.command = command
        self.unit = unit
        self.console = Console(stderr=True)
        self.terminal = self.console.is_terminal
        self.total: int | None = None
        self.done = 0
        self.description = "starting"
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._rich: Any = None
        self._task: Any = None
        # The plan's estimate (torchport.budget): seconds left overall and per backend, as of _eta_at.
        self._eta: tuple[float, dict[str, float]] | None = None
        self._eta_at = 0.0
        self._running: str | None = None

    # ---- lifetime ------------------------------------------------------------------
    def __enter__(self) -> Progress:
        if output.quiet():
            return self
        if self.terminal:
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress as RichProgress, SpinnerColumn,
                                       TextColumn, TimeElapsedColumn)

            columns: list[Any] = [SpinnerColumn(), TextColumn("{task.description}", markup=False)]
            if self.unit:  # counted work (evaluate's runs): how many, and the time left
                columns += [BarColumn(), MofNCompleteColumn(), TextColumn(self.unit, markup=False),
                            TimeElapsedColumn(), TextColumn("elapsed,", markup=False),
                            _RemainingColumn(self), TextColumn("left", markup=False)]
            else:
                columns.append(TimeElapsedColumn())
            self._rich = RichProgress(*columns, console=self.console, transient=True)
            self._rich.__enter__()
            self._task = self._rich.add_task(self.description, total=None)
        else:
            self._thread = threading.Thread(target=self._tick, name="torchport-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._rich is not None:
            self._rich.__exit__(*exc)
        if self._thread is not None:
            self._thread.join(timeout=1)

    # ---- what happens --------------------------------------------------------------
    def plan(self, total: int) -> None:
        with self._lock:
            self.total = total
        if self._rich is not None:
            self._rich.update(self._task, total=total)

    def eta(self, seconds: float, per_backend: dict[str, float] | None = None, running: str | None = None) -> None:
        """The plan's estimate of the time left, overall and per backend; the
        overall figure and the ``running`` backend's count down from now until
        the next estimate replaces them (the others wait their turn)."""
        with self._lock:
            self._eta = (max(0.0, seconds), dict(per_backend or {}))
            self._eta_at = time.monotonic()
            self._running = running

    def remaining(self) -> tuple[float | None, dict[str, float]]:
        """Seconds left overall (None: no estimate yet) and per backend, now."""
        with self._lock:
            if self._eta is not None:
                passed = time.monotonic() - self._eta_at
                overall, per_backend = self._eta
                left = max(0.0, overall - passed)
                return (left, {name: min(left, max(0.0, value - passed) if name == self._running else value)
                               for name, value in per_backend.items() if value > 0})
            elapsed = time.monotonic() - self.started
            if self.total and 0 < self.done < self.total:
                return elapsed / self.done * (self.total - self.done), {}
            return None, {}

    def status(self, description: str) -> None:
        description = one_line(description, NOTE_CHARS)  # names backends and phases, which are data
        with self._lock:
            self.description = description
        if self._rich is not None:
            self._rich.update(self._task, description=description)

    def advance(self, what: str) -> None:
        """One unit (a run) ended; ``what`` says which and how."""
        with self._lock:
            self.done += 1
        if self._rich is not None:
            self._rich.advance(self._task)
        elif not output.quiet():
            self._plain(what)

    def note(self, text: str, style: str | None = None) -> None:
        """A line above the live display (stderr); hidden by ``-q``."""
        if output.quiet():
            return
        text = one_line(text, NOTE_CHARS)
        if self._rich is not None or self.terminal:
            self.console.print(text, style=style, markup=False, highlight=False)
        else:
            print(text, file=sys.stderr, flush=True)

    def phase(self, text: str) -> None:
        """A worker's phase: its own line only with ``-v``."""
        if output.verbose():
            self.note(f"[{_clock(time.monotonic() - self.started)}] {text}", style="dim")

    # ---- the plain lines -----------------------------------------------------------
    def line(self, suffix: str = "") -> str:
        remaining, per_backend = self.remaining()
        with self._lock:
            elapsed = time.monotonic() - self.started
            parts = [f"torchport {self.command}:"]
            if self.total is not None:
                parts.append(f"{self.done}/{self.total} {self.unit} done,")
            parts.append(f"{_clock(elapsed)} elapsed")
            if remaining is not None:
                backends = "".join(f", {name} {_clock(value)}" for name, value in per_backend.items())
                parts.append(f"(about {_clock(remaining)} left{backends})")
            parts.append(f"- {suffix or self.description}")
        return one_line(" ".join(parts), NOTE_CHARS)

    def _plain(self, suffix: str = "") -> None:
        print(self.line(suffix), file=sys.stderr, flush=True)

    def _tick(self) -> None:
        interval = _interval()
        while not self._stop.wait(interval):
            self._plain()


def _remaining_column(progress: Progress) -> Any:
    from rich.progress import ProgressColumn
    from rich.text import Text

    class RemainingColumn(ProgressColumn):
        """The time left: the plan's estimate when there is one (with each
        backend's share), else rich's guess from the runs done."""

        max_refresh = 0.5

        def render(self, task: Any) -> Text:
            remaining, per_backend = progress.remaining()
            if remaining is None:
                return Text("-:--:--")
            backends = "".join(f", {name} {_clock(value)}" for name, value in per_backend.items())
            return Text(one_line(f"{_clock(remaining)}{(' (' + backends[2:] + ')') if backends else ''}"))

    return RemainingColumn()


_RemainingColumn = _remaining_column
