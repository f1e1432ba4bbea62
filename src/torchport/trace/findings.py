"""What in a traced step breaks or slows an app on each target: the rule table
and the detectors.

Every finding names one rule (``TR101`` ...), the targets it affects with a
severity for each, the user's ``file:line`` that caused it, and how often it
happened in the traced steps.  Where the cause is a line inside a library the
user's code called (``transformers`` reading a tensor on the host), the finding
names that line (``library_location``) and keeps the user's line as the entry
point that reached it (``location``): one finding per (user line, library line).  One cause (one rule at one line) is one
finding, however many ops it issued.

Severities: ``blocker`` (does not run on the target as is), ``slow`` (runs,
with a cost that grows with the run: fallbacks, recompilations, stalls),
``minor`` (a bounded waste worth knowing).

The detectors read the raw trace (plain data from ``torchport.trace.job``)
and need no torch.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from torchport import glossary
from torchport.records import (BatchSignature, ConstructionSite, ContractNote, DataScan, Finding, FindingCause,
                               HostSyncCall, OpKernels,
                               TraceConstruction, TracedOp, TraceSeverity, VaryingDim, Vocabulary,
                               WorkerTrace)

TARGETS = glossary.trace_targets()
# Higher is worse, as everywhere (torchport.glossary): blocker 3, slow 2, minor 1.
SEVERITY_RANK = glossary.severity_ranking(severity.value for severity in TraceSeverity)
LAZY_TARGETS = glossary.lazy_trace_targets()  # compile a graph per input shape
TILE_MINOR, TILE_LANE = 8, 128  # TPU vector registers are 8 x 128 (Cloud TPU performance guide)


class RuleId(Vocabulary):
    """The trace's rules (``Finding.id``)."""

    HOST_SYNC = "TR101"
    DYNAMIC_OUTPUT_SHAPE = "TR102"
    INPUT_SHAPES_VARY = "TR103"
    GRAPH_VARIES = "TR104"
    FLOAT64 = "TR105"
    TILE_MISALIGNED = "TR106"
    SPARSE_LAYOUT = "TR107"
    CUSTOM_OP = "TR108"
    OP_FALLBACK = "TR109"
    OP_MISSING = "TR110"


class CauseKind(Vocabulary):
    """What the construction line a finding was moved to did (``Finding.cause.kind``)."""

    DATA_LOADER = "data-loader"
    MODEL_DTYPE = "model-dtype"
    DATA_DTYPE = "data-dtype"
    MODULE_CONSTRUCTOR = "module-constructor"


BLOCKER, SLOW, MINOR = TraceSeverity.BLOCKER, TraceSeverity.SLOW, TraceSeverity.MINOR


@dataclass(frozen=True)
class Rule:
    id: RuleId
    name: str
    title: str
    severity: dict[str, TraceSeverity]  # target -> severity
    rationale: str
    fix: str
    source: str


def rule_table(targets: tuple[str, ...], lazy: tuple[str, ...]) -> dict[str, Rule]:
    """The rules with their severities on ``targets``, of which ``lazy`` compile a graph per
    input shape: a rule names the targets that differ from the rest, so a new family gets
    the severities of its kind."""
    return {rule.id: rule for rule in [
        Rule(RuleId.HOST_SYNC, "host-sync", "host synchronization inside the training step",
             {target: SLOW if target in lazy else MINOR for target in targets},
             "Reading a tensor's value on the host (.item(), .tolist(), bool(t), print(t), torch.equal, .cpu()) "
             "waits for all queued device work; on a lazy backend it also cuts and executes the graph early.",
             "keep the value as a tensor (torch.where instead of `if`), or read it every N steps after the step ends",
             "pytorch/xla docs troubleshoot.md (item(), printing); TorchTPU deferred-execution notebook"),
        Rule(RuleId.DYNAMIC_OUTPUT_SHAPE, "dynamic-output-shape", "op whose output shape depends on the data",
             {target: SLOW if target in lazy else MINOR for target in targets},
             "PyTorch tags these ops dynamic_output_shape (nonzero, masked_select, boolean-mask indexing, unique, "
             "repeat_interleave with a tensor, bincount). XLA-style compilers need static shapes: torch_xla runs them "
             "on the CPU; compiled backends recompile or break the graph; GPUs sync to size the output.",
             "keep shapes static: torch.where(mask, x, 0) or a weighted sum instead of x[mask]; pass sizes "
             "(bincount(minlength=), unique(..., sorted) on padded input) where the op allows",
             "PyTorch native_functions.yaml tags; pytorch/xla docs troubleshoot.md, learn/dynamic_shape.md"),
        Rule(RuleId.INPUT_SHAPES_VARY, "input-shapes-vary", "input shapes change between steps",
             {target: SLOW for target in lazy},
             "XLA compiles one graph per input shape: every distinct batch signature is a compilation, and the step "
             "that meets a new one stalls for it.",
             "make every batch the same shape: DataLoader(drop_last=True) for a short last batch, pad or bucket "
             "variable lengths to a few fixed sizes",
             "pytorch/xla docs perf/recompilation.md; TorchNeuron torch.compile reference"),
        Rule(RuleId.GRAPH_VARIES, "graph-varies", "the step's ops change between steps with the same input shapes",
             {target: SLOW for target in lazy},
             "Data-dependent Python control flow or varying loop counts trace a different graph on different steps, "
             "each compiled separately.",
             "replace data-dependent branches with tensor ops (torch.where); keep loop trip counts fixed",
             "pytorch/xla docs troubleshoot.md (caveat 2), xla-advanced.md"),
        Rule(RuleId.FLOAT64, "float64", "float64 in the step",
             {"mps": BLOCKER, "xla": SLOW, "tpu": SLOW},
             "MPS has no float64. TPUs have no fast float64 path (JAX keeps x64 off by default: 'slow at best, "
             "incompatible with their hardware at worst').",
             "create tensors as float32 (torch.tensor(..., dtype=torch.float32); numpy arrays default to float64: "
             "torch.from_numpy(a).float())",
             "JAX docs default_dtypes; PyTorch MPS backend notes"),
        Rule(RuleId.TILE_MISALIGNED, "tile-misaligned", "matrix dimensions not multiples of the TPU tile",
             {"xla": MINOR, "tpu": MINOR},
             "TPU matrix units work on 8 x 128 tiles: a contraction or output dimension that is not a multiple of "
             "128 (rows: 8) is padded, and the padding is computed and thrown away.",
             "choose feature, head and hidden sizes that are multiples of 128 (batch a multiple of 8)",
             "Cloud TPU performance guide (8 x 128 vector registers); the padding model is torchport's estimate"),
        Rule(RuleId.SPARSE_LAYOUT, "sparse-layout", "sparse tensors in the step",
             {"tpu": BLOCKER, "xla": BLOCKER},
             "torch_tpu: 'sparse operators are not supported on TPU yet'. torch has no SparseXLA dispatch key, so no "
             "sparse tensor can live on an XLA device.",
             "use dense tensors (to_dense()), or embedding/gather ops instead of sparse matmuls",
             "torch_tpu 0.2.0 binary strings; torch 2.9 dispatch keys (SparseXLA does not parse)"),
        Rule(RuleId.CUSTOM_OP, "custom-op", "custom op without a kernel for the target",
             glossary.per_target(targets, BLOCKER, {"xla": SLOW}),
             "An op registered by the app or a library (torch.library) runs only where it has a kernel; torch_xla "
             "falls back to the CPU kernel.",
             "give the op a composite (pure-PyTorch) implementation, or register a kernel for the target",
             "the op's dispatch registrations in the tracing process"),
        Rule(RuleId.OP_FALLBACK, "op-fallback", "op falls back to the CPU",
             {target: SLOW for target in targets},
             "The target has no kernel for this op: it runs on the host with copies both ways (torch_xla, "
             "TorchNeuron fall back by default).",
             "rewrite with supported ops, or check a newer release of the backend",
             "op support table of the target (see op_support)"),
        Rule(RuleId.OP_MISSING, "op-missing", "op has no kernel on the target",
             {target: BLOCKER for target in targets},
             "No kernel and no default CPU fallback: the op raises (TorchTPU's CPU fallback is off by default; MPS "
             "falls back only with PYTORCH_ENABLE_MPS_FALLBACK=1).",
             "rewrite with supported ops, or enable the backend's CPU fallback (slow)",
             "op support table of the target (see op_support)"),
    ]}


RULES = rule_table(TARGETS, LAZY_TARGETS)


@dataclass(frozen=True)
class CauseAt:
    """Where a finding was caused when that is not where it showed up: a construction line
    (``torchport.trace.construction``), what happened there, and the step lines where it showed up."""

    location: str
    kind: CauseKind
    code: str | None
    seen_at: tuple[str, ...]
    library_location: str | None = None

    def seen_instead(self, seen: set[str | None]) -> CauseAt:
        """The same cause, seen at these step lines."""
        return replace(self, seen_at=tuple(sorted(s for s in seen if s and s != self.location)))


def finding(rule_id: RuleId, location: str | None, count: int, steps: int, detail: str, targets: list[str], *,
            cause: CauseAt | None = None, library: str | None = None, **extra: Any) -> Finding:
    rule = RULES[rule_id]
    affected = {t: rule.severity[t] for t in targets if t in rule.severity}
    return make_finding(rule, location, count, steps, detail, affected, cause=cause, library=library, **extra)


# The keys every finding is written with, in the order written; a detector's own
# fields (the ops, the phases) follow in the order it gives them, then where the cause moved it.
FINDING_KEYS = ("id", "rule", "title", "severity", "targets", "location", "count", "per_step", "detail", "fix")


def make_finding(rule: Rule, location: str | None, count: int, steps: int, detail: str,
                 affected: dict[str, TraceSeverity], *, cause: CauseAt | None = None, library: str | None = None,
                 **extra: Any) -> Finding:
    """A finding of ``rule`` at ``location``; ``cause``: it was caused at a construction line (``location`` is
    that line), ``library``: the library line (inside the user's call at ``location``) that caused it."""
    severity = glossary.worst_severity(affected.values(), SEVERITY_RANK) or MINOR
    library = cause.library_location if cause else library
    moved = ("cause", "seen_at") if cause else ()
    in_library = ("library_location", "library") if library else ()
    built = Finding(id=rule.id, rule=rule.name, title=rule.title, severity=TraceSeverity(severity),
                    targets={target: TraceSeverity(value) for target, value in affected.items()}, location=location,
                    count=count, per_step=round(count / steps, 3) if steps else None, detail=detail, fix=rule.fix,
                    cause=FindingCause(kind=cause.kind, code=cause.code) if cause else None,
                    seen_at=list(cause.seen_at) if cause else None,
                    library_location=library, library=_library_name(library), extra=extra)
    built.key_order = FINDING_KEYS + tuple(extra) + moved + in_library
    return built


Item = TypeVar("Item")


def _group(items: list[Item], key: Callable[[Item], tuple]) -> dict[tuple, list[Item]]:
    grouped: dict[tuple, list[Item]] = {}
    for item in items:
        grouped.setdefault(key(item), []).append(item)
    return grouped


def _library_name(library: str | None) -> str | None:
    """The library of a library line, e.g. ``transformers`` of ``transformers/masking_utils.py:140``
    (a path inside site-packages)."""
    return library.split("/", 1)[0].split(":")[0] if library else None


def _at_cause(site: ConstructionSite | None, kind: CauseKind, seen: set[str | None]) -> CauseAt | None:
    """Where a finding moves from where it showed up to where it was caused (a
    construction site): the site's user line becomes ``location`` (with the
    library line that built the thing, if a library did), what happened there
    is ``cause``, and the step lines where it showed up are kept as ``seen_at``."""
    if site is None or not site.location:
        return None
    return CauseAt(location=site.location, kind=kind, code=site.code, seen_at=(),
                   library_location=site.library_location).seen_instead(seen)


def _dtype_cause(construction: TraceConstruction, role: str, dtype: str) -> ConstructionSite | None:
    """The first construction line that made the model's (``role`` model) or the
    data's tensors ``dtype``: a conversion or creation, else a changed default."""
    for change in construction.dtype_changes:
        if change.role == role and change.to == dtype and change.location:
            return change
    for default in construction.default_dtype:
        if default.dtype == dtype and default.location:
            return default
    return None


def contract_notes(construction: TraceConstruction | None) -> list[ContractNote]:
    """Where the app departs from its contract (README: the model is built in
    float32; torchport chooses the dtype with ``--dtype``): one note each, at
    the line that caused it."""
    construction = construction or TraceConstruction()
    notes = []
    dtype = construction.model_dtype
    if dtype and dtype != "float32":
        counts = construction.parameter_dtypes
        cause = _dtype_cause(construction, "model", dtype)
        notes.append(ContractNote(
            problem="model-dtype", dtype=dtype, location=cause.location if cause else None,
            code=cause.code if cause else None,
            text=f"the model's parameters are {dtype} ({counts.get(dtype, 0):,} of {sum(counts.values()):,}); "
                 "an app builds its model in float32 and torchport casts it (--dtype), so timings and parity "
                 f"compare {dtype} here" + ("; made so at this line" if cause else "")))
    return notes


def _partial_batch_loader(construction: TraceConstruction) -> ConstructionSite | None:
    """The DataLoader the data factory made, when it keeps a partial last batch."""
    loaders = [loader for loader in construction.data_loaders if loader.role == "data" and loader.location]
    if not loaders:
        return None
    loader = loaders[-1]
    return None if loader.drop_last else loader


def _in_step(record: TracedOp | HostSyncCall) -> bool:
    """Ops the user's step issued on the device: not the host-side data
    pipeline, not library internals with no user frame."""
    return record.phase != "data" and record.attributed != "phase"


def detect(trace: WorkerTrace, targets: list[str]) -> list[Finding]:
    """All findings of a raw trace for the given targets, ranked."""
    steps = max(1, trace.steps_done or 0)
    ops = trace.ops
    found: list[Finding] = []
    found += host_syncs(trace, steps, targets)
    found += dynamic_shapes(ops, steps, targets)
    found += input_shapes(trace, targets)
    found += graph_changes(trace, targets)
    found += float64(ops, steps, targets, trace)
    found += tile_alignment(ops, steps, targets, trace.construction)
    found += sparse(ops, steps, targets)
    found += custom_ops(ops, trace.custom_op_kernels, steps, targets)
    # A finding none of the chosen targets is affected by is not a finding here.
    return rank([f for f in found if f.targets])


def rank(found: list[Finding]) -> list[Finding]:
    return sorted(found, key=lambda f: (-SEVERITY_RANK[f.severity], -len(f.targets), -(f.extra.get("wasted_share") or 0),
                                        -f.count, f.id, f.location or "", f.library_location or ""))


@dataclass(frozen=True)
class _HostRead:
    """A host read in the step: a user-level call (``x.item()``) or an op whose output is data-dependent."""

    what: str
    phase: str
    location: str | None
    library: str | None
    count: int


def host_syncs(trace: WorkerTrace, steps: int, targets: list[str]) -> list[Finding]:
    events = [_HostRead(s.call, s.phase, s.location, s.library, s.count) for s in trace.host_syncs if _in_step(s)]
    events += [_HostRead(f"{r.op} (torch.{r.op.split('::')[1].split('.')[0]})", r.phase, r.location, r.library, r.count)
               for r in trace.ops if "data_dependent_output" in r.tags and not r.in_host_sync_call and _in_step(r)]
    found: list[Finding] = []
    for (location, library), group in _group(events, lambda e: (e.location, e.library)).items():
        calls = sorted({e.what for e in group})
        count = sum(e.count for e in group)
        found.append(finding(RuleId.HOST_SYNC, location, count, steps, f"{', '.join(calls)}: {count} in {steps} step(s)",
                             targets, library=library, calls=calls, phases=sorted({e.phase for e in group})))
    return found


def dynamic_shapes(ops: list[TracedOp], steps: int, targets: list[str]) -> list[Finding]:
    dynamic = [r for r in ops if "dynamic_output_shape" in r.tags and _in_step(r) and not r.in_host_sync_call
               and (not r.op.startswith("aten::index") or r.op.endswith("[bool]"))]
    found: list[Finding] = []
    for (location, library), group in _group(dynamic, lambda r: (r.location, r.library)).items():
        names = sorted({r.op for r in group})
        count = sum(r.count for r in group)
        found.append(finding(RuleId.DYNAMIC_OUTPUT_SHAPE, location, count, steps, f"{', '.join(names)}: {count} call(s) in {steps} step(s)",
                             targets, library=library, ops=names, phases=sorted({r.phase for r in group}),
                             modules=sorted({r.module for r in group if r.module})))
    return found


def varying_dims(signatures: list[BatchSignature]) -> list[VaryingDim]:
    """Which tensor of the batch, and which of its dimensions, takes more than one size."""
    by_path: dict[str, list[list[int]]] = {}
    for signature in signatures:
        for path, _dtype, shape in signature.leaves:
            by_path.setdefault(path, []).append(shape)
    varying: list[VaryingDim] = []
    for path, shapes in by_path.items():
        ranks = {len(s) for s in shapes}
        if len(ranks) > 1:
            varying.append(VaryingDim(input=path, dim=None, sizes=sorted({len(s) for s in shapes}), what="rank"))
            continue
        for dim in range(ranks.pop()):
            sizes = sorted({s[dim] for s in shapes})
            if len(sizes) > 1:
                varying.append(VaryingDim(input=path, dim=dim, sizes=sizes, what="size"))
    return varying


def input_shapes(trace: WorkerTrace, targets: list[str]) -> list[Finding]:
    scan = trace.data_scan or DataScan(complete_epoch=False)
    signatures = scan.signatures
    if len(signatures) <= 1:
        return []
    varying = varying_dims(signatures)
    described = "; ".join(
        f"{v.input} dim {v.dim} takes {len(v.sizes)} sizes ({', '.join(map(str, v.sizes[:6]))}"
        f"{', ...' if len(v.sizes) > 6 else ''})" if v.what == "size" else f"{v.input} changes rank"
        for v in varying)
    last_partial = (len(signatures) == 2 and min(s.count for s in signatures) == 1
                    and max(signatures, key=lambda s: s.first_batch).count == 1
                    and all(v.dim == 0 for v in varying))
    at_least = "" if scan.complete_epoch else "at least "
    detail = (f"{at_least}{len(signatures)} distinct batch signatures in {scan.batches} batches "
              f"(so {at_least}{len(signatures)} compilations of the step): {described}")
    if last_partial:
        detail += "; only the last batch differs: a partial last batch (DataLoader drop_last=False)"
    location = (trace.phase_locations or {}).get("data")
    loader = _partial_batch_loader(trace.construction or TraceConstruction()) if last_partial else None
    cause = _at_cause(loader, CauseKind.DATA_LOADER, {location}) if loader else None
    if cause and loader:
        location = cause.location
        length, size = loader.dataset_length, loader.batch_size
        detail += (f"; made by the DataLoader at that line: batch_size={size}, drop_last=False"
                   + (f" over {length} samples leaves a last batch of {length % size}" if length and size else ""))
    return [finding(RuleId.INPUT_SHAPES_VARY, location, len(signatures), 1, detail, targets, cause=cause,
                    signatures=len(signatures), varying=[v.to_dict() for v in varying],
                    last_partial_batch=last_partial, complete_epoch=bool(scan.complete_epoch))]


def graph_changes(trace: WorkerTrace, targets: list[str]) -> list[Finding]:
    graphs = trace.step_graphs
    batches = trace.step_batches
    changes = [(i + 1, g.first_difference) for i, g in enumerate(graphs)
               if g.first_difference and i < len(batches) and batches[i] == batches[i - 1]]
    if not changes:
        return []
    found: list[Finding] = []
    for (location,), group in _group(changes, lambda change: (change[1].location,)).items():
        step, first = group[0]
        found.append(finding(RuleId.GRAPH_VARIES, location, len(group), 1,
                             f"step {step} ran a different op sequence than step {step - 1} with "
                             f"the same input shapes, first at {first.op} ({first.phase})",
                             targets, distinct_graphs=len({g.graph for g in graphs})))
    return found


def _wide(descriptions: list[str]) -> bool:
    return any(d.split("[")[0].split(":")[-1] in ("float64", "complex128") for d in descriptions)


@dataclass(frozen=True)
class _Placed:
    """An op record at the line its finding is reported at: where it ran, or where its cause is."""

    record: TracedOp
    cause: CauseAt | None
    location: str | None
    library: str | None


def float64(ops: list[TracedOp], steps: int, targets: list[str], trace: WorkerTrace | None = None) -> list[Finding]:
    """Where a float64 tensor is made is the cause; ops that only compute on
    one follow from it.  An op in the step that makes float64 from narrower
    inputs (``x.double()``, ``torch.ones(..., dtype=torch.float64)``) is its own
    cause.  Ops on float64 inputs follow from the model's float64 parameters
    (caused where the model factory made them so, e.g. ``.double()``) or from
    float64 batches (caused where the data was made so); those are reported at
    that construction line, seen at the step's lines."""
    wide = [r for r in ops if _wide(r.outputs) and r.attributed != "phase"]
    trace = trace or WorkerTrace()
    construction = trace.construction or TraceConstruction()
    model_cause = (_dtype_cause(construction, "model", "float64")
                   if construction.parameter_dtypes.get("float64") else None)
    data_cause = None
    if any("float64" in batch for batch in trace.step_batches):
        data_cause = _dtype_cause(construction, "data", "float64") or next(
            (ConstructionSite(location=r.location) for r in wide if r.phase == "data" and not _wide(r.inputs)), None)
    placed = []
    for record in wide:
        site = (model_cause or data_cause) if _wide(record.inputs) else None
        cause_kind = CauseKind.MODEL_DTYPE if site is model_cause else CauseKind.DATA_DTYPE
        cause = _at_cause(site, cause_kind, {record.location}) if site else None
        placed.append(_Placed(record, cause, cause.location if cause else record.location,
                              cause.library_location if cause else record.library))
    found: list[Finding] = []
    for (location, library), group in _group(placed, lambda p: (p.location, p.library)).items():
        names = sorted({p.record.op for p in group})
        count = sum(p.record.count for p in group)
        moved = next((p.cause for p in group if p.cause), None)
        if moved:
            moved = moved.seen_instead({p.record.location for p in group} - {location})
            what = "the model's parameters" if moved.kind == CauseKind.MODEL_DTYPE else "the batches"
            code = moved.code
            detail = (f"{what} are float64, made so at this line{f' ({code})' if code else ''}; "
                      f"{count} op call(s) on float64 in {steps} step(s): {', '.join(names[:5])}"
                      f"{', ...' if len(names) > 5 else ''}")
        else:
            detail = (f"{count} op call(s) on float64 in {steps} step(s): {', '.join(names[:5])}"
                      f"{', ...' if len(names) > 5 else ''}")
        found.append(finding(RuleId.FLOAT64, location, count, steps, detail, targets, cause=moved, library=library,
                             ops=names, phases=sorted({p.record.phase for p in group})))
    # Float64 batches and a float64 model are two causes: the batches' line is
    # reported too when the model's took their ops.
    if data_cause and model_cause and data_cause.location and data_cause.location not in {f.location for f in found}:
        data_location = (trace.phase_locations or {}).get("data")
        batch_cause = _at_cause(data_cause, CauseKind.DATA_DTYPE, {data_location})
        assert batch_cause is not None  # the cause has a location
        batches = sum("float64" in batch for batch in trace.step_batches)
        code = batch_cause.code
        found.append(finding(RuleId.FLOAT64, batch_cause.location, batches, steps,
                             f"the batches are float64, made so at this line{f' ({code})' if code else ''}: "
                             f"{batches} float64 batch(es) in {steps} step(s)", targets, cause=batch_cause,
                             ops=[], phases=["data"]))
    return found


def _dims(text: str) -> list[int]:
    inside = text.split("[", 1)[1].rstrip("]")
    return [int(x) for x in inside.split(",") if x]


def _pad(value: int, tile: int) -> int:
    return int(math.ceil(value / tile) * tile) if value else 0


def matmul_dims(op: str, inputs: list[str]) -> list[tuple[int, int, int]]:
    """(M, K, N) of each matrix product an op performs (M rows, K contracted,
    N columns); [] for other ops."""
    name = op.split("::")[-1].split(".")[0]
    shapes = [_dims(t) for t in inputs if not t.startswith("list")]
    try:
        if name == "mm":
            (m, k), (_, n) = shapes[0], shapes[1]
            return [(m, k, n)]
        if name == "addmm":
            (m, k), (_, n) = shapes[1], shapes[2]
            return [(m, k, n)]
        if name in ("bmm", "baddbmm"):
            a, b = (shapes[0], shapes[1]) if name == "bmm" else (shapes[1], shapes[2])
            return [(a[0] * a[1], a[2], b[2])] if a[0] == 1 else [(a[1], a[2], b[2])] * a[0]
        if name in ("convolution", "_convolution", "convolution_backward"):
            # As an implicit GEMM: rows are output positions, the contraction
            # runs over input channels x kernel window, columns are output channels.
            data, weight = (shapes[0], shapes[1]) if name != "convolution_backward" else (shapes[0], shapes[2])
            return [(data[0] * math.prod(data[2:]), math.prod(weight[1:]), weight[0])]
        if name.startswith("_scaled_dot_product"):
            offset = 1 if name.endswith("backward") else 0
            query, key, value = shapes[offset], shapes[offset + 1], shapes[offset + 2]
            length, width, source, value_width = query[-2], query[-1], key[-2], value[-1]
            heads = math.prod(query[:-2])
            return [(length, width, source)] * heads + [(length, source, value_width)] * heads
    except (IndexError, ValueError):
        return []
    return []


def tile_efficiency(products: list[tuple[int, int, int]]) -> float | None:
    """Useful share of the work once M is padded to 8 and K, N to 128."""
    useful = sum(m * k * n for m, k, n in products)
    padded = sum(_pad(m, TILE_MINOR) * _pad(k, TILE_LANE) * _pad(n, TILE_LANE) for m, k, n in products)
    return useful / padded if padded else None


# A location is reported when at least this share of its matrix work is
# padding, and the padding is at least this share of the step's known FLOPs:
# smaller waste is not worth a line in the report.
TILE_MIN_WASTE_OF_OP = 0.25
TILE_MIN_WASTE_OF_STEP = 0.01
TILE_SLOW_WASTE_OF_STEP = 0.10


@dataclass
class _TileRow:
    """A forward op whose matrix products waste part of their work on padding to the TPU tile."""

    record: TracedOp
    flops: int
    wasted: float
    products: list[tuple[int, int, int]]
    cause: CauseAt | None = None

    @property
    def cause_location(self) -> str | None:
        return self.cause.location if self.cause else self.record.location


def _tile_cause(row: _TileRow, construction: TraceConstruction) -> CauseAt | None:
    """Where a misaligned product's sizes were fixed: a contraction or column
    size (K, N) by the constructor of the module that ran it (``nn.Linear(100,
    37)``); only the rows (M, the batch) by the DataLoader's batch_size.  None
    when construction does not say (a functional matmul in the loss)."""
    record = row.record
    odd_features = {v for _m, k, n in row.products for v in (k, n) if v % TILE_LANE}
    if odd_features:
        # The module's constructor fixed the size when one of its own weights
        # has it (a Linear's [N, K], a convolution's [N, C, kh, kw] with K =
        # C x kh x kw); a functional op in a module's forward (attention over
        # heads) is sized by the code that calls it.
        module = construction.modules.get(record.module or "")
        shapes = module.parameter_shapes if module else []
        fixed = any(v in shape or v == math.prod(shape[1:]) for v in odd_features for shape in shapes if shape)
        return _at_cause(module, CauseKind.MODULE_CONSTRUCTOR, {record.location}) if module and fixed else None
    loaders = [loader for loader in construction.data_loaders if loader.role == "data"]
    return _at_cause(loaders[-1], CauseKind.DATA_LOADER, {record.location}) if loaders else None


def tile_alignment(ops: list[TracedOp], steps: int, targets: list[str],
                   construction: TraceConstruction | None = None) -> list[Finding]:
    """Judged on the forward pass, where rows are the batch (or tokens) and K, N
    are features, as the TPU guide states its rule; the backward pass repeats
    the same dimensions (twice), so the forward share is the step's share.
    Reported at the line that fixed the sizes (see ``_tile_cause``), seen at
    the step lines that ran the products."""
    forward = [r for r in ops if r.phase in ("forward", "loss")]
    total_flops = sum(r.flops or 0 for r in forward)
    if not total_flops:
        return []
    rows = []
    for record in forward:
        if not record.flops:
            continue
        products = matmul_dims(record.op, record.inputs)
        efficiency = tile_efficiency(products)
        if efficiency is None or efficiency >= 1:
            continue
        rows.append(_TileRow(record, record.flops, record.flops * (1 - efficiency), products))
    # One line can run many layers (a Sequential called from the loss): judge
    # each module on its own, then report the line once with the modules that waste.
    wasteful = [row for group in _group(rows, lambda r: (r.record.location, r.record.module)).values()
                if sum(r.wasted for r in group) / sum(r.flops for r in group) >= TILE_MIN_WASTE_OF_OP
                for row in group]
    for row in wasteful:
        row.cause = _tile_cause(row, construction or TraceConstruction())
    found: list[Finding] = []
    for (location, _library), group in _group(
            wasteful, lambda r: (r.cause_location, r.cause.library_location if r.cause else None)).items():
        cause = next((r.cause for r in group if r.cause), None)
        if cause:
            cause = cause.seen_instead({r.record.location for r in group} - {location})
        flops = sum(r.flops for r in group)
        wasted = sum(r.wasted for r in group)
        if wasted / total_flops < TILE_MIN_WASTE_OF_STEP:
            continue
        odd = sorted({(d, v) for r in group for m, k, n in r.products
                      for d, v, tile in (("M", m, TILE_MINOR), ("K", k, TILE_LANE), ("N", n, TILE_LANE))
                      if v % tile})
        share = wasted / total_flops
        severity = SLOW if share >= TILE_SLOW_WASTE_OF_STEP else MINOR
        affected = {t: severity for t in targets if t in RULES[RuleId.TILE_MISALIGNED].severity}
        dims = ", ".join(f"{d}={v}" for d, v in odd[:6])
        modules = sorted({r.record.module for r in group if r.record.module})
        found.append(make_finding(RULES[RuleId.TILE_MISALIGNED], location, sum(r.record.count for r in group), steps,
                           f"{', '.join(sorted({r.record.op for r in group}))} with {dims}"
                           f"{' in ' + ', '.join(modules) if modules else ''}: {wasted / flops:.0%} of this work is "
                           f"padding, {share:.1%} of the forward pass's FLOPs (estimate: rows padded to 8, contraction "
                           f"and columns to 128; convolutions as implicit GEMM; backward alike)",
                           affected, cause=cause, wasted_share=round(share, 4), wasted_share_of_op=round(wasted / flops, 4),
                           modules=modules))
    return found


def sparse(ops: list[TracedOp], steps: int, targets: list[str]) -> list[Finding]:
    hits = [r for r in ops if any(d.startswith("sparse") for d in r.inputs + r.outputs)]
    found: list[Finding] = []
    for (location,), group in _group(hits, lambda r: (r.location,)).items():
        layouts = sorted({d.split(":")[0] for r in group for d in r.inputs + r.outputs if d.startswith("sparse")})
        count = sum(r.count for r in group)
        found.append(finding(RuleId.SPARSE_LAYOUT, location, count, steps, f"{', '.join(layouts)} tensors in "
                             f"{', '.join(sorted({r.op for r in group}))}", targets, layouts=layouts))
    return found


CUSTOM_OP_KEYS = {target: glossary.by_trace_target(target).dispatch_key for target in TARGETS}


def custom_ops(ops: list[TracedOp], registrations: dict[str, OpKernels], steps: int,
               targets: list[str]) -> list[Finding]:
    custom = [r for r in ops if r.op.split("::")[0] not in ("aten", "prim", "prims")]
    found: list[Finding] = []
    for (location,), group in _group(custom, lambda r: (r.location,)).items():
        names = sorted({r.op for r in group})
        lacking: dict[str, TraceSeverity] = {}
        for name in names:
            kernels = set(registrations[name].kernels if name in registrations else [])
            if any(k.startswith("Composite") for k in kernels):
                continue
            for target in targets:
                if CUSTOM_OP_KEYS.get(target) not in kernels and target in RULES[RuleId.CUSTOM_OP].severity:
                    lacking[target] = RULES[RuleId.CUSTOM_OP].severity[target]
        if lacking:
            count = sum(r.count for r in group)
            registered = sorted({k for n in names if n in registrations for k in registrations[n].kernels})
            found.append(make_finding(RULES[RuleId.CUSTOM_OP], location, count, steps,
                               f"{', '.join(names)}: kernels registered for {', '.join(registered) or 'nothing'}",
                               lacking, ops=names))
    return found
