"""Fails only under torch.compile (the cpu-compile backend), in one of
several ways chosen by FAULT; eager (the cpu reference) it trains."""
import os
import signal

import torch
from common import FAULT, compiled, make, plain_loss


def loss(net, batch):
    if compiled(net):
        if FAULT == "unsupported":
            raise NotImplementedError("aten::foo is not implemented for this device")
        if FAULT == "oom":
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (planted)")
        if FAULT == "multiline":
            raise RuntimeError("first line of a long error\nsecond line\nthird line")
        if FAULT == "hostile":
            raise RuntimeError("[/x] </td><script>alert(1)</script> `tick` ``` | pipe [bold]b[/bold]")
        if FAULT == "segfault":
            os.kill(os.getpid(), signal.SIGSEGV)
        if FAULT == "flood":
            import sys
            chunk = "x" * 1023 + "\n"
            for _ in range(100 * 1024):  # 100 MB of output, then a crash
                sys.stderr.write(chunk)
            sys.stderr.flush()
            os._exit(9)
        if FAULT == "nan":
            return plain_loss(net, batch) * float("nan")
        if FAULT == "exit":
            raise SystemExit(4)
    return plain_loss(net, batch)


def app():
    return make(loss, name=os.environ.get("FAULT_APP_NAME", "compiled-only"))
