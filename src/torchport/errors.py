"""Errors that reach the user as one line, not a traceback.

A UserError is bad input: the app, a flag, a file.  The CLI prints it as
``torchport: error: LOCATION: MESSAGE`` and exits with status 2; ``--debug``
adds the traceback.
"""
from __future__ import annotations


class UserError(Exception):
    exit_status = 2

    def __init__(self, message: str, location: str | None = None):
        super().__init__(message)
        self.message = message
        self.location = location

    def one_line(self) -> str:
        where = f"{self.location}: " if self.location else ""
        return f"{where}{self.message}"
