"""One app, a different fault on each test backend (tests/plugins): the
fault is the worker's backend name after "fault-".  On cpu it trains."""
import os
import signal
import subprocess
import sys
import time

import torch
from common import make, plain_loss

BACKEND = os.environ.get("TORCHPORT_BACKEND", "")
FAULT = os.environ.get("FAULT_ALWAYS") or (BACKEND[len("fault-"):] if BACKEND.startswith("fault-") else "")


def loss(net, batch):
    if FAULT == "unsupported":
        raise NotImplementedError("aten::foo is not implemented for this device")
    if FAULT == "oom":
        raise torch.OutOfMemoryError("out of memory: tried to allocate 2.00 GiB (planted)")
    if FAULT == "multiline":
        raise RuntimeError("first line of a long error\nsecond line\nthird line")
    if FAULT == "hostile":
        raise RuntimeError("[/x] </td><script>alert(1)</script> `tick` ``` | pipe [bold]b[/bold] \x1b[31mred")
    if FAULT == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    if FAULT == "flood":
        chunk = "x" * 1023 + "\n"
        for _ in range(100 * 1024):  # 100 MB of output, then a crash
            sys.stderr.write(chunk)
        sys.stderr.flush()
        os._exit(9)
    if FAULT == "nan":
        return plain_loss(net, batch) * float("nan")
    if FAULT == "exit":
        raise SystemExit(4)
    if FAULT == "hang":
        time.sleep(3600)
    if FAULT == "setsid" and not os.environ.get("FAULT_CHILD_STARTED"):
        # A grandchild in a session of its own, that outlives this worker unless torchport ends it.
        os.environ["FAULT_CHILD_STARTED"] = "1"
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"], start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return plain_loss(net, batch)


def app():
    return make(loss, name="by-backend")
