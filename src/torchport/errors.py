"""Errors that reach the user as one line, not a traceback.

A UserError is bad input: the app, a flag, a file.  The CLI prints it as
``torchport: error: LOCATION: MESSAGE`` and exits with status 2; ``--debug``
adds the traceback.
"""
from __future__ import annotations


# An error line quotes paths and app text: capped so one line stays one screen's worth.
MESSAGE_LINE_CHARS = 1000


class UserError(Exception):
    exit_status = 2
    # One of torchport.failures.KINDS when raised inside a worker run; the
    # default names the app's own code.
    kind = "app-error"

    def __init__(self, message: str, location: str | None = None, *, kind: str | None = None,
                 original: BaseException | None = None):
        super().__init__(message)
        self.message = message
        self.location = location
        if kind is not None:
            self.kind = kind
        # The exception the app or a library raised, when this one wraps it:
        # torchport.failures sorts failures by it (a compiler error raised
        # inside the app's loss is the compiler's, not the app's).
        self.original = original

    def one_line(self) -> str:
        from torchport.text import one_line, visible_name

        where = f"{visible_name(self.location)}: " if self.location else ""
        return f"{where}{one_line(self.message, MESSAGE_LINE_CHARS)}"


class OutputError(UserError):
    """An output (result, report, output folder) cannot be written: the
    folder is read-only, the disk is full.  What was measured before stays
    in the last result.json written."""

    exit_status = 1


class Interrupted(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP reached torchport: end as Ctrl-C does, with
    the shell's exit status for that signal (128 + its number)."""

    def __init__(self, signal_name: str, exit_status: int):
        super().__init__(signal_name)
        self.signal_name = signal_name
        self.exit_status = exit_status


received: list[Interrupted] = []  # the first ending signal, once one arrived (see torchport.cli)


def interrupted_by() -> str:
    """``SIGTERM``, ``SIGHUP`` or ``SIGINT`` (Ctrl-C) for the interruption seen so far."""
    return received[0].signal_name if received else "SIGINT"
