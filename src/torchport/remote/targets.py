"""Targets (``local``, ``ssh://[user@]host[:port]``, an ssh config alias, ``sky:ACCELERATOR[:COUNT]``) and
the ssh command lines that reach them.

Every remote command is one argument list joined with ``shlex.join``: ssh
hands the remote login shell a single string, so each argument is quoted
there and nothing from the user is ever read as shell syntax.  The user's
own ssh client, config, agent and known_hosts decide how to connect;
``BatchMode`` only turns prompts into failures (an unknown host key is then
refused, never accepted).
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from torchport.errors import UserError

# A host, user or alias: no shell or ssh option syntax (a leading "-" would be read as an ssh option).
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.%+-]*")
_HOST = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*|\[[0-9A-Fa-f:.]+\]")

# What ssh's own messages mean, most specific first.
_SSH_CAUSES = (
    ("host-key-refused", ("Host key verification failed", "REMOTE HOST IDENTIFICATION HAS CHANGED",
                          "host key is known for", "Host key for")),
    ("auth-refused", ("Permission denied",)),
    ("unreachable", ("Connection refused", "Could not resolve hostname", "timed out", "No route to host",
                     "Network is unreachable", "Connection closed", "Connection reset")),
)


@dataclass(frozen=True)
class Target:
    text: str          # as given on the command line
    kind: str          # "local", "ssh" or "sky"
    destination: str = ""  # user@host or an alias, for ssh; ACCELERATOR:COUNT for sky
    port: int | None = None

    @property
    def name(self) -> str:
        """The folder and label of this target's results."""
        if self.kind == "local":
            return "local"
        if self.kind == "sky":
            return "sky-" + self.destination.replace(":", "-")
        name = self.destination.replace("[", "").replace("]", "").replace(":", "_")
        return name + (f"-{self.port}" if self.port else "")


def parse_target(text: str) -> Target:
    text = text.strip()
    if text == "local":
        return Target(text, "local")
    if text.startswith("sky:"):
        from torchport.remote.sky import parse_accelerators

        accelerator, count = parse_accelerators(text[len("sky:"):])
        return Target(text, "sky", f"{accelerator}:{count}")
    if text.startswith("ssh://"):
        rest = text[len("ssh://"):].rstrip("/")
        user, at, hostport = rest.rpartition("@")
        if at and not _NAME.fullmatch(user):
            raise UserError(f"invalid user name in ssh target: {user[:80]!r}", location=text)
        host, port = hostport, None
        match = re.fullmatch(r"(.*):(\d+)", hostport)
        if match and (not hostport.startswith("[") or match.group(1).endswith("]")):
            host, port = match.group(1), int(match.group(2))
            if not 0 < port < 65536:
                raise UserError(f"invalid port {port}", location=text)
        if not _HOST.fullmatch(host):
            raise UserError(f"invalid host in ssh target: {host[:80]!r}", location=text)
        return Target(text, "ssh", f"{user}@{host}" if at else host, port)
    if _NAME.fullmatch(text) and "@" not in text:
        return Target(text, "ssh", text)  # an ssh config alias (a SkyPilot cluster is one)
    raise UserError("unknown target: expected local, ssh://[user@]host[:port], an ssh config alias or sky:ACCELERATOR[:COUNT]",
                    location=text[:200])


def parse_targets(texts: list[str]) -> list[Target]:
    targets = [parse_target(text) for text in texts]
    seen: dict[str, str] = {}
    for target in targets:
        if target.name in seen:
            raise UserError(f"--on names the same target twice ({seen[target.name]} and {target.text})")
        seen[target.name] = target.text
    return targets


def ssh_command(target: Target, remote_argv: list[str], *, config: Path | None = None) -> list[str]:
    """The local argv running ``remote_argv`` on the target."""
    command = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=20",
               # A dead connection is noticed within a minute (the run goes on there; `collect` fetches it).
               "-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=4"]
    if config is not None:
        command += ["-F", str(config)]
    if target.port is not None:
        command += ["-p", str(target.port)]
    return [*command, "--", target.destination, shlex.join(remote_argv)]


def ssh_cause(stderr: str) -> tuple[str, str]:
    """(kind, one line) for a failed ssh connection, from ssh's own stderr."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and not line.startswith("@")]
    for kind, needles in _SSH_CAUSES:
        for line in lines:
            if any(needle in line for needle in needles):
                if kind == "host-key-refused":
                    return kind, ("host key refused: the remote's host key is unknown or has changed (ssh: "
                                  f"{clean_line(line, 200)}); check it and add it to known_hosts yourself, "
                                  "torchport never weakens host key checking")
                return kind, f"ssh: {clean_line(line, 300)}"
    last = clean_line(lines[-1], 300) if lines else "no message"
    return "unreachable", f"ssh failed: {last}"


def clean_line(text: str, limit: int = 500) -> str:
    """Text from a remote, safe to print: control characters (terminal escapes
    among them) shown as escapes, capped."""
    out = []
    for char in text:
        if char == "\t" or (char.isprintable() and char not in "\x1b\x9b"):
            out.append(char)
        else:
            out.append(repr(char)[1:-1] if ord(char) > 0x9f else f"\\x{ord(char):02x}")
    joined = "".join(out)
    return joined if len(joined) <= limit else joined[:limit] + f"... ({len(joined) - limit} more characters)"
