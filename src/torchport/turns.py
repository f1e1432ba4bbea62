"""Taking turns, block by block, between processes that time work on one machine.

On a shared or throttled host the speed of the machine drifts by tens of
percent over seconds, so two loops timed one after the other differ by more
than anything the comparison is meant to find.  Run them at the same time but
never together: each process asks for its turn before every timed block and
keeps the machine until its next block boundary.  Both then see the same
machine, block after block, and their blocks can be compared in pairs.

The coordinator (``TurnCoordinator``, in the process that starts the others)
grants turns in the order asked, only once every expected party has
connected, so one party's start-up never overlaps the other's timed blocks.
The client (``take_turn``) is what a timed process calls before a block; it
does nothing unless ``TORCHPORT_TURNS`` names a coordinator's socket.  Both
use the standard library only: the client runs inside workers on any torch.
"""
from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
from collections import deque

ENVIRONMENT_VARIABLE = "TORCHPORT_TURNS"

_connection: socket.socket | None = None
_finished = False


def take_turn() -> None:
    """Wait until it is this process's turn (no-op without a coordinator).
    If the coordinator goes away, carry on alone rather than hang."""
    global _connection, _finished
    path = os.environ.get(ENVIRONMENT_VARIABLE)
    if not path or _finished:
        return
    try:
        if _connection is None:
            _connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            _connection.connect(path)
        _connection.sendall(b"t")
        granted = _connection.recv(1)
    except OSError:
        granted = b""
    if not granted:
        _finished = True


class TurnCoordinator:
    """Grants turns to ``parties`` processes, one at a time, in the order they ask.
    A process holds its turn until it asks again or disconnects (exits)."""

    def __init__(self, parties: int, run_length: int = 1):
        self.parties = parties
        # Turns a party gets in a row.  1 (A B A B ...): every block follows a
        # switch, so each pays the same refill of caches the other party
        # evicted (measured ~10% of a 6-step classifier block).  2 (A, B B,
        # A A, ...) balances order as ABBA designs do, but leaves that cost on
        # half of each party's blocks: bimodal samples, intervals twice as wide.
        self.run_length = run_length
        self._run = 0
        self.turns_granted = 0
        self._directory = tempfile.mkdtemp(prefix="torchport-turns-")
        self.path = os.path.join(self._directory, "turns.sock")
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(self.path)
        self._server.listen(parties)
        self._lock = threading.Lock()
        self._asking: deque[socket.socket] = deque()
        self._connections: list[socket.socket] = []
        self._holder: socket.socket | None = None
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def environment(self) -> dict[str, str]:
        return {ENVIRONMENT_VARIABLE: self.path}

    def _accept(self) -> None:
        for _ in range(self.parties):
            try:
                connection, _ = self._server.accept()
            except OSError:
                return
            with self._lock:
                if self._closed:  # arrived after close(): let it carry on alone
                    _hang_up(connection)
                    return
                self._connections.append(connection)
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _grant_next(self) -> None:
        # Lock held.  Nobody starts before everyone is here: a party still
        # starting up would otherwise run alongside another's timed blocks.
        while self._holder is None and self._asking and len(self._connections) >= self.parties:
            self._holder = self._asking.popleft()
            self._run = 1 if self.turns_granted else self.run_length  # the very first turn is alone
            if self._send_grant(self._holder):
                return
            self._holder = None  # it went away while waiting: try the next one

    def _send_grant(self, connection: socket.socket) -> bool:
        try:
            connection.sendall(b"g")
        except OSError:
            return False
        self.turns_granted += 1
        return True

    def _serve(self, connection: socket.socket) -> None:
        while True:
            try:
                asked = connection.recv(1)
            except OSError:
                asked = b""
            with self._lock:
                if asked and self._holder is connection and self._run < self.run_length and self._asking:
                    self._run += 1
                    if self._send_grant(connection):
                        continue
                if self._holder is connection:
                    self._holder = None
                if asked:
                    self._asking.append(connection)
                elif connection in self._asking:
                    self._asking.remove(connection)  # died while waiting: never grant it again
                self._grant_next()
            if not asked:
                connection.close()
                return

    def close(self) -> None:
        """Stop coordinating; processes still waiting, or still to connect, carry
        on alone (``turns_granted`` then tells that the pairing was cut short)."""
        with self._lock:
            self._closed = True
            for connection in self._connections:
                _hang_up(connection)
        try:
            # Wakes an accept() still waiting (closing alone does not on Linux).
            self._server.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._server.close()
        shutil.rmtree(self._directory, ignore_errors=True)


def _hang_up(connection: socket.socket) -> None:
    try:
        connection.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
