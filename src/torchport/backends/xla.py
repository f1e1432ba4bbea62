"""PyTorch/XLA (torch_xla): lazy tensors compiled by XLA.

The worker runs in torchport's ``xla`` environment (torch 2.9.0 + torch_xla
2.9.0, see torchport.envs).  Without a TPU it runs on XLA's CPU client
(``PJRT_DEVICE=CPU``): the same graph capture, compiler, recompilation on new
shapes and CPU fallback for ops without a lowering that a TPU run goes
through, but CPU timings.  So on a CPU it is labelled a TPU-compiler proxy.

What a training step looks like here: operations are recorded, not run;
``torch_xla.sync()`` at the end of the step cuts the graph, which XLA compiles
the first time it sees it (and on every new input shape) and then executes.
The counters from ``torch_xla.debug.metrics`` say how often that happened.
"""
from __future__ import annotations

import os
import sys
from typing import Any

from torchport import glossary
from torchport.backends import VERIFIED_HERE, Availability, Backend
from torchport.records import BackendDescription, DeviceMemory, XlaCounters

CPU_PROXY = "TPU (XLA compiler on XLA's CPU client; not TPU timing)"
NANOSECONDS = 1e-9


def _pjrt_device() -> str:
    """The PJRT client torch_xla will use.  Unset means CPU unless a TPU is
    on this machine: torch_xla picks the TPU itself when libtpu finds one."""
    configured = os.environ.get("PJRT_DEVICE")
    if configured:
        return configured.upper()
    from torchport.backends.tpu import find_tpus

    return "TPU" if find_tpus() else "CPU"


class XLA(Backend):
    name = "xla"
    title = "PyTorch/XLA (torch_xla), lazy tensors"
    device_type = "xla"
    family = glossary.XLA
    compiles = True
    environment = "xla"
    proxy_for = CPU_PROXY
    verification = VERIFIED_HERE + " (XLA's CPU client); not run on a TPU"

    # ---- parent side -------------------------------------------------------------
    @classmethod
    def availability(cls) -> Availability:
        from torchport import envs

        record = envs.state(cls.environment)
        if not record.ready:
            return Availability(False, f"{record.problem}; run: {envs.create_command(cls.environment)}")
        versions = envs.versions_text(record.manifest)
        return Availability(True, f"environment {record.path} ({versions}); PJRT device {_pjrt_device()}")

    @classmethod
    def describe(cls) -> BackendDescription:
        description = super().describe()
        # On a TPU host this is the real thing, not a proxy.
        description.proxy_for = CPU_PROXY if _pjrt_device() == "CPU" else None
        return description

    @classmethod
    def distributed_unsupported(cls) -> str | None:
        if _pjrt_device() != "CPU":
            return None
        # Both measured with torch_xla 2.9 under torchrun (tests/test_planted_apps.py reruns the second).
        return ("no collectives for XLA tensors on XLA's CPU client: gloo refuses them (ProcessGroupGloo: "
                "invalid tensor type, device=xla:0), and PyTorch/XLA's own 'xla' process group (xla://) gives "
                "each torchrun process a world of size 1 there; it needs a TPU or GPU PJRT client")

    # ---- worker side -------------------------------------------------------------
    def setup(self) -> None:
        # Decided before torch_xla starts its runtime; it reads this once.
        os.environ["PJRT_DEVICE"] = _pjrt_device()
        try:
            import torch_xla
            import torch_xla.core.xla_model
            import torch_xla.debug.metrics
        except Exception as exc:  # a broken environment is this backend's problem, not the app's
            from torchport import envs

            raise envs.EnvironmentMissing(
                f"torch_xla failed to import in {sys.prefix}: "
                f"{type(exc).__name__}: {exc}; recreate it: {envs.create_command(self.environment)} --force"
            ) from None
        self._xla = torch_xla
        self._xm = torch_xla.core.xla_model
        self._metrics = torch_xla.debug.metrics
        self.device = torch_xla.device()

    def device_info(self) -> dict[str, str | int | None]:
        import torch

        return {
            "device": str(self.device),
            "hardware": self._xm.xla_device_hw(self.device),
            "pjrt_device": os.environ.get("PJRT_DEVICE"),
            "torch_xla": self._xla.__version__,
            "torch": torch.__version__,
            "devices": self._xla.device_count(),
        }

    def after_step(self) -> None:
        # The graph cut: one graph per training step.
        self._xla.sync()

    def synchronize(self) -> None:
        # sync() launches whatever is still pending; wait_device_ops() waits
        # for the asynchronous execution to finish.
        self._xla.sync()
        self._xm.wait_device_ops()

    def device_memory(self) -> DeviceMemory | None:
        try:
            info = self._xm.get_memory_info(self.device)
        except RuntimeError:  # XLA's CPU client keeps no allocator statistics
            return None
        return DeviceMemory(peak_allocated_bytes=info.get("peak_bytes_used"), limit_bytes=info.get("bytes_limit"),
                            source="torch_xla xm.get_memory_info (peak since process start; no reset)")

    def device_rng_state(self) -> Any:
        # XLA's generator is a seed held by torch_xla, not a torch.xla module.
        return int(self._xm.get_rng_state())

    def set_device_rng_state(self, state: Any) -> bool:
        self._xm.set_rng_state(int(state))
        return True

    def init_process_group(self) -> None:
        import torch.distributed as dist

        if self.process_group_backend == "xla":
            import torch_xla.distributed.xla_backend  # noqa: F401  registers the "xla" process group backend

            dist.init_process_group("xla", init_method="xla://")
        else:
            super().init_process_group()

    def device_counters(self) -> dict[str, float]:
        """Counter values and metric totals (samples, accumulated ns): a few
        dozen dictionary reads in torch_xla's C++ registry, no device work."""
        metrics = self._metrics
        snapshot: dict[str, float] = {name: metrics.counter_value(name) for name in metrics.counter_names()}
        for name in ("CompileTime", "ExecuteTime", "TransferToDeviceTime", "TransferFromDeviceTime"):
            data = metrics.metric_data(name)
            snapshot[f"{name}.samples"], snapshot[f"{name}.total_ns"] = (data[0], data[1]) if data else (0, 0.0)
        return snapshot

    def summarize_device_counters(self, before: dict[str, float], after: dict[str, float]) -> XlaCounters:
        return summarize_xla_counters(before, after)

    def new_device_compilations(self, before: dict[str, float], after: dict[str, float]) -> int | None:
        return int(_delta(before, after, "UncachedCompile"))


def summarize_xla_counters(before: dict[str, float], after: dict[str, float]) -> XlaCounters:
    """What happened between two snapshots."""
    return XlaCounters(
        compilations=int(_delta(before, after, "UncachedCompile")),
        compile_time_s=_delta(before, after, "CompileTime.total_ns") * NANOSECONDS,
        cached_compilations=int(_delta(before, after, "CachedCompile")),
        executions=int(_delta(before, after, "ExecuteTime.samples")),
        execute_time_s=_delta(before, after, "ExecuteTime.total_ns") * NANOSECONDS,
        transfers_to_device=int(_delta(before, after, "TransferToDeviceTime.samples")),
        transfers_from_device=int(_delta(before, after, "TransferFromDeviceTime.samples")),
        graph_cuts=int(_delta(before, after, "MarkStep")),
        fallback_ops={
            name: int(_delta(before, after, name))
            for name in sorted(after)
            if name.startswith("aten::") and _delta(before, after, name) > 0
        },
    )


def _delta(before: dict[str, float], after: dict[str, float], name: str) -> float:
    return after.get(name, 0) - before.get(name, 0)
