"""TP1xx, the ``torch.cuda`` runtime: synchronisation, seeding, RNG state, memory
statistics, the caching allocator, events, streams, graphs, NVIDIA tooling, and
every other ``torch.cuda`` call.  This family also routes a ``torch.cuda.X(...)``
call to the family that owns X (devices, mixed precision)."""
from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from torchport.scan.detectors.shared import ANY_VERSION
from torchport.scan.detectors.state import AnalyzerState
from torchport.scan.detectors.syntax import insert_at, node_end, node_start, plain_call, replace_node, walk_nodes
from torchport.scan.model import Edit
from torchport.scan.rules import (
    CUDA_EMPTY_CACHE,
    CUDA_EVENT,
    CUDA_GRAPHS,
    CUDA_MANUAL_SEED,
    CUDA_MEMORY_CONTROL,
    CUDA_MEMORY_INFO,
    CUDA_MEMORY_STATS,
    CUDA_RNG_STATE,
    CUDA_STREAM,
    CUDA_SYNCHRONIZE,
    NVIDIA_TOOLING,
    OTHER_TORCH_CUDA_API,
)

RULE_IDS = (CUDA_SYNCHRONIZE, CUDA_MANUAL_SEED, CUDA_RNG_STATE, CUDA_MEMORY_STATS, CUDA_MEMORY_INFO, CUDA_MEMORY_CONTROL,
            CUDA_EMPTY_CACHE,
            CUDA_EVENT, CUDA_STREAM, CUDA_GRAPHS, NVIDIA_TOOLING, OTHER_TORCH_CUDA_API)

# torch.cuda.X -> (rule, torch.<replacement>, min torch) for 1:1 renames.
CUDA_RENAMES_HERE: dict[str, tuple[str, str, str]] = {
    "synchronize": (CUDA_SYNCHRONIZE, "accelerator.synchronize", "2.6"),
    "manual_seed": (CUDA_MANUAL_SEED, "manual_seed", ANY_VERSION),
    "manual_seed_all": (CUDA_MANUAL_SEED, "manual_seed", ANY_VERSION),
    "seed": (CUDA_MANUAL_SEED, "seed", ANY_VERSION),
    "seed_all": (CUDA_MANUAL_SEED, "seed", ANY_VERSION),
    "empty_cache": (CUDA_EMPTY_CACHE, "accelerator.empty_cache", "2.9"),
    "mem_get_info": (CUDA_MEMORY_INFO, "accelerator.get_memory_info", "2.10"),
    **{name: (CUDA_MEMORY_STATS, f"accelerator.{name}", "2.9") for name in (
        "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
        "memory_stats")},
    **{name: (CUDA_MEMORY_CONTROL, f"accelerator.{name}", "2.9") for name in (
        "reset_peak_memory_stats", "reset_accumulated_memory_stats")},
}
# torch.accelerator functions that raise where no accelerator exists (torch.cuda's
# own raise only for some), -> what the call yields there once guarded: None for a
# call that can only stand as a statement, else the value torch.cuda gives on a host
# without CUDA.
# Random-state calls that do nothing without CUDA rather than raise: set_rng_state* is
# deferred by torch.cuda._lazy_call, get_rng_state_all loops over no devices.
_NO_RAISE_RNG = ("set_rng_state", "set_rng_state_all", "get_rng_state_all")
_NO_RAISE_REASON = ("torch.cuda.{}() does not raise where CUDA is absent (it is deferred, or sees no "
                    "device): the CUDA random state is just not kept")
_RAISE_WITHOUT_ACCELERATOR: dict[str, str | None] = {
    "accelerator.synchronize": None, "accelerator.set_device_index": None,
    "accelerator.empty_cache": None, "accelerator.reset_peak_memory_stats": None,
    "accelerator.reset_accumulated_memory_stats": None, "accelerator.current_device_index": "0",
    "accelerator.device_index": None, "accelerator.get_memory_info": None,
    "accelerator.memory_stats": "{}",
    **dict.fromkeys(("accelerator.memory_allocated", "accelerator.max_memory_allocated",
                     "accelerator.memory_reserved", "accelerator.max_memory_reserved"), "0"),
}
# torch.cuda.X -> rule, for the names without a safe rewrite.
CUDA_NAMES_HERE: dict[str, str] = {
    **dict.fromkeys(("get_rng_state", "get_rng_state_all", "set_rng_state",
                     "set_rng_state_all", "initial_seed"), CUDA_RNG_STATE),
    **dict.fromkeys(("memory_cached", "max_memory_cached", "list_gpu_processes",
                     "memory_stats_as_nested_dict"), CUDA_MEMORY_STATS),
    # These raise without CUDA (tests/test_scan_precision_round14.py runs them).
    **dict.fromkeys(("memory_summary", "memory_snapshot", "reset_max_memory_allocated",
                     "reset_max_memory_cached", "set_per_process_memory_fraction", "memory_usage",
                     "caching_allocator_alloc", "caching_allocator_delete", "device_memory_used"),
                    CUDA_MEMORY_CONTROL),
    "Event": CUDA_EVENT,
    **dict.fromkeys(("Stream", "stream", "current_stream", "default_stream", "set_stream",
                     "StreamContext", "ExternalStream", "streams"), CUDA_STREAM),
    **dict.fromkeys(("CUDAGraph", "graph", "graphs", "make_graphed_callables",
                     "graph_pool_handle"), CUDA_GRAPHS),
    **dict.fromkeys(("nvtx", "set_sync_debug_mode", "get_sync_debug_mode", "profiler",
                     "cudart"), NVIDIA_TOOLING),
}
# Any other torch.cuda name.
FALLBACK_RULE = OTHER_TORCH_CUDA_API


def _is_torch_cuda(qualname: str) -> bool:
    return qualname.startswith("torch.cuda.")


# Integer division and remainder: `rank % 0` raises.  (True division is left out: a float tensor
# divided by 0 gives inf, silently.)
_DIVIDE = (ast.Mod, ast.FloorDiv)
_DIVISOR_REASON = ("torch.cuda.device_count() is 0 where CUDA is absent, and the line takes a remainder or an "
                   "integer quotient by it: ZeroDivisionError, not a quiet single-device run")
# The fields of a compound statement that hold other statements, not its header.
_BLOCK_FIELDS = frozenset({"body", "orelse", "finalbody", "handlers", "cases"})

# Names of a pool's size: `num_workers`, `n_threads`, `num_proc`, `max_workers`.
_POOL_SIZE = re.compile(r"workers?|threads?|(?:^|_)procs?(?:_|$)|processes|pool_size", re.I)


class CudaRuntimeDetector(AnalyzerState):
    CALL_PREFIXES = ((_is_torch_cuda, "_torch_cuda_call"),)
    STRINGS = (("nvidia-smi", "_nvidia_smi_string"),)  # torchport: ignore

    def _nvidia_smi_string(self, node: ast.Constant, value: str) -> None:
        if self.in_message:  # `log(f"nvidia-smi probe failed: {exc}")` is text
            return
        self.report(NVIDIA_TOOLING, node, '"nvidia-smi"')

    def _torch_cuda_call(self, node: ast.Call, qualname: str) -> bool:
        parts = qualname.split(".")[2:]
        if parts[0] in ("memory", "random") and len(parts) > 1:  # torch.cuda.random.manual_seed
            parts = parts[1:]
        name = parts[-1] if parts[0] == "amp" else parts[0]
        if parts[0] == "amp" and name == "autocast":
            return self._cuda_amp_autocast(node, qualname)
        if parts[0] == "amp" and name == "GradScaler":
            return self._cuda_amp_grad_scaler(node, qualname)
        if name == "is_available" and len(parts) == 1:
            return self._cuda_is_available_call(node, qualname)
        if len(parts) == 1 and name in self.cuda_renames:
            rule_id, target, min_torch = self.cuda_renames[name]
            safe = not node.keywords and plain_call(node) and (name != "device" or len(node.args) == 1)
            edits = [replace_node(node.func, f"{self.T}.{target}")] if safe else None
            bare = None
            if edits is not None and target in _RAISE_WITHOUT_ACCELERATOR:
                bare, edits = edits, self._guarded(node, f"{self.T}.{target}", _RAISE_WITHOUT_ACCELERATOR[target])
            detail = f"{qualname}()"
            if safe and rule_id == CUDA_MANUAL_SEED and self._seeded_already(node, target):
                edits = self._delete_statement(node)
                detail += f" (next to {self.T}.{target}(), which already seeds every device)"
            divides = name == "device_count" and self._divides_by(node)
            if divides:
                finding_cap = None  # the rule's own error: the line raises
            elif name == "device_count":
                finding_cap = ("silent", "torch.cuda.device_count() returns 0 where CUDA is absent; it does not raise")
                if self._sizes_a_pool(node):
                    finding_cap = ("perf", "torch.cuda.device_count() only scales a worker or thread count")
            elif name in _NO_RAISE_RNG:
                finding_cap = ("silent", _NO_RAISE_REASON.format(name))
            elif rule_id == CUDA_MANUAL_SEED and self._seeded_before(node):
                finding_cap = ("info", "torch.manual_seed() just above already seeds every device")
            else:
                finding_cap = None
            if name == "set_device" and node.args and isinstance(node.args[0], ast.Name):
                self._device_use(node.args[0], "in torch.cuda.set_device()")
                if safe and self._unfixed_device(node.args[0]):
                    edits, detail = None, detail + " with a device string that is not rewritten"
            finding = self.report(rule_id, node, detail, edits, min_torch, bare_edits=bare)
            if divides:
                finding.cap_reason = _DIVISOR_REASON
            if finding_cap:
                finding.severity_cap, finding.cap_reason = finding_cap
            return True
        fallback_rule = self.reference_rule(qualname)
        if fallback_rule is None:  # a name every build defines: raise torch.cuda.OutOfMemoryError(...)
            return False
        finding = self.report(fallback_rule, node.func, f"{qualname}()")
        if name in _NO_RAISE_RNG and len(parts) == 1:
            finding.severity_cap, finding.cap_reason = "silent", _NO_RAISE_REASON.format(name)
        return True

    def _guarded(self, node: ast.Call, replacement: str, fallback: str | None) -> list[Edit] | None:
        """The rewrite that runs where no accelerator exists: a statement of its own
        goes under ``if torch.accelerator.is_available():``; a value falls back to what
        torch.cuda gives without CUDA; ``device_index(i)`` gets None there.  None where
        nothing fits (a value with no fallback, a statement sharing its line)."""
        available = f"{self.T}.accelerator.is_available()"
        if replacement.endswith(".device_index"):
            # `with torch.cuda.device(i):`: device_index(None) does nothing, without an accelerator too.
            index = node.args[0] if len(node.args) == 1 else None
            if not isinstance(index, (ast.Name, ast.Attribute, ast.Constant, ast.Subscript, ast.Call)):
                return None
            return [replace_node(node.func, replacement), insert_at(node_end(index), f" if {available} else None")]
        statement = self.parents.get(id(node))
        if isinstance(statement, ast.Expr) and statement.value is node and node.func.col_offset == statement.col_offset:
            line = self.lines[statement.lineno - 1] if statement.lineno <= len(self.lines) else ""
            indent = line.encode("utf-8")[:statement.col_offset].decode("utf-8", "replace")
            last = self.lines[(statement.end_lineno or statement.lineno) - 1]
            after = last.encode("utf-8")[statement.end_col_offset or 0:].decode("utf-8", "replace").strip()
            if indent.strip() or (after and not after.startswith("#")):
                return None  # `x = 1; torch.cuda.synchronize()`: no room for a block
            return [replace_node(node.func, f"if {available}:\n{indent}    {replacement}")]
        if fallback is None:
            return None
        return [replace_node(node.func, f"({replacement}"), insert_at(node_end(node), f" if {available} else {fallback})")]

    def _divides_by(self, node: ast.Call) -> bool:
        """``args.rank % torch.cuda.device_count()``, ``n // ...``, ``divmod(i, ...)``: a count
        of 0 where CUDA is absent raises ZeroDivisionError, so the run stops there."""
        for part in self._parts_holding(node):
            for parent in walk_nodes(part):
                if isinstance(parent, ast.BinOp) and parent.right is node and isinstance(parent.op, _DIVIDE):
                    return True
                if isinstance(parent, ast.AugAssign) and parent.value is node and isinstance(parent.op, _DIVIDE):
                    return True
                if (isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id == "divmod"
                        and len(parent.args) == 2 and parent.args[1] is node):
                    return True
        return False

    def _parts_holding(self, node: ast.expr) -> list[ast.AST]:
        """The statements whose lines hold the node: a simple statement whole, a compound one by
        its header (``if rank % n == 0:``, ``for i in range(k // n):``, decorators, defaults)."""
        found: list[ast.AST] = []
        for statement in self._statements_spanning(node.lineno):
            if not any(hasattr(statement, field) for field in _BLOCK_FIELDS):
                found.append(statement)
                continue
            found.extend(child for field, value in ast.iter_fields(statement) if field not in _BLOCK_FIELDS
                         for child in (value if isinstance(value, list) else [value])
                         if isinstance(child, ast.AST))
        return found

    def _statements_spanning(self, line: int) -> Iterator[ast.stmt]:
        """Every statement, at any depth, whose lines include ``line``."""
        seen: set[int] = set()
        for block in self.blocks.values():
            if id(block) in seen:
                continue
            seen.add(id(block))
            for statement in block:
                if isinstance(statement, ast.stmt) and statement.lineno <= line <= (statement.end_lineno or statement.lineno):
                    yield statement  # (a match statement's cases are no statements)

    def _sizes_a_pool(self, node: ast.Call) -> bool:
        """``num_workers *= min(2, torch.cuda.device_count())``: the count only sizes a
        pool of workers or threads, which changes speed, never results."""
        for statement in self._statements_spanning(node.lineno):
            if not isinstance(statement, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                continue
            if statement.value is None or not any(n is node for n in walk_nodes(statement.value)):
                continue
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            names = [getattr(t, "id", None) or getattr(t, "attr", "") for t in targets]
            return any(_POOL_SIZE.search(name or "") for name in names)
        return False

    def _seeded_before(self, node: ast.Call) -> bool:
        """``torch.manual_seed(seed)`` (or ``torch.random.manual_seed``) earlier in the
        same block: it seeds every device, so the CUDA seeding after it changes nothing."""
        statement = self.parents.get(id(node))
        if statement is None:
            return False
        for sibling in self.blocks.get(id(statement), ()):
            if sibling is statement:
                return False
            if (isinstance(sibling, ast.Expr) and isinstance(sibling.value, ast.Call)
                    and self.qualname(sibling.value.func) in ("torch.manual_seed", "torch.random.manual_seed")):
                return True
        return False

    def _seeded_already(self, node: ast.Call, target: str) -> bool:
        """Whether the statement block already holds ``torch.<target>(same arguments)``
        (or an earlier CUDA seeding call that becomes it), so the rewrite would duplicate it."""
        statement = self.parents.get(id(node))
        if statement is None:
            return False
        arguments = ast.dump(ast.Tuple(node.args, ast.Load()))
        for sibling in self.blocks.get(id(statement), ()):
            if sibling is statement:
                continue
            if not (isinstance(sibling, ast.Expr) and isinstance(sibling.value, ast.Call)):
                continue
            call = sibling.value
            if ast.dump(ast.Tuple(call.args, ast.Load())) != arguments or call.keywords:
                continue
            qualname = self.qualname(call.func) or ""
            if qualname == f"torch.{target}":
                return True
            before = sibling.lineno < statement.lineno
            # Only this family's renames seed; the others never target manual_seed/seed.
            if before and qualname.startswith("torch.cuda.") and CUDA_RENAMES_HERE.get(
                    qualname.split(".")[-1], ("", ""))[1] == target:
                return True
        return False

    def _delete_statement(self, node: ast.Call) -> list[Edit] | None:
        """Edits removing the seeding statement's lines, or None when it shares a line."""
        statement = self.parents[id(node)]
        (first, _), (last, last_column) = node_start(statement), node_end(statement)
        before = self.lines[first - 1][:statement.col_offset] if first <= len(self.lines) else ""
        after = self.lines[last - 1].encode("utf-8")[last_column:].decode("utf-8", "replace")
        if before.strip() or (after.strip() and not after.strip().startswith("#")):
            return None
        if last < len(self.lines):
            return [Edit((first, 0), (last + 1, 0), "")]
        return [replace_node(statement, "pass")]
