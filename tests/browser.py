"""A headless Chromium driven over the DevTools protocol, for tests that look
at a page as a person would: load it, record console messages, exceptions
and network requests, ask the DOM questions, take a screenshot.

Chromium is Debian's ``chromium`` package (``make test`` installs it where it
can); ``find_chromium()`` returns None when there is none.  The websocket
client is ``websocket-client`` (the test extra).
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    explicit = os.environ.get("TORCHPORT_CHROMIUM")
    if explicit:
        return explicit
    return next((path for path in map(shutil.which, CANDIDATES) if path), None)


class Browser:
    """One headless browser with one page; use as a context manager."""

    def __init__(self, executable: str, width: int = 1200, height: int = 900):
        import websocket  # websocket-client

        self._profile = tempfile.mkdtemp(prefix="torchport-chromium-")
        self.process = subprocess.Popen(
            [executable, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--metrics-recording-only", "--mute-audio",
             f"--user-data-dir={self._profile}", "--remote-debugging-port=0", f"--window-size={width},{height}",
             "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        port = self._devtools_port()
        targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10).read())
        page = next(t for t in targets if t.get("type") == "page")
        self.socket = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=30, suppress_origin=True)
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    def _devtools_port(self) -> int:
        marker = Path(self._profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if marker.exists() and marker.read_text().strip():
                return int(marker.read_text().splitlines()[0])
            if self.process.poll() is not None:
                raise RuntimeError(f"chromium exited: {self.process.stderr.read().decode(errors='replace')[-2000:]}")
            time.sleep(0.1)
        raise RuntimeError("chromium did not open its DevTools port within 30 s")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        ident = self._next_id
        self.socket.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def _drain(self, until: str | None = None, timeout: float = 30) -> None:
        import websocket

        deadline = time.monotonic() + timeout
        self.socket.settimeout(0.5)
        try:
            while time.monotonic() < deadline:
                try:
                    message = json.loads(self.socket.recv())
                except websocket.WebSocketTimeoutException:  # nothing more for now
                    if until is None:
                        return
                    continue
                if "method" in message:
                    self.events.append(message)
                    if message["method"] == until:
                        until = None
        finally:
            self.socket.settimeout(30)

    def open(self, path: Path) -> None:
        self.events.clear()
        self.call("Page.navigate", url=path.resolve().as_uri())
        self._drain(until="Page.loadEventFired")
        self._drain()  # late console messages and requests

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"evaluation failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def console_errors(self) -> list[str]:
        found = []
        for event in self.events:
            if event["method"] == "Runtime.exceptionThrown":
                found.append(json.dumps(event["params"]["exceptionDetails"])[:500])
            elif event["method"] == "Runtime.consoleAPICalled" and event["params"]["type"] in ("error", "assert", "warning"):
                found.append(json.dumps(event["params"]["args"])[:500])
            elif event["method"] == "Log.entryAdded" and event["params"]["entry"]["level"] in ("error", "warning"):
                found.append(event["params"]["entry"].get("text", "")[:500])
        return found

    def requests(self) -> list[str]:
        return [event["params"]["request"]["url"] for event in self.events
                if event["method"] == "Network.requestWillBeSent"]

    def console_messages(self) -> list[dict[str, Any]]:
        return [event["params"] for event in self.events if event["method"] == "Runtime.consoleAPICalled"]

    def screenshot(self, out: Path, max_height: int | None = None) -> None:
        height = int(self.evaluate("Math.ceil(document.documentElement.scrollHeight)"))
        height = min(height, max_height) if max_height else height
        width = int(self.evaluate("Math.ceil(document.documentElement.scrollWidth)"))
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                         clip={"x": 0, "y": 0, "width": width, "height": height, "scale": 1})
        out.write_bytes(base64.b64decode(shot["data"]))

    def close(self) -> None:
        try:
            self.socket.close()
        finally:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
