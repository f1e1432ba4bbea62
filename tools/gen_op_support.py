"""Write the shipped op-support tables ``src/torchport/data/op_support_<target>.json``.

Run it with an interpreter that has the backend installed; each table records
the versions it was read from and the date:

    PJRT_DEVICE=CPU PYTHONPATH=src  XLA_ENV/bin/python tools/gen_op_support.py xla cuda

* ``xla``: torch_xla's kernel registrations for the ``XLA`` dispatch key, plus a
  real probe run on an XLA device (CPU PJRT) of the ops whose support depends
  on their inputs (see ``torchport.trace.registrations.XLA_PROBES``).
* ``tpu``: TorchTPU's computed ``PrivateUse1`` dispatch table with torch_tpu
  imported (run it in the tpu environment: ``TORCH_DEVICE_BACKEND_AUTOLOAD=0
  PYTHONPATH=src ~/.cache/torchport/envs/tpu/bin/python tools/gen_op_support.py
  tpu``; without autoload no device is created even on a TPU host), what
  its backend fallback does, and the out= kernels structured composites call.
  Reading it starts no TPU runtime (the table records torch_tpu's own flags).
* ``cuda``: the ``CUDA`` dispatch key of a CUDA build of torch (the torch 2.9
  wheel in the xla environment is one).  Refuses to run on a CPU-only build.
"""
from __future__ import annotations

import datetime as _dt
import json
import sys
from pathlib import Path

from torchport.trace import registrations

OUT = Path(__file__).resolve().parent.parent / "src" / "torchport" / "data"


def generate(target: str) -> dict:
    import torch

    if target == "xla":
        import torch_xla  # noqa: F401  (registers the XLA kernels)

        key = "XLA"
        source = ("kernel registrations of the installed torch_xla read with "
                  "torch._C._dispatch_has_kernel_for_dispatch_key(op, 'XLA'), plus a probe run of the "
                  "input-dependent ops on an XLA:CPU device reading torch_xla.debug.metrics.executed_fallback_ops()")
        default = "cpu_fallback"
    elif target == "tpu":
        import torch_tpu  # noqa: F401  (registers the PrivateUse1 kernels and the backend fallback)

        document = {
            "target": target,
            "dispatch_key": "PrivateUse1",
            "source": (f"op support from torch_tpu {registrations.versions().get('torch_tpu')} dispatcher "
                       "registrations: the PrivateUse1 entry of torch._C._dispatch_dump_table(op) for every op, "
                       "with torch_tpu imported (kernel / composite / backend fallback), on a machine without a TPU"),
            "version": registrations.versions(),
            "retrieved": _dt.date.today().isoformat(),
            "how_built": ("TORCH_DEVICE_BACKEND_AUTOLOAD=0 PYTHONPATH=src ~/.cache/torchport/envs/tpu/bin/python "
                          "tools/gen_op_support.py tpu"),
            "without_kernel_means": "missing",
            "fallback": registrations.dispatch_fallback("PrivateUse1"),
            "runtime": registrations.runtime_state(),
            **registrations.resolved_table("PrivateUse1"),
        }
        if document["runtime"].get("torch_tpu_device_initialized"):
            raise SystemExit("torch_tpu initialized a device while the table was read: not written")
        return document
    elif target == "cuda":
        if not torch.version.cuda:
            raise SystemExit(f"torch {torch.__version__} is not a CUDA build: its CUDA registrations are empty")
        key = "CUDA"
        source = ("kernel registrations of a CUDA build of torch read with "
                  "torch._C._dispatch_has_kernel_for_dispatch_key(op, 'CUDA')")
        default = "missing"
    else:
        raise SystemExit(f"no generator for target {target!r} (known: xla, cuda, tpu)")
    document = {
        "target": target,
        "dispatch_key": key,
        "source": source,
        "version": registrations.versions(),
        "retrieved": _dt.date.today().isoformat(),
        "how_built": "PJRT_DEVICE=CPU PYTHONPATH=src XLA_ENV/bin/python tools/gen_op_support.py " + target,
        "without_kernel_means": default,
        **registrations.table(key),
    }
    if target == "xla":
        document["conditional_fallbacks"] = registrations.xla_probe_fallbacks()
    return document


def main(targets: list[str]) -> int:
    for target in targets or ["xla", "cuda"]:
        document = generate(target)
        path = OUT / f"op_support_{target}.json"
        path.write_text(json.dumps(document, indent=0, sort_keys=False) + "\n", encoding="utf-8")
        counts = {k: len(v) for k, v in document.items() if isinstance(v, (list, dict)) and k not in ("version",)}
        print(f"{path}: {document['version']} {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
