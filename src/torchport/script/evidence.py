"""Proof that a script's run ran on its backend's device.

A script is handed its backend's device string, but nothing makes it use it:
a script that ignores ``--device`` trains on the CPU wherever it runs, and
its "xla" run is a CPU run with XLA merely imported.  So a run counts as
having run on the backend only with evidence from the device itself:

* the parameters the script's optimizers step live on the backend's device type;
* XLA: compilations and executions above zero (and the share of ops lowered
  to XLA against those that fell back to the CPU);
* a torch.compile backend: Dynamo frames compiled above zero;
* an accelerator with its own memory: parameters there, or device memory used.

``collect`` runs in the worker (any torch a backend environment holds);
``judge`` and the text helpers are plain data and run anywhere.
"""
from __future__ import annotations

from typing import Any

from torchport.records import DeviceEvidence, DeviceMemory, DynamoEvidence, ResultDocument, RunStatus, XlaEvidence

DYNAMO = "torch_compile"  # where torch.compile's counters sit in a backend's snapshot (torchport.backends.DYNAMO)
XLA_EXECUTIONS = "ExecuteTime.samples"


def collect(backend: Any, before: dict[str, Any], after: dict[str, Any], parameter_devices: set[str],
            memory: DeviceMemory | None) -> DeviceEvidence:
    """The device evidence of one run, from the backend's raw counter
    snapshots around the whole script, the device types of the stepped
    parameters, and the device's memory record."""
    found = DeviceEvidence(backend=backend.name, device_type=backend.device.type,
                           parameter_devices=sorted(parameter_devices))
    if XLA_EXECUTIONS in after:
        def delta(name: str) -> int:
            return int(after.get(name, 0) - before.get(name, 0))

        lowered = sum(delta(name) for name in after if name.startswith("xla::"))
        fell_back = sum(delta(name) for name in after if name.startswith("aten::"))
        found.xla = XlaEvidence(compilations=delta("UncachedCompile"), executions=delta(XLA_EXECUTIONS),
                                transfers_to_device=delta("TransferToDeviceTime.samples"), ops_lowered=lowered,
                                ops_fell_back=fell_back,
                                device_share=lowered / (lowered + fell_back) if lowered + fell_back else None)
    if getattr(backend, "compile_backend", None) is not None:
        first, last = before.get(DYNAMO) or {}, after.get(DYNAMO) or {}
        found.dynamo = DynamoEvidence(frames_compiled=int(last.get("frames_ok", 0) - first.get("frames_ok", 0)),
                                      graphs=int(last.get("unique_graphs", 0) - first.get("unique_graphs", 0)))
    if memory and memory.peak_allocated_bytes is not None:
        found.device_memory_peak_bytes = memory.peak_allocated_bytes
    return judge(found)


def judge(found: DeviceEvidence) -> DeviceEvidence:
    """The evidence with its judgement: ``ran_on_device``, and its ``proof`` or ``why`` not."""
    device = found.device_type
    placed = found.parameter_devices
    backend = found.backend or device
    problems, proofs = [], []
    if placed and device not in placed:
        problems.append(f"the script placed its work on {', '.join(placed)}")
    elif placed:
        proofs.append(f"its parameters are on {device}")
    xla = found.xla
    if xla is not None:
        if xla.executions <= 0:
            problems.append(f"{xla.executions} XLA executions")
        else:
            share = f", {xla.device_share:.0%} of ops lowered to XLA" if xla.device_share is not None else ""
            proofs.append(f"{xla.compilations} XLA compilations, {xla.executions} executions{share}")
    dynamo = found.dynamo
    if dynamo is not None:
        if dynamo.frames_compiled <= 0:
            problems.append("0 frames compiled by torch.compile: the script ran eager (a compile backend measures "
                            "a script only when the script compiles its model, e.g. -- --compile={compile})")
        else:
            proofs.append(f"{dynamo.frames_compiled} frame(s) compiled by torch.compile")
    if not placed and device not in ("cpu",) and xla is None:
        if found.device_memory_peak_bytes:
            proofs.append(f"{found.device_memory_peak_bytes} bytes of {device} memory at its peak")
        else:
            problems.append(f"no parameter and no memory on {device} was seen")
    if problems:
        return found.put(ran_on_device=False, why=f"did not run on {backend}: {'; '.join(problems)}")
    return found.put(ran_on_device=True, proof="; ".join(proofs))


def unproven_verdicts(document: ResultDocument) -> list[str]:
    """Every script verdict of the document that says a backend runs without
    device evidence from that backend's runs: must be empty, always."""
    problems = []
    for name, verdict in (document.script.verdicts if document.script else {}).items():
        if not verdict.verdict.startswith("runs"):
            continue
        backend = document.backends.get(name)
        runs = [run for run in (backend.runs if backend else []) if run.status == RunStatus.OK]
        proven = [run for run in runs if ((run.script or {}).get("evidence") or {}).get("ran_on_device")]
        if not runs or len(proven) != len(runs):
            problems.append(f"{name}: verdict {verdict.text!r} with {len(proven)} of {len(runs)} ok run(s) "
                            "proven on the device")
    return problems
