"""``if torch.cuda.is_available(): torch.cuda.synchronize()`` around a timed region whose figure
only becomes a log line: ``elapsed = time.perf_counter() - start; logger.info(f"{elapsed:.3f} s")``.
Off CUDA the wait is skipped and at most the logged figure is less exact; nothing the function
returns or stores depends on it.  A timing that is returned, stored on an object, appended to
results or handed to anything but a log or print call keeps the finding (a benchmark's figure
is its result)."""
from __future__ import annotations

import ast
import re

from torchport.scan.old_torch_branch import statements_holding
from torchport.scan.detectors.syntax import last_name, walk_nodes

# Clocks: `time.perf_counter()`, `time.time()`, `monotonic()`, `default_timer()`.
_CLOCK = re.compile(r"^(time\.)?(perf_counter|perf_counter_ns|time|monotonic|monotonic_ns|default_timer)$")

# Calls whose arguments are text for people.
_LOG_CALLS = frozenset({"print", "info", "debug", "warning", "warn", "log", "write", "set_description",
                        "set_postfix", "set_postfix_str"})


def _is_cuda_sync_guard(node: ast.stmt) -> bool:
    if not (isinstance(node, ast.If) and not node.orelse and len(node.body) == 1):
        return False
    statement = node.body[0]
    return (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)
            and ast.unparse(statement.value.func) == "torch.cuda.synchronize"
            and "torch.cuda.is_available" in ast.unparse(node.test))


def _reads_clock(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and _CLOCK.match(ast.unparse(n.func)) for n in walk_nodes(node))


def _log_call(call: ast.Call) -> bool:
    return last_name(call.func) in _LOG_CALLS


def only_logged(tree: ast.Module, line: int) -> bool:
    """The guard at ``line`` syncs a timed region of its function whose clock readings are read
    only inside log or print calls (directly, or through locals assigned from them)."""
    holding = statements_holding(tree, line)
    functions = [s for s in holding if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    guard = holding[-1] if holding else None
    if not functions or not isinstance(guard, ast.If) or guard.lineno != line or not _is_cuda_sync_guard(guard):
        return False
    function = functions[-1]
    parents: dict[int, ast.AST] = {}
    for node in walk_nodes(function):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    timed: set[str] = set()
    assignments = [n for n in walk_nodes(function) if isinstance(n, ast.Assign)]
    changed = True
    while changed:
        changed = False
        for assign in assignments:
            if not (_reads_clock(assign.value) or any(isinstance(n, ast.Name) and n.id in timed
                                                      for n in walk_nodes(assign.value))):
                continue
            for target in assign.targets:
                if not isinstance(target, ast.Name):
                    return False  # a clock reading stored on an object or in a container
                if target.id not in timed:
                    timed.add(target.id)
                    changed = True
    if not timed:
        return False
    assigned_from_timing = {id(t) for a in assignments for t in a.targets if isinstance(t, ast.Name) and t.id in timed}
    for node in walk_nodes(function):
        if not (isinstance(node, ast.Name) and node.id in timed and isinstance(node.ctx, ast.Load)):
            continue
        if id(node) in assigned_from_timing:
            continue
        parent = parents.get(id(node))
        logged = False
        while parent is not None and not isinstance(parent, ast.stmt):
            if isinstance(parent, ast.Call) and _log_call(parent):
                logged = True
                break
            parent = parents.get(id(parent))
        if logged:
            continue
        if isinstance(parent, ast.Assign) and all(isinstance(t, ast.Name) and t.id in timed for t in parent.targets):
            continue  # `elapsed = perf_counter() - start`: followed through the name it binds
        return False
    return True
