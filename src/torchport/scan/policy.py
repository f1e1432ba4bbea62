"""Severity by evidence: the shapes that independent judges found mostly wrong at
error or silent are lowered here, after the detectors have run (docs/precision/policy.md
has the pooled verdicts behind every row).

Error and silent are kept for shapes whose consequence is certain in normal use.  A
lowered finding keeps its rule and location and says why (``cap_reason``): it still
appears in JSON, SARIF and with ``--show-info``.  Only ``torchport scan`` applies this
policy; ``torchport fix`` rewrites the same code as before.
"""
from __future__ import annotations

import ast
import collections
import dataclasses
import functools
import operator
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from torchport.scan import (after_cuda_exit, autocast_gate, check_consequence, cuda_queries, cuda_stream_argument, debug_logging,
                            default_path, device_compare, device_guard, distributed_path, float64_device, gpu_test_names,
                            host_move, library_ops, nvidia_runtime, old_torch_branch, optional_native, spawn_defaults,
                            timing_log, unread_value)
from torchport.scan.detectors.shared import ADAPTS_BESIDE_A_CPU_TEST, BUILD_FACT, CUDA_ONLY_KERNEL, is_test_file
from torchport.scan.detectors.syntax import (
    character_column,
    fails_with,
    kernel_devices,
    last_name,
    string_value,
    walk_nodes,
)
from torchport.scan.model import Finding
from torchport.scan.rules import (CUDA_AVAILABILITY_CHECK, CUDA_DEVICE_MANAGEMENT, CUDA_DEVICE_PROPERTIES, CUDA_EVENT,
                                  CUDA_MANUAL_SEED, CUDA_TENSOR_TYPE, CUDA_VISIBLE_DEVICES, NCCL_BACKEND,
                                  FLOAT64, CUDA_SOURCE_FILE, NON_HIPIFIABLE_CODE, CUDA_DEVICE_STRING, CUDA_AUTOCAST, CUDA_GRAD_SCALER, OTHER_TORCH_CUDA_API, RULES_BY_ID, SEVERITY_RANK,
                                  NVIDIA_TOOLING, TRITON_KERNEL, finding_severity)

# Libraries whose whole point is an NVIDIA feature: code that imports them is CUDA by design.
# (Not cupy: libraries accept cupy arrays as one array type among others.)
_NVIDIA_ONLY = re.compile(r"\b(tensorrt|torch_tensorrt|kvikio|pynvml|nvidia_smi|trt\.Builder|trt\.Runtime)\b"
                          # the CUTLASS Python DSL (CuTe): kernels for NVIDIA GPUs only
                          r"|\b(from|import)\s+cutlass\b|\bcutlass(\.cute|_torch)\b")

# Classes and functions named for an NVIDIA-only feature: `class TrtCompiler`, `class GDSDataset`.
_NVIDIA_NAMED = re.compile(r"(^|_|[a-z])(trt|tensorrt|gds|kvikio|nvml)($|_|[A-Z])", re.IGNORECASE)

# Functions that only report the environment: `get_gpu_info`, `print_system_info`,
# `check_env`, `collect_env`, `show_install`.
_REPORT_FUNCTION = re.compile(r"(get|print|show|collect|check|log|dump)_(\w*_)?(info|env|environment|install|"
                              r"config|report)s?|check_torch_cuda|collect_system_info")

# A module that reports the environment: a copy of torch.utils.collect_env, a `check_env`, an
# `env`, `info` or `doctor` command of a package's CLI (`optimum-cli env`, `gvhmr info`).  A module
# named `env.py` or `info.py` elsewhere is often the package's device configuration, and is not one.
_REPORT_MODULE = re.compile(r"(?:^|/)(?:collect_env|check_env)\.py$|(?:^|/)(?:commands|cli)/(?:env|info|doctor)\.py$")

# The same commands written as one function of a CLI (`@main.command() def info(use_json):`).
_REPORT_COMMAND = re.compile(r"info|env|environment|doctor|sysinfo|system_info")

# Names of a functions whose sync is part of a timing: there the sync changes the result.
_TIMING_SCOPE = re.compile(r"time|timing|bench|profil|measure|elapsed", re.IGNORECASE)

# An opt-in flag named for CUDA: `def get_data(cuda=False)`, `use_cuda=None`, `self.use_gpu`.
_CUDA_FLAG = re.compile(r"(use_)?(cuda|gpu)", re.IGNORECASE)

# `if MONAIEnvVars.debug(): raise`, `if DEBUG: raise`: re-raised only for a developer.
_DEBUG = re.compile(r"debug", re.IGNORECASE)

# A flag named for CUDA: `use_gpu`, `use_gpu_in_tests`, `cuda`.
_CUDA_WORD = re.compile(r"(^|_)(cuda|gpu)(_|$)", re.IGNORECASE)

# A test helper named for CUDA: `def train_picklable_cuda_net(...)`, `def cuda_model()`.
_CUDA_NAMED_HELPER = re.compile(r"(^|_)cuda(_|$)", re.IGNORECASE)

# Factories that make a new tensor: without device= it is on the CPU, where float64 is fine.
_FACTORIES = frozenset({"tensor", "as_tensor", "from_numpy", "eye", "zeros", "ones", "empty", "full", "arange",
                        "linspace", "DoubleTensor", "rand", "randn", "zeros_like", "ones_like"})



# Reasons that start so say the line runs only when the user opts in; the text output counts them.
OPT_IN_PREFIX = "only when "
OPT_IN_REASON = (OPT_IN_PREFIX + "`{}` is set: a user option that nothing in this file turns on by default, so a "
                 "user without CUDA reaches this line only by opting in")


def is_opt_in(finding: Finding) -> bool:
    """Lowered because the line runs only when the user opts in (a flag, an option, the environment)."""
    return finding.cap_reason.startswith(OPT_IN_PREFIX)


def worst_of(finding: Finding) -> str | None:
    """The finding's worst severity over every target, after its own cap."""
    rule = RULES_BY_ID[finding.rule_id]
    found = [s for s in rule.severity.values() if s]
    if not found:
        return None
    worst = max(found, key=SEVERITY_RANK.__getitem__)
    if finding.raised_to and SEVERITY_RANK[finding.raised_to] > SEVERITY_RANK[worst]:
        worst = finding.raised_to
    cap = finding.severity_cap
    return cap if cap and SEVERITY_RANK[cap] < SEVERITY_RANK[worst] else worst


def is_hot(finding: Finding) -> bool:
    """Whether some target reports the finding at error or silent: what the precision goal counts."""
    return worst_of(finding) in ("error", "silent")


def still_hot(finding: Finding) -> bool:
    """At error or silent, and not lowered already: a pass over every file leaves a lowered
    finding its first reason."""
    return finding.severity_cap is None and is_hot(finding)


def _lower(finding: Finding, cap: str, reason: str) -> None:
    if SEVERITY_RANK[cap] > SEVERITY_RANK[worst_of(finding) or "info"]:
        # the code shows it louder than a detector's cap (a count that is 0 without CUDA, asserted)
        # or than the rule says
        finding.severity_cap = None
        uncapped = worst_of(finding) or "info"
        if SEVERITY_RANK[cap] > SEVERITY_RANK[uncapped]:
            finding.raised_to = cap
        elif SEVERITY_RANK[cap] < SEVERITY_RANK[uncapped]:
            finding.severity_cap = cap
    else:
        finding.severity_cap = cap
    finding.cap_reason = reason


_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")


_Scope = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _statements(tree: ast.Module) -> Iterator[ast.stmt | ast.excepthandler]:
    """Every statement (and except handler), without walking into expressions."""
    stack: list = list(tree.body)
    while stack:
        node = stack.pop()
        if not isinstance(node, ast.match_case):  # a case has a body but no position of its own
            yield node
        for field in _BODIES:
            stack.extend(getattr(node, field, None) or ())


def _header(statement) -> list[ast.AST]:
    """The statement and the expressions it holds itself, not those of the statements in its bodies."""
    found: list[ast.AST] = [statement]
    for field, value in ast.iter_fields(statement):
        if field in _BODIES:
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, ast.AST):
                found.extend(ast.walk(item))
    return found


class FileContext:
    """The statements around each line of one file.  Only statements are walked up front;
    the expressions of a line are walked when a finding there asks for them."""

    def __init__(self, tree: ast.Module, text: str) -> None:
        self.tree = tree
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.sources: dict[int, str] = {}
        self.scopes: list[_Scope] = []
        self.swallowing_tries: list[ast.Try] = []
        self.ifs: list[ast.If] = []
        self.statements: list[ast.stmt | ast.excepthandler] = []
        for node in _statements(tree):
            self.statements.append(node)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.scopes.append(node)
            elif isinstance(node, ast.If):
                self.ifs.append(node)
            elif isinstance(node, ast.Try) and any(_swallows(h) for h in node.handlers):
                self.swallowing_tries.append(node)
        self.scopes.sort(key=lambda scope: (scope.lineno, -(scope.end_lineno or 0)))
        self.expressions: dict[int, list[ast.AST]] = {}
        self._enclosing: dict[int, list[_Scope]] = {}
        self._spans: list[tuple[int, int, _Scope]] | None = None
        self.handed_on: set[int] = set()  # ids of dict values and of values stored into a subscript
        self._loads: dict[str, list[ast.expr]] | None = None
        # ids of `if` statements -> the environment variable of a CUDA-or-opt-in test, or None
        self.cuda_or_environment: dict[int, str | None] = {}

    def loads(self) -> dict[str, list[ast.expr]]:
        """Every read of a name or an attribute, by name, outside decorators (a decorator
        registers a function, it does not call it)."""
        if self._loads is None:
            decorators = {id(n) for s in self.scopes for d in s.decorator_list for n in walk_nodes(d)}
            self._loads = {}
            for node in walk_nodes(self.tree):
                if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load) \
                        and id(node) not in decorators:
                    self._loads.setdefault(node.id if isinstance(node, ast.Name) else node.attr, []).append(node)
        return self._loads

    @functools.cached_property
    def parents(self) -> dict[int, ast.AST]:
        """The parent of every node of the tree, by ``id`` of the node: read once per file by the
        readers that look up from a node (check_consequence, float64_device, the lowerings)."""
        parents: dict[int, ast.AST] = {}
        pending: collections.deque[ast.AST] = collections.deque([self.tree])  # breadth first, as ast.walk: the same last parent
        while pending:
            node = pending.popleft()
            for field in node._fields:  # ast.walk and iter_child_nodes in one pass over the fields
                value = getattr(node, field, None)
                for child in value if isinstance(value, list) else (value,):
                    if isinstance(child, ast.AST):
                        parents[id(child)] = node
                        pending.append(child)
        return parents

    @functools.cached_property
    def bare_names(self) -> frozenset[str]:
        """Every ``ast.Name`` in the file, read, stored or deleted."""
        return frozenset(node.id for node in walk_nodes(self.tree) if isinstance(node, ast.Name))

    @functools.cached_property
    def torch_library_imports(self) -> frozenset[str]:
        """The local names of ``from torch.library import custom_op as op``-style imports."""
        return frozenset(alias.asname or alias.name for statement in self.statements
                         if isinstance(statement, ast.ImportFrom) and statement.module == "torch.library"
                         for alias in statement.names)

    def _expressions_at(self, line: int) -> list[ast.AST]:
        if line not in self.expressions:
            found: list[ast.AST] = []
            for statement in self.statements:
                if statement.lineno <= line <= (statement.end_lineno or statement.lineno):
                    found.extend(_header(statement))
            for node in found:
                if isinstance(node, ast.Dict):  # `{"n": torch.cuda.device_count()}`, `{"n": int(...)}`
                    for value in node.values:
                        self.handed_on.add(id(value))
                        if isinstance(value, ast.Call):
                            self.handed_on.update(id(a) for a in value.args)
                elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript):
                    self.handed_on.add(id(node.value))
            self.expressions[line] = [n for n in found if getattr(n, "lineno", None) == line]
        return self.expressions[line]

    def line_text(self, line: int) -> str:
        return self.lines[line - 1] if 0 < line <= len(self.lines) else ""

    def column_of(self, node: ast.expr | ast.stmt) -> int:
        """The 1-based character column where ``node`` starts, as findings count columns."""
        return character_column(self.line_text(node.lineno), node.col_offset)

    def holds(self, node: ast.expr, line: int, column: int) -> bool:
        """Whether the 1-based ``line`` and character ``column`` of a finding fall inside ``node``,
        whose ast offsets count UTF-8 bytes."""
        end_line = node.end_lineno or node.lineno
        end = (end_line, character_column(self.line_text(end_line), node.end_col_offset or 0))
        return (node.lineno, self.column_of(node)) <= (line, column) < end

    def enclosing(self, line: int) -> list[_Scope]:
        """Outermost first.  Asked by many lowerings for the same lines: kept per line."""
        found = self._enclosing.get(line)
        if found is None:
            if self._spans is None:
                self._spans = [(_first_line(s), s.end_lineno or s.lineno, s) for s in self.scopes]
            found = self._enclosing[line] = [s for first, last, s in self._spans if first <= line <= last]
        return list(found)

    def blocks(self) -> list[list[ast.stmt]]:
        """The module's body and every statement list in it (bodies, ``else`` and ``finally`` parts)."""
        return [self.tree.body] + [block for owner in self.statements for field in ("body", "orelse", "finalbody")
                                   if (block := getattr(owner, field, None))]

    def innermost_function(self, line: int) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        return next((s for s in reversed(self.enclosing(line)) if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))),
                    None)

    def in_swallowing_try(self, line: int) -> bool:
        return any(t.body[0].lineno <= line <= (t.body[-1].end_lineno or t.body[-1].lineno)
                   for t in self.swallowing_tries)

    def source(self, node) -> str:
        """``ast.get_source_segment`` without splitting the whole file at every call."""
        key = id(node)
        if key not in self.sources:
            first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
            lines = [line.encode() for line in self.lines[first:last + 1]]
            if not lines:
                return ""
            lines[-1] = lines[-1][:node.end_col_offset]
            lines[0] = lines[0][node.col_offset:]
            self.sources[key] = b"".join(lines).decode(errors="replace")
        return self.sources[key]

    def expressions_at(self, line: int) -> list[ast.IfExp]:
        return [n for n in self._expressions_at(line) if isinstance(n, ast.IfExp)]

    def calls_at(self, line: int) -> list[ast.Call]:
        return [n for n in self._expressions_at(line) if isinstance(n, ast.Call)]


def _first_line(scope) -> int:
    """Where a function or class starts, its decorators included."""
    return min([scope.lineno] + [d.lineno for d in scope.decorator_list])


def _swallows(handler: ast.ExceptHandler) -> bool:
    """``except Exception: pass``-like: a broad handler that neither re-raises nor exits."""
    kind = handler.type
    broad = kind is None or (isinstance(kind, ast.Name) and kind.id in ("Exception", "BaseException")) or (
        isinstance(kind, ast.Tuple) and any(isinstance(e, ast.Name) and e.id in ("Exception", "AttributeError",
                                                                                 "RuntimeError", "AssertionError")
                                            for e in kind.elts))
    debug_only = {id(n) for branch in ast.walk(handler) if isinstance(branch, ast.If) and _DEBUG.search(
        ast.unparse(branch.test)) for n in ast.walk(branch)}
    return broad and not any(isinstance(n, ast.Raise) and id(n) not in debug_only for n in ast.walk(handler))


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> dict[str, ast.expr | None]:
    """Each parameter's default, None where it has none."""
    arguments = function.args
    positional = arguments.posonlyargs + arguments.args
    found: dict[str, ast.expr | None] = {a.arg: None for a in positional + arguments.kwonlyargs}
    found.update(zip([a.arg for a in positional[len(positional) - len(arguments.defaults):]], arguments.defaults))
    found.update({a.arg: d for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults) if d is not None})
    return found


def _off(default: ast.expr | None) -> bool:
    return isinstance(default, ast.Constant) and default.value in (False, None)


def _opt_in_flag(context: FileContext, line: int) -> str | None:
    """The name of a CUDA flag parameter, default False/None, whose ``if`` guards the line."""
    for function in context.enclosing(line):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        off = {name for name, d in _parameters(function).items()
               if _CUDA_FLAG.fullmatch(name) and _off(d) and not _rebound_on(function, name)}
        if not off:
            continue
        for statement in context.ifs:
            test = statement.test
            if (function.lineno <= statement.lineno <= (function.end_lineno or 0)
                    and isinstance(test, ast.Name) and test.id in off
                    and statement.body[0].lineno <= line <= (statement.body[-1].end_lineno or 0)):
                return test.id
    return None


def _cpu_factory(node: ast.expr) -> bool:
    """``torch.eye(4, dtype=torch.float64)``, ``torch.as_tensor(weights)``: a new tensor with no device."""
    if not isinstance(node, ast.Call):
        return False
    return last_name(node.func) in _FACTORIES and not any(k.arg == "device" for k in node.keywords)


def _casts_only(call: ast.Call) -> bool:
    """``.double()``, ``.to(torch.float64)``, ``.type(torch.float64)``: a cast that moves nothing."""
    name = call.func.attr if isinstance(call.func, ast.Attribute) else ""
    if name == "double":
        return not call.args and not call.keywords
    return (name in ("to", "type") and not call.keywords and len(call.args) == 1
            and isinstance(call.args[0], ast.Attribute) and call.args[0].attr in ("float64", "double"))


def _new_cpu_float64(context: FileContext, line: int) -> bool:
    """Every float64 on this line is a new device-less tensor, or a ``.double()`` of one: it is on the CPU."""
    casts = [c for c in context.calls_at(line)
             if "float64" in context.source(c) or "double" in context.source(c).lower()]
    for call in casts:
        func = call.func
        converted = func.value if isinstance(func, ast.Attribute) and _casts_only(call) else None
        if not (_cpu_factory(call) or (converted is not None and _cpu_factory(converted))):
            return False
    return bool(casts)


# `x.device.type != "mps"`, `not x.is_mps`: the guarded code runs everywhere but on MPS.
_OFF_MPS = re.compile(r"""!=\s*['"]mps['"]|['"]mps['"]\s*!=|\bnot\s+[\w.]*\.is_mps\b""")


def _skips_mps(context: FileContext, line: int) -> bool:
    """``if x.device.type != "mps": x = x.double()``: float64 made only where MPS is not the device."""
    return any(statement.body[0].lineno <= line <= (statement.body[-1].end_lineno or 0)
               and _OFF_MPS.search(context.source(statement.test)) for statement in context.ifs)


def _on_a_cuda_literal(context: FileContext, line: int) -> bool:
    """``torch.tensor(..., dtype=torch.float64, device="cuda")``: the device string fails first
    on every other device; its own finding on this line is the one to fix."""
    return any("float64" in context.source(call) or "double" in context.source(call)
               for call in context.calls_at(line)
               if any(k.arg == "device" and isinstance(k.value, ast.Constant) and isinstance(k.value.value, str)
                      and k.value.value.startswith("cuda") for k in call.keywords))


# Code for LAMMPS (ML-IAP, Kokkos): its devices are the CPU or CUDA/HIP, never MPS.
_NO_MPS_HOST = re.compile(r"lammps|kokkos", re.IGNORECASE)


def _float64_values(context: FileContext, line: int) -> tuple[list[ast.Attribute], dict[int, ast.AST]]:
    """The ``torch.float64``-like names on the line, and the parent of every node around them."""
    parents: dict[int, ast.AST] = {}
    for statement in context.statements:
        if statement.lineno <= line <= (statement.end_lineno or statement.lineno):
            for node in _header(statement):
                for child in ast.iter_child_nodes(node):
                    parents.setdefault(id(child), node)
    return float64_device.float64_names(context, line), parents


def _dtype_table_entry(context: FileContext, line: int) -> bool:
    """``{"float64": torch.float64}``, ``dtypes.get(name, torch.float64)``: a name looked up in a
    table makes no tensor; float64 comes out only for a caller that asks for it."""
    values, parents = _float64_values(context, line)

    def in_table(node: ast.AST) -> bool:
        parent = parents.get(id(node))
        if isinstance(parent, (ast.Tuple, ast.List)):  # `(torch.float64, np.float64)` as a dict value
            parent = parents.get(id(parent))
        if isinstance(parent, ast.Dict):
            return True
        return (isinstance(parent, ast.Call) and isinstance(parent.func, ast.Attribute) and parent.func.attr == "get"
                and len(parent.args) == 2 and parent.args[1] is node)
    return bool(values) and all(in_table(v) for v in values)


def _dtype_choice(context: FileContext, line: int) -> bool:
    """``torch.float32 if default_dtype == "float32" else torch.float64``, or the body of
    ``if default_dtype == "float64":``: float64 only where a dtype option (or the inputs'
    dtype) says so; the default path keeps its own dtype."""
    values, parents = _float64_values(context, line)
    if values and all(isinstance(parents.get(id(v)), ast.IfExp) and all(
            isinstance(branch, ast.Attribute) and isinstance(branch.value, ast.Name) and branch.value.id == "torch"
            for branch in (parents[id(v)].body, parents[id(v)].orelse)) for v in values):  # type: ignore[attr-defined]
        return True
    return any(statement.body[0].lineno <= line <= (statement.body[-1].end_lineno or 0)
               and isinstance(statement.test, ast.Compare)
               and re.search(r"""['"](float64|double)['"]|torch\.(float64|double)\b""", context.source(statement.test))
               for statement in context.ifs)


def _moved_later(context: FileContext, line: int, names: set[str]) -> bool:
    """Whether one of ``names`` is moved (``.cuda()``, ``.to(device)``) after the line, in its
    function (or module)."""
    functions = [s for s in context.enclosing(line) if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    last = (functions[-1].end_lineno or line) if functions else len(context.lines)
    text = "".join(context.lines[line - 1:last])
    return any(_moves(text, rf"(?<![\w.]){re.escape(name)}") for name in names)


def _moves(text: str, receiver: str = "") -> bool:
    """Whether the text calls ``.cuda()`` or a ``.to()`` given more than a dtype (on ``receiver``)."""
    for moved in re.finditer(rf"{receiver}\s*\.\s*(cuda|to)\s*\(([^)]*)", text):
        if moved.group(1) == "cuda" or not re.fullmatch(r"\s*(dtype\s*=\s*)?[\w.]*(float|double|complex|dtype)\w*\s*",
                                                        moved.group(2)):
            return True
    return False


def _handed_without_device(context: FileContext, line: int) -> bool:
    """``basis = change_basis(l, dtype=torch.float64)``: float64 handed to a function of the
    package (or a module) with no device, whose result is not moved in this function: the
    tensors it makes are on its default device, the CPU.  A tensor's own method
    (``x.sum(dtype=torch.float64)``) or a torch call is not this shape."""
    values, parents = _float64_values(context, line)
    if not values:
        return False
    calls = [parents.get(id(v)) for v in values]
    calls = [parents.get(id(c)) if isinstance(c, ast.keyword) else c for c in calls]
    for call in calls:
        if not isinstance(call, ast.Call):
            return False
        func = call.func
        base = func
        while isinstance(base, ast.Attribute):
            base = base.value
        if not isinstance(base, ast.Name) or base.id == "torch":
            return False
        imported = re.search(rf"^\s*(import\s+[\w.]+\s+as\s+{base.id}\b|import\s+{base.id}\b|"
                             rf"from\s+\S+\s+import\s.*\b{base.id}\b).*$", context.text, re.MULTILINE)
        if isinstance(func, ast.Attribute) and not imported:
            return False  # a method of an object (a tensor?), not a module's function
        if imported and re.match(r"\s*(from|import)\s+torch(\.|\s|$)", imported.group(0)):
            return False  # `F.softmax(x, dtype=torch.float64)`: torch computes on x's device
        if any(k.arg in ("device", "map_location") for k in call.keywords) or any(
                "device" in context.source(a) or "cuda" in context.source(a) for a in call.args):
            return False
        outer = parents.get(id(call))
        if isinstance(outer, ast.Attribute):
            return False  # `make(dtype=torch.float64).to(device)`
    targets: set[str] = set()  # `model`, and for `self.kernel = ...` both `self` and `self.kernel`
    for statement in context.statements:
        if (statement.lineno <= line <= (statement.end_lineno or statement.lineno)
                and isinstance(statement, (ast.Assign, ast.For, ast.AnnAssign, ast.AugAssign))):
            bound = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            targets.update(n.id for t in bound for n in ast.walk(t) if isinstance(n, ast.Name))
            targets.update(ast.unparse(t) for t in bound if isinstance(t, ast.Attribute))
    return not _moved_later(context, line, targets)


def _cached_constant(context: FileContext, line: int) -> bool:
    """``@functools.lru_cache def _so3_clebsch_gordan(l1, l2, l3)``: a cached function of
    hashable arguments (not tensors) that names no device makes its tensors on the CPU; the
    caller casts and moves the cached constant."""
    functions = [s for s in context.enclosing(line) if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if not functions:
        return False
    function = functions[-1]
    cached = any(re.search(r"\b(lru_cache|cache)\b", ast.unparse(d)) for d in function.decorator_list)
    source = context.source(function)
    return cached and "device" not in source and not _moves(source)


def _package_tests(path: str) -> bool:
    """A test file inside an installed package, a wheel or an sdist (not the user's own project):
    a folder above it holds ``*.dist-info``, ``PKG-INFO``, or ``*.egg-info`` without ``.git``,
    or the path runs through site-packages."""
    if not is_test_file(path):
        return False
    folder = Path(path).resolve().parent
    return "site-packages" in folder.parts or "dist-packages" in folder.parts or any(
        _package_root(str(above)) for above in (folder, *folder.parents))


@functools.lru_cache(maxsize=4096)
def _package_root(folder: str) -> bool:
    try:
        names = os.listdir(folder)
    except OSError:
        return False
    return "PKG-INFO" in names or any(n.endswith(".dist-info") for n in names) or (
        ".git" not in names and any(n.endswith(".egg-info") for n in names))


def _environment_flag(context: FileContext, line: int) -> str | None:
    """``use_gpu = os.environ["USE_GPU"] == "true"`` (else False), then ``if use_gpu:``:
    a CUDA flag set only from an environment variable, off unless the user sets it.  Also a
    test that reads the environment itself: ``if os.environ.get("X_CUDA_ON") == "1":``."""
    around = [s for s in context.ifs if s.body[0].lineno <= line <= (s.body[-1].end_lineno or 0)]
    # the innermost test names the variable that decides the line
    compared = [(s.lineno, found) for s in around
                if (found := optional_native.environment_opt_in(context.text, s.test, True)) is not None]
    if compared:
        return max(compared)[1]
    for statement in around:
        test = statement.test
        if not (isinstance(test, ast.Name) and _CUDA_WORD.search(test.id)):
            continue
        scopes = context.enclosing(line)
        low = scopes[-1].lineno if scopes else 0
        # read from the text: the parsed tree holds only the statements with trigger words
        assigned = re.compile(rf"^\s*{re.escape(test.id)}\s*=(?!=)\s*(.+?)\s*$")
        values = [m.group(1) for m in map(assigned.match, context.lines[max(low - 1, 0):statement.lineno - 1]) if m]
        from_environment = [v for v in values if re.search(r"\benviron\b|\bgetenv\b", v)]
        if from_environment and all(v in ("False", "None") or v in from_environment for v in values):
            return test.id
    return None


def _cuda_or_environment(context: FileContext, line: int) -> str | None:
    """``if torch.cuda.is_available() or os.getenv("FORCE_CUDA", "0") == "1":`` (CUDA extension
    setup scripts: mmcv, detectron2-style builds, usually with a CppExtension in the ``else``): the
    branch runs where CUDA is present, or where the user opts in through the environment.  The
    test must fail with CUDA-less torch's answers and the variable unset (``is_available() and
    CUDA_HOME is not None`` fails with them; an operand it cannot read, ``args.cuda``, does not)."""
    for statement in context.ifs:
        if statement.body[0].lineno <= line <= (statement.body[-1].end_lineno or 0):
            known = context.cuda_or_environment
            if id(statement) not in known:
                known[id(statement)] = _cuda_or_environment_test(context, statement)
            if known[id(statement)] is not None:
                return known[id(statement)]
    return None


def _cuda_or_environment_test(context: FileContext, statement: ast.If) -> str | None:
    """The opt-in variable of the statement's test, where the test is such an ``or``; else None."""
    test = statement.test
    if not (isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or)):
        return None
    opt_ins = [found for value in test.values
               if (found := optional_native.environment_opt_in(context.text, value, True)) is not None]
    if not opt_ins or not any(isinstance(n, ast.expr) and _query_answer(n) is not None for n in walk_nodes(test)):
        return None
    rocm = {n.id for n in walk_nodes(test) if isinstance(n, ast.Name) and _rocm_flag(context, statement, n.id)}

    def off_here(node: ast.expr) -> bool:
        """False (or 0) on a host without CUDA or ROCm, the environment at its defaults."""
        return (_query_answer(node) is not None or _asks_for_rocm(node)
                or (isinstance(node, ast.Name) and node.id in rocm)
                or optional_native.environment_opt_in(context.text, node, True) is not None)

    return opt_ins[0] if fails_with(test, off_here, 0) else None


def _asks_for_rocm(node: ast.expr) -> bool:
    """``torch.version.hip is not None``, ``torch.version.hip``: false on a build without ROCm."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.IsNot) \
            and isinstance(node.comparators[0], ast.Constant) and node.comparators[0].value is None:
        node = node.left
    return isinstance(node, ast.Attribute) and ast.unparse(node) == "torch.version.hip"


def _false_without_rocm(node: ast.expr) -> bool:
    """``False``, ``torch.version.hip is not None and ROCM_HOME is not None``, ``True if
    torch.version.hip is not None else False``: false on a build without ROCm, whatever else holds."""
    if isinstance(node, ast.Constant):
        return not node.value
    if _asks_for_rocm(node):
        return True
    if isinstance(node, ast.BoolOp):
        falses = [_false_without_rocm(value) for value in node.values]
        return any(falses) if isinstance(node.op, ast.And) else all(falses)
    if isinstance(node, ast.IfExp):
        return _false_without_rocm(node.orelse) and (_false_without_rocm(node.body) or _false_without_rocm(node.test))
    return False


def _rocm_flag(context: FileContext, statement: ast.If, name: str) -> bool:
    """``name`` is set before ``statement`` in its function (or module) only by plain assignments of
    values false without ROCm (``is_rocm = False``, then ``is_rocm = True if torch.version.hip is not
    None else False`` in a try), one of them at the statement's own level and one reading
    ``torch.version.hip``; no other binding (``:=``, ``for``, ``as``, an assignment after ``if x:``
    on one line) in those lines.  Read from the text, as the parsed tree may hold only the lines
    with trigger words."""
    scopes = context.enclosing(statement.lineno)
    first = scopes[-1].lineno if scopes else 1
    lines = context.lines[first - 1:statement.lineno - 1]
    mention = re.compile(rf"(?<![\w.]){re.escape(name)}\b")
    plain = re.compile(rf"([ \t]*){re.escape(name)}[ \t]*=(?!=)")
    own_level = reads_hip = False
    for index, text in enumerate(lines):
        if not mention.search(text):
            continue
        assigned = plain.match(text)
        if assigned is None:
            if re.search(rf"(?<![\w.]){re.escape(name)}\s*(?::=|[-+*/|&^]?=(?!=))|\b(?:as|for|import|global|nonlocal)"
                         rf"\s+(?:[\w, ]*\b)?{re.escape(name)}\b", text):
                return False  # bound some other way
            continue  # read, not bound
        value = _expression_from(lines, index, assigned.end())
        if value is None or not _false_without_rocm(value):
            return False
        own_level |= len(assigned.group(1).expandtabs()) == statement.col_offset
        reads_hip |= "torch.version.hip" in ast.unparse(value)
    return own_level and reads_hip


def _expression_from(lines: list[str], index: int, column: int) -> ast.expr | None:
    """The expression starting at ``column`` of ``lines[index]``, continued on following lines."""
    text = lines[index][column:]
    for following in lines[index + 1:index + 10]:
        try:
            return ast.parse(text.strip(), mode="eval").body
        except SyntaxError:
            text += following
    try:
        return ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return None


def _pins_only(context: FileContext, line: int) -> bool:
    """``if torch.cuda.is_available(): batch = batch.pin_memory()``: pinned host memory
    speeds the copy to the device and changes nothing else."""
    return any(statement.lineno == line and not statement.orelse and (all(
        isinstance(s, ast.Assign) and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Attribute)
        and s.value.func.attr == "pin_memory" for s in statement.body) or _pins_and_measures(statement.body))
        for statement in context.ifs)


# Calls that only measure what would be pinned (`sum(v.numel() * v.element_size() ...)`).
_MEASURES = frozenset({"sum", "len", "min", "max", "range", "numel", "element_size", "nbytes", "values", "keys",
                       "items", "size"})


def _pins_and_measures(body: list[ast.stmt]) -> bool:
    """A branch whose only calls pin host memory, or measure it first (a size budget, a loop over
    a state dict, a try that keeps the pageable copy when pinning fails)."""
    calls = [n for statement in body for n in ast.walk(statement) if isinstance(n, ast.Call)]
    statements = [n for statement in body for n in ast.walk(statement) if isinstance(n, ast.stmt)]
    return (any(last_name(c.func) == "pin_memory" for c in calls)
            and all(last_name(c.func) in _MEASURES | {"pin_memory"} for c in calls)
            and all(isinstance(n, (ast.Assign, ast.AugAssign, ast.If, ast.For, ast.Try, ast.Pass, ast.Expr))
                    for n in statements)
            # each value stored is pinned or measured: `device = "cuda:0"` beside the pinning chooses a device
            and all(any(isinstance(c, ast.Call) for c in ast.walk(n.value)) for n in statements
                    if isinstance(n, (ast.Assign, ast.AugAssign))))


def _unread_flag(context: FileContext, line: int) -> bool:
    """``use_cuda = torch.cuda.is_available()`` whose name is never read in the file (a
    local, or a lower-case module name: an upper-case constant may be imported elsewhere)."""
    for statement in context.statements:
        if not (isinstance(statement, ast.Assign) and statement.lineno == line and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name)):
            continue
        name = statement.targets[0].id
        if not context.enclosing(line) and not name.islower():
            return False
        reads = re.findall(rf"(?<![\w.]){re.escape(name)}(?!\w)", context.text)
        return len(reads) == 1
    return False


def _unread_local(site: _Site) -> str | None:
    # the scanner's tree keeps only part of a long function: the whole file is parsed for the
    # statements whose value could be dropped
    if not unread_value.may_be_unread(site.context, site.line, site.finding.column):
        return None
    return unread_value.unread_local(site.file.whole(), site.line, site.finding.column)


def _cpu_fallback_choice(context: FileContext, line: int) -> bool:
    """``accelerator="gpu" if torch.cuda.is_available() else "cpu"`` (in a test function: a
    helper that makes devices for many tests is held, tests/test_scan_precision_round5.py)."""
    return any(node.test.lineno == line and isinstance(node.orelse, ast.Constant) and node.orelse.value == "cpu"
               for node in context.expressions_at(line))


def _built_then_recast(context: FileContext, line: int) -> bool:
    """``kernel = ScaleKernel(..., dtype=torch.float64)`` (no device: built on the CPU) in a
    method that later does ``self.to(dtype=data.dtype, ...)``: the float64 is replaced by the
    data's dtype before anything runs on a device."""
    constructors = [node for node in _enclosing_calls(context, line)
                    if isinstance(node.func, (ast.Name, ast.Attribute)) and _class_name(node.func)
                    and any(k.arg == "dtype" and k.value.lineno == line for k in node.keywords)
                    and not any(k.arg == "device" for k in node.keywords)]
    if not constructors:
        return False
    function = next((s for s in reversed(context.enclosing(line)) if not isinstance(s, ast.ClassDef)), None)
    return function is not None and any(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "to"
        and context.source(node.func.value) == "self" and any(k.arg == "dtype" for k in node.keywords)
        and node.lineno > line for node in ast.walk(function))


def _enclosing_calls(context: FileContext, line: int) -> list[ast.Call]:
    return [node for statement in context.statements
            if statement.lineno <= line <= (statement.end_lineno or statement.lineno)
            and not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            for node in _header(statement) if isinstance(node, ast.Call)]


def _class_name(func: ast.expr) -> bool:
    name = last_name(func)
    return name[:1].isupper() and not name.isupper() and name != "DoubleTensor"


def _repeats_in_statement(findings: list[Finding]) -> None:
    """``x, y = x.cuda(), y.cuda()``: one statement, one fix; the second finding of the same
    rule on the line is kept at info, pointing at the first."""
    seen: dict[tuple[str, int], Finding] = {}
    for finding in sorted(findings, key=lambda f: (f.line, f.column)):
        first = seen.setdefault((finding.rule_id, finding.line), finding)
        if first is not finding and first.severity_cap is None:
            _lower(finding, "info", f"same statement as the {finding.rule_id} finding at column {first.column}: "
                                    "one fix covers both")


# `pytest.skip(..., allow_module_level=True)` or `pytestmark = pytest.mark.skipif(...)`.
_MODULE_SKIP = re.compile(r"allow_module_level\s*=\s*True|^pytestmark\s*=.*skip", re.MULTILINE)


def _exits_test(context: FileContext, line: int) -> bool:
    """``if not torch.cuda.is_available(): return`` (or ``pytest.skip()``) in a test."""
    return any(statement.lineno == line and all(isinstance(s, ast.Return) or "skip" in context.source(s).lower()
                                                 for s in statement.body)
               for statement in context.ifs)


def _exits_test_case(context: FileContext, line: int) -> bool:
    """``if not torch.cuda.is_available(): return`` in the body of a test function: it decides
    which test cases run where CUDA is absent."""
    return any(isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) and line > function.lineno
               for function in context.enclosing(line)) and _exits_test(context, line)


def _skipping_parametrised_case(context: FileContext, line: int) -> bool:
    """A CUDA case in the decorators of a parametrised test whose body skips where CUDA is absent."""
    for function in context.enclosing(line):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) or not function.decorator_list:
            continue
        decorators = function.decorator_list
        if (decorators[0].lineno <= line <= (decorators[-1].end_lineno or 0)
                and "skip" in "\n".join(context.source(s) for s in function.body).lower()):
            return True
    return False


def _test_device_choice(context: FileContext, line: int) -> bool:
    """``device = "cuda" if torch.cuda.is_available() else "cpu"`` inside a test: where CUDA is
    absent the test runs on the CPU."""
    return (any(scope.name.startswith("test") for scope in context.enclosing(line))
            and _cpu_fallback_choice(context, line))


def _cuda_named_test_helper(context: FileContext, line: int) -> str | None:
    """The innermost non-test function or class around the line named for CUDA (``cuda_model``)."""
    named = [scope.name for scope in context.enclosing(line)
             if _CUDA_NAMED_HELPER.search(scope.name) and not scope.name.startswith("test")]
    return named[-1] if named else None


# A compiled extension's op: `_C.bilateral_filter(...)`, `my_ext_cuda.forward(...)`.
_EXTENSION_CALL = re.compile(r"\b(_C|_ext|\w+_(cuda|ext|C))\.\w+\(")




def _syncs_after_extension_op(context: FileContext, line: int) -> bool:
    """``out = _C.op(x)`` and later ``if torch.cuda.is_available(): torch.cuda.synchronize()``
    outside any timing: the sync only waits for the kernel, as the next use would."""
    for scope in context.enclosing(line)[-1:]:
        if _TIMING_SCOPE.search(getattr(scope, "name", "")):
            return False
        body = getattr(scope, "body", [])
        for index, statement in enumerate(body):
            if not (isinstance(statement, ast.If) and statement.lineno == line and not statement.orelse):
                continue
            guarded = [context.source(s) for s in statement.body]
            after_extension_op = any(_EXTENSION_CALL.search(context.source(s)) for s in body[:index])
            return after_extension_op and all(s == "torch.cuda.synchronize()" for s in guarded)
    return False


def _count_handed_to_a_launcher(context: FileContext, line: int) -> bool:
    """``{"n_devices": torch.cuda.device_count()}``, ``setting["n_devices"] = torch.cuda.device_count()``."""
    counts = [call for call in context.calls_at(line) if context.source(call).endswith("device_count()")]
    return any(id(call) in context.handed_on for call in counts)


# Keywords through which DistributedDataParallel, FSDP and barrier take a CUDA device, and None for
# a module (or a group) on any other device.
_WRAPPER_DEVICE_KEYWORDS = frozenset({"device_ids", "output_device", "device_id"})


def _none_for_a_wrapper_elsewhere(context: FileContext, line: int) -> bool:
    """``DDP(model, device_ids=[rank] if torch.cuda.is_available() else None)``: where CUDA is
    absent the wrapper gets None, which is what DDP and FSDP take for a module already on its
    device (a CPU module must get None); the module's device is chosen elsewhere."""
    choices = [node for node in context.expressions_at(line)
               if context.source(node.test) == "torch.cuda.is_available()"
               and isinstance(node.orelse, ast.Constant) and node.orelse.value is None]
    if not choices:
        return False
    parents = context.parents
    return all(isinstance(keyword := parents.get(id(node)), ast.keyword) and keyword.arg in _WRAPPER_DEVICE_KEYWORDS
               for node in choices) and all(
        any(node.test is call for node in choices) for call in context.calls_at(line)
        if context.source(call) == "torch.cuda.is_available()")


# How a file may name torch's DataParallel: the import that binds the first word must be torch's.
_DATA_PARALLEL = {"torch.nn.DataParallel": "", "torch.nn.parallel.DataParallel": "",
                  "nn.DataParallel": "nn", "nn.parallel.DataParallel": "nn", "DataParallel": "DataParallel"}
# Modules whose `log` is arithmetic, not a log line.
_MATH_MODULES = frozenset({"math", "cmath", "np", "numpy", "torch", "jnp", "scipy"})


def _count_gates_data_parallel(context: FileContext, line: int) -> bool:
    """``if torch.cuda.device_count() > 1: model = nn.DataParallel(model)``, directly or through a
    name the function reads nowhere else (but as an argument of a log call): the count decides only
    whether DataParallel spreads the model over several CUDA GPUs.  With one device, or where CUDA is
    absent, the same module runs on the device it was given; only a host with several other
    accelerators (DataParallel takes XPUs too) gives up the split: slower, with the same results."""
    counts = [call for call in context.calls_at(line) if context.source(call) == "torch.cuda.device_count()"]
    if not counts or any(isinstance(context.parents.get(id(call)), ast.NamedExpr) for call in counts):
        return False  # `if (n := torch.cuda.device_count()) > 1:` binds a name read elsewhere
    if all(_gate_of_data_parallel(context, functools.partial(operator.is_, call)) for call in counts):
        return True
    stored = _stored_count(context, line)
    if stored is None:
        return False
    name = stored.targets[0].id  # type: ignore[attr-defined]
    function = context.innermost_function(line)
    holder: ast.FunctionDef | ast.AsyncFunctionDef | ast.Module = function if function is not None else context.tree
    if function is not None and any(isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names
                                    for n in walk_nodes(function)):
        return False  # read by other functions too
    in_scope = {id(n) for s in holder.body for n in walk_nodes(s)}
    named = [n for n in walk_nodes(holder) if isinstance(n, ast.Name) and n.id == name]
    if any(isinstance(n.ctx, ast.Store) and n is not stored.targets[0] for n in named):
        return False
    reads = [n for n in named if isinstance(n.ctx, ast.Load)]
    def is_name(node: ast.expr) -> bool:
        return isinstance(node, ast.Name) and node.id == name
    gated = _gate_of_data_parallel(context, is_name, in_scope)
    shown = {id(argument) for n in walk_nodes(holder)
             if isinstance(n, ast.Call) and _is_log_call(n) for argument in _shown_arguments(n)}
    tested = {id(n) for statement in context.ifs if id(statement) in in_scope
              and _is_data_parallel_gate(context, statement, is_name)
              for n in walk_nodes(statement)}  # the test, and the wrap: `device_ids=list(range(n))`
    return bool(reads) and gated and all(id(n) in shown or id(n) in tested for n in reads)


def _is_log_call(call: ast.Call) -> bool:
    """``print(...)``, ``logger.info(...)``, ``LOG.warning(...)``: not ``math.log(...)``."""
    if isinstance(call.func, ast.Name):
        return call.func.id == "print"
    return (isinstance(call.func, ast.Attribute) and bool(_DISPLAY_CALL.fullmatch(call.func.attr))
            and not (isinstance(call.func.value, ast.Name) and call.func.value.id in _MATH_MODULES))


def _shown_arguments(call: ast.Call) -> Iterator[ast.expr]:
    """The arguments a log call only turns into text: a name given as it is, or in an f-string."""
    for argument in [*call.args, *(keyword.value for keyword in call.keywords)]:
        if isinstance(argument, ast.JoinedStr):
            yield from (part.value for part in argument.values if isinstance(part, ast.FormattedValue))
        else:
            yield argument


def _gate_of_data_parallel(context: FileContext, is_count: Callable[[ast.expr], bool],
                           in_scope: set[int] | None = None) -> bool:
    """Some ``if`` whose test holds the count is a DataParallel gate, and every one that holds it is."""
    holding = [statement for statement in context.ifs
               if (in_scope is None or id(statement) in in_scope)
               and any(isinstance(n, ast.expr) and is_count(n) for n in walk_nodes(statement.test))]
    return bool(holding) and all(_is_data_parallel_gate(context, statement, is_count) for statement in holding)


def _is_data_parallel_gate(context: FileContext, statement: ast.If, is_count: Callable[[ast.expr], bool]) -> bool:
    """The test is false at 0 and at 1 device, there is no ``else``, and the body only rewraps a
    module in torch's DataParallel (``model = nn.DataParallel(model)``, at least once) and logs:
    no return, so the code after it runs either way."""
    if statement.orelse or not (fails_with(statement.test, is_count, 0) and fails_with(statement.test, is_count, 1)):
        return False
    wraps = 0
    for inner in statement.body:
        value = inner.value if isinstance(inner, (ast.Assign, ast.Expr)) else None
        if not isinstance(value, ast.Call):
            return False
        if (isinstance(inner, ast.Assign) and len(inner.targets) == 1 and value.args
                and context.source(inner.targets[0]) == context.source(value.args[0])
                and _torch_data_parallel(context, context.source(value.func))):
            wraps += 1
        elif not (isinstance(inner, ast.Expr) and _is_log_call(value)):
            return False
    return wraps > 0


def _torch_data_parallel(context: FileContext, callee: str) -> bool:
    """``nn.DataParallel`` where ``nn`` is torch's, ``DataParallel`` imported from torch: not
    PyG's ``torch_geometric.nn.DataParallel``, which takes lists of graphs."""
    bound = _DATA_PARALLEL.get(callee)
    if bound is None:
        return False
    if not bound:
        return True
    for statement in context.statements:
        if isinstance(statement, ast.Import):
            if any(alias.asname == bound and alias.name == "torch.nn" for alias in statement.names):
                return True
        elif isinstance(statement, ast.ImportFrom) and any((alias.asname or alias.name) == bound for alias in statement.names):
            return (statement.module, bound) in {("torch", "nn"), ("torch.nn", "DataParallel"),
                                                ("torch.nn.parallel", "DataParallel")} \
                and all(alias.asname in (None, bound) for alias in statement.names if alias.name == bound)
    return False


_CPU_ASSIGNED = re.compile(r"=\s*(\w+\.)?(device\()?['\"]cpu['\"]")


def _falls_back_to_cpu(context: FileContext, line: int) -> bool:
    """``device = "cuda"`` in a function or class that later does
    ``if not torch.cuda.is_available() ...: device = torch.device("cpu")``."""
    for scope in context.enclosing(line):
        end = scope.end_lineno or scope.lineno
        for statement in context.ifs:
            if (line <= statement.lineno <= end and "is_available" in context.source(statement.test)
                    and any(_CPU_ASSIGNED.search(context.source(s)) for s in statement.body)):
                return True
    return False


def _under_cuda_flag_expression(context: FileContext, line: int) -> bool:
    """``result.cuda() if self.use_cuda else result``."""
    for node in context.expressions_at(line):
        if _CUDA_FLAG.fullmatch(last_name(node.test)) and node.body.lineno == line:
            return True
    return False


# What a probe returns for "not here": `return False`, `return {}`, `return 0`, `return None`.
_NOTHING = (False, None, 0, "")


def _returns_nothing(statement: ast.stmt) -> bool:
    value = statement.value if isinstance(statement, ast.Return) else None
    if value is None:
        return False  # a bare `return` ends a procedure: the work it skips may be the feature itself
    return ((isinstance(value, ast.Constant) and value.value in _NOTHING and value.value is not True)
            or (isinstance(value, (ast.Dict, ast.List, ast.Tuple)) and not getattr(value, "keys", None)
                and not getattr(value, "elts", None)))


def _returns_unavailable(context: FileContext, line: int) -> bool:
    """``if not torch.cuda.is_available(): return False`` (or ``{}``, ``0``, ``None``)."""
    return any(statement.lineno == line and isinstance(statement.test, ast.UnaryOp)
               and isinstance(statement.test.op, ast.Not) and not statement.orelse
               and len(statement.body) == 1 and _returns_nothing(statement.body[0]) for statement in context.ifs)


def _probe_says_unavailable(context: FileContext, line: int) -> bool:
    """An early "not available" return (see above) in a function that returns something else
    further on: the function is itself the availability probe, and where CUDA is absent it
    answers "not here", which its callers act on.  Needs the whole file's context."""
    function = context.innermost_function(line)
    if function is None or not _returns_unavailable(context, line):
        return False
    later_returns = [n for n in ast.walk(function) if isinstance(n, ast.Return) and n.lineno > line]
    return any(n.value is not None and not _returns_nothing(n) for n in later_returns)


def _alternative_import(context: FileContext, line: int) -> bool:
    """``try: from triton.language.extra.libdevice import rsqrt`` / ``except ImportError: from
    triton.language.extra.cuda.libdevice import rsqrt``: the same names from the same package,
    bound again for another version of it; the lock-in is reported at the first import."""
    imports = [s for s in context.statements if isinstance(s, ast.ImportFrom) and s.module and s.level == 0]
    here = next((s for s in imports if s.lineno == line), None)
    if here is None or here.module is None:
        return False
    package, names = here.module.split(".")[0], {a.asname or a.name for a in here.names}
    return any(other.lineno < line and other.module and other.module.split(".")[0] == package
               and names <= {a.asname or a.name for a in other.names} for other in imports)


# A call made for its checks or messages: `check_nvlink_connectivity(fabric)`, `warn_if_slow()`.
# `logger.warning("resuming without the CUDA RNG state")` too.
_CHECK_CALL = re.compile(r"(check|verify|validate|warn|print|log)(_\w*)?|warning|info|debug")


def _guards_only_a_check(context: FileContext, line: int) -> bool:
    """``if torch.cuda.is_available() and devices > 1: check_nvlink_connectivity(fabric)``: the
    guarded code only inspects and reports; where CUDA is absent it is rightly skipped."""
    for statement in context.ifs:
        if statement.lineno != line or statement.orelse:
            continue
        calls = [s.value for s in statement.body if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)]
        return len(calls) == len(statement.body) and all(
            _CHECK_CALL.fullmatch(last_name(c.func))
            for c in calls)
    return False


def _after_accelerator_detection(context: FileContext, line: int) -> bool:
    """``if torch.accelerator.is_available(): ... elif torch.cuda.is_available(): ...``: the CUDA
    check runs only where the generic detection found nothing (or torch predates it)."""
    return any(len(statement.orelse) == 1 and isinstance(statement.orelse[0], ast.If)
               and statement.orelse[0].lineno == line and "torch.accelerator" in context.source(statement.test)
               for statement in context.ifs)


def _only_in_an_error_message(context: FileContext, line: int) -> bool:
    """``major = torch.cuda.get_device_capability()[0] if torch.cuda.is_available() else 0``
    read only by the message of a ``raise``: it describes the failure, it chooses nothing."""
    scopes = context.enclosing(line)
    if not scopes or not isinstance(scopes[-1], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    function = scopes[-1]
    target = next((s.targets[0].id for s in context.statements
                   if isinstance(s, ast.Assign) and s.lineno <= line <= (s.end_lineno or s.lineno)
                   and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
                   and isinstance(s.value, ast.IfExp)), None)
    if target is None:
        return False
    in_raise = {id(n) for r in ast.walk(function) if isinstance(r, ast.Raise) for n in ast.walk(r)}
    reads = [n for n in ast.walk(function) if isinstance(n, ast.Name) and n.id == target
             and isinstance(n.ctx, ast.Load)]
    return bool(reads) and all(id(n) in in_raise for n in reads)


# A route taken only for CUDA tensors: `if W.is_cuda:`, `if "cuda" in w.device.type:`.
_CUDA_TENSOR_ROUTE = re.compile(r"""^(?!not\b)[\w.()\[\]]+\.is_cuda\b|['"]cuda['"]\s+in\s+[\w.]+\.device|"""
                                r"""\.device\.type\s*==\s*['"]cuda['"]""")
# `if not logits.is_cuda or ...: return reference(...)`: what follows runs only for CUDA tensors.
_NOT_CUDA_TENSOR = re.compile(r"""(^|\bor\s+)not\s+[\w.]+\.is_cuda\b|\.device\.type\s*!=\s*['"]cuda['"]""")


def _unit(context: FileContext, line: int) -> tuple[str, _Scope] | None:
    """The private function or class whose body holds the line, by the name the file reaches it by
    (a method counts as its class; ``Mixer.fast_forward = patched_fast_forward`` names it
    ``fast_forward``)."""
    scopes = context.enclosing(line)
    for scope in reversed(scopes):
        if isinstance(scope, ast.ClassDef) or not any(isinstance(s, ast.ClassDef) for s in scopes):
            break
    else:
        return None
    if scope.name.startswith("_"):
        return scope.name, scope
    # read from the text: the statement may hold no trigger word, and then it is not parsed
    assigned = re.search(rf"=\s*{re.escape(scope.name)}\s*$", context.text, re.MULTILINE)  # literal first: fast
    aliases = re.findall(rf"^[ \t]*[\w.]+\.(\w+)\s*=\s*{re.escape(scope.name)}\s*$", context.text,
                         re.MULTILINE) if assigned else []
    if len(aliases) == 1:
        return aliases[0], scope
    # a function defined inside another is local to it: as private as a leading underscore
    nested = any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) for s in scopes[:scopes.index(scope)])
    return (scope.name, scope) if nested and not aliases else None


def _on_a_cuda_route(context: FileContext, line: int) -> bool:
    """The line is in the body of an ``if`` taken only for CUDA tensors, or after an early
    return for non-CUDA ones in its function."""
    for statement in context.ifs:
        test = context.source(statement.test)
        if _CUDA_TENSOR_ROUTE.search(test) and statement.body[0].lineno <= line <= (statement.body[-1].end_lineno or 0):
            return True
        if (_NOT_CUDA_TENSOR.search(test) and (statement.end_lineno or 0) < line and statement.body
                and isinstance(statement.body[-1], (ast.Return, ast.Raise))):
            functions = [s for s in context.enclosing(line) if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
            if functions and functions[-1].lineno < statement.lineno <= (functions[-1].end_lineno or 0):
                return True
    return False


def _whole(text: str, pruned: FileContext) -> FileContext:
    """The context of the whole file: the scanner parses only the statements with trigger words,
    and a function's callers may have none."""
    try:
        return FileContext(ast.parse(text), text)
    except (SyntaxError, ValueError):
        return pruned


def _reached_only_for_cuda_tensors(context: FileContext, line: int, depth: int = 0) -> bool:
    """``_dora_kernel`` (or the method ``cuda_kernels_forward``) used in this file only where the
    tensors are on CUDA, directly or through private helpers: elsewhere the file's other path runs."""
    unit = _unit(context, line) if depth < 4 else None
    if unit is None:
        return False
    name, scope = unit
    uses = [n for n in context.loads().get(name, ())
            if not _first_line(scope) <= n.lineno <= (scope.end_lineno or 0)]
    return bool(uses) and all(_on_a_cuda_route(context, n.lineno)
                              or device_guard.guarded_by_device_test(context, n.lineno, context.column_of(n)) is not None
                              or _reached_only_for_cuda_tensors(context, n.lineno, depth + 1) for n in uses)


_TYPING_GENERICS = frozenset({"Tuple", "List", "Dict", "Optional", "Union", "Sequence", "Callable", "Type",
                              "tuple", "list", "dict", "type"})


def _type_alias(context: FileContext, line: int) -> bool:
    """``Events = Tuple[torch.cuda.Event, torch.cuda.Event]``: a name for a type; it creates
    nothing and runs nothing on a device."""
    for statement in context.statements:
        if isinstance(statement, ast.Assign) and statement.lineno == line:
            value = statement.value
            generic = value.value if isinstance(value, ast.Subscript) else None
            name = last_name(generic)
            return name in _TYPING_GENERICS and not any(isinstance(n, ast.Call) for n in ast.walk(value))
    return False


def _cupy_branch(context: FileContext, line: int) -> bool:
    """``elif isinstance(obj, cupy.ndarray): devtype = "cuda"``: a CuPy array is on a CUDA device;
    the string names where it is, it does not choose a device."""
    return any(statement.body[0].lineno <= line <= (statement.body[-1].end_lineno or 0)
               and re.search(r"\bisinstance\(.*\bcupy\.", context.source(statement.test))
               for statement in context.ifs)


_DEVICE_TYPES = frozenset({"cpu", "mps", "xpu", "xla", "tpu", "npu", "hpu", "mlu", "musa", "neuron"})


def _capability_table_entry(site: _Site) -> str | None:
    """``BackendInfo(device=["cuda"], ...)`` among at least three records of one class in the file
    whose ``device=`` lists name device types, one of them CUDA with others (``["cuda", "cpu"]``),
    and read by membership (``if device not in backend.device``): a table of which devices support
    each entry, not a device to run on.  Only bare types count: ``["cuda:0"]`` names a device.
    The class's text, else None."""
    if not site.finding.detail.endswith(('"cuda" in a list', '"cuda" in a tuple')):
        return None
    # The list's call and keyword, from the statement the reduced parse keeps; the file's text must
    # then name the class three times and read the field by membership before the whole file is read.
    entry = next(((call, keyword) for call in walk_nodes(site.context.tree) if isinstance(call, ast.Call)
                  for keyword in call.keywords if keyword.arg is not None
                  and isinstance(keyword.value, (ast.List, ast.Tuple)) and any(
                      e.lineno == site.line and site.context.column_of(e) == site.finding.column for e in keyword.value.elts)),
                 None)
    if entry is None:
        return None
    callee, name = site.context.source(entry[0].func), entry[1].arg
    last = callee.rsplit(".", 1)[-1]
    text = site.file.text
    if not last[:1].isupper() or text.count(f"{last}(") < 3 or not re.search(
            rf"\bin\s+(?:\w+\.)*{re.escape(str(name))}\b", text):
        return None
    context = site.file.whole()
    values = [keyword.value for call in walk_nodes(context.tree) if isinstance(call, ast.Call)
              and context.source(call.func) == callee for keyword in call.keywords
              if keyword.arg == name and isinstance(keyword.value, (ast.List, ast.Tuple, ast.Set))]
    kinds = [{string_value(e) for e in value.elts} for value in values]
    mixed = any("cuda" in kind and kind & _DEVICE_TYPES for kind in kinds)  # one entry supports CUDA and others
    if len(values) < 3 or not mixed:
        return None
    return f"{callee}({name}=...)" if _read_only_by_membership(context, str(name)) else None


def _read_only_by_membership(context: FileContext, field: str) -> bool:
    """``if device not in backend.device``: the file reads ``x.<field>`` at least once as the
    right side of ``in``/``not in``, and never indexes it, iterates over it or hands it to a
    call (``model.to(stage.device[0])``, ``for d in worker.devices``), which would place work."""
    parents = {id(child): node for node in walk_nodes(context.tree) for child in ast.iter_child_nodes(node)}
    tested = False
    for node in walk_nodes(context.tree):
        if not (isinstance(node, ast.Attribute) and node.attr == field and isinstance(node.ctx, ast.Load)):
            continue
        parent = parents.get(id(node))
        if isinstance(parent, ast.Compare) and node in parent.comparators and isinstance(
                parent.ops[parent.comparators.index(node)], (ast.In, ast.NotIn)):
            tested = True
        elif isinstance(parent, ast.Subscript) and parent.value is node or isinstance(
                parent, (ast.For, ast.comprehension)) and parent.iter is node or isinstance(
                parent, (ast.Call, ast.keyword, ast.Starred)) and not (isinstance(parent, ast.Call) and parent.func is node):
            return False
    return tested


def _in_nvidia_library_code(context: FileContext, line: int) -> bool:
    scopes = context.enclosing(line)
    return bool(scopes) and bool(_NVIDIA_ONLY.search(context.source(scopes[-1])))


def _named_for_nvidia_feature(context: FileContext, line: int) -> bool:
    return any(_NVIDIA_NAMED.search(scope.name) for scope in context.enclosing(line))


def _in_report_function(context: FileContext, line: int) -> bool:
    return any(_REPORT_FUNCTION.fullmatch(scope.name) or (_REPORT_COMMAND.fullmatch(scope.name) and _is_command(scope))
               for scope in context.enclosing(line))


def _is_command(scope: ast.AST) -> bool:
    """Decorated as a command of a click or typer CLI: ``@main.command()``, ``@app.command("info")``."""
    return any(last_name(decorator.func if isinstance(decorator, ast.Call) else decorator) == "command"
               for decorator in getattr(scope, "decorator_list", ()))


def _never_runs(context: FileContext, line: int) -> bool:
    """``if False:  # torch.cuda.is_available():``: a branch switched off by a constant."""
    return any(isinstance(statement.test, ast.Constant) and not statement.test.value
               and statement.body[0].lineno <= line <= (statement.body[-1].end_lineno or 0)
               for statement in context.ifs)


def _cuda_guard_decorator(context: FileContext, line: int) -> str | None:
    """``@check_cuda_device(0.0) def gpu_memory_usage(...)`` where ``check_cuda_device`` is defined
    in this file and its wrapper returns, without calling the function, where CUDA is absent
    (``if ... or not torch.cuda.is_available(): return default``).  Needs the whole file."""
    for function in reversed(context.enclosing(line)):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for decorator in function.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if isinstance(target, ast.Name) and _returns_where_cuda_absent(context, target.id):
                return target.id
    return None


_TORCH_LIBRARY = re.compile(r"\btorch\.library\b|\bfrom\s+torch\s+import\s+(?:\([^)]*|[\w \t,]*)\blibrary\b")


def _cuda_kernel_of_an_op(context: FileContext, line: int, column: int = 0) -> str | None:
    """``@torch.library.custom_op("lib::op", mutates_args=(), device_types="cuda") def op(x)``
    (or ``@op.register_kernel("cuda")``, ``@torch.library.impl(lib, "op", "CUDA")``): the
    dispatcher calls the function only for CUDA tensors.  A call of the op on other tensors fails
    for want of a kernel, at the caller; the body's CUDA calls never run there."""
    for function in reversed(context.enclosing(line)):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) or \
                (line, column) < (function.body[0].lineno, context.column_of(function.body[0])):
            continue  # the decorator or the signature (defaults run at definition): as it is
        registrations = [kernel_devices(d) for d in function.decorator_list]
        if any(isinstance(d, ast.Call) and last_name(d.func).startswith(("register_", "impl"))
               and r is None for d, r in zip(function.decorator_list, registrations)):
            return None  # also a fake, autograd or other registration: runs on any device
        if any(not _from_torch_library(context, d) for d, r in zip(function.decorator_list, registrations)
               if r is not None):
            continue  # a registry or a decorator of the same name that is not torch.library's
        registered = [r for r in registrations if r is not None]
        if not registered or not all(r and all(device == "cuda" for device in r) for r in registered):
            continue
        returns_itself = any(isinstance(d, ast.Call) and last_name(d.func) != "custom_op"
                             for d in function.decorator_list)
        if returns_itself and function.name in context.bare_names:
            return None  # the function itself is called or registered again: not only by the dispatcher
        return function.name
    return None


def _from_torch_library(context: FileContext, decorator: ast.expr) -> bool:
    """``torch.library.X``/``library.X``; a bare ``X`` imported from torch.library; ``op.register_kernel``
    on an ``op`` the file defines with torch.library's custom_op."""
    if not isinstance(decorator, ast.Call):
        return False
    func = decorator.func
    if not isinstance(func, (ast.Name, ast.Attribute)):
        return False
    if isinstance(func, ast.Name):
        return func.id in context.torch_library_imports
    receiver = ast.unparse(func.value)
    if re.fullmatch(r"(?:torch\.)?library", receiver):
        return True
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == receiver
               and any(isinstance(d, ast.Call) and last_name(d.func) == "custom_op" and _from_torch_library(context, d)
                       for d in n.decorator_list) for n in context.scopes)


def _returns_where_cuda_absent(context: FileContext, name: str) -> bool:
    definition = next((s for s in context.tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                       and s.name == name), None)
    if definition is None:
        return False
    for node in ast.walk(definition):
        if not (isinstance(node, ast.If) and len(node.body) == 1 and isinstance(node.body[0], ast.Return)):
            continue
        test = node.test
        conditions = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) else [test]
        if any(ast.unparse(c) == "not torch.cuda.is_available()" for c in conditions):
            return True
    return False


# A JIT build of CUDA sources: `load(sources=["ops.cu"], extra_cuda_cflags=[...])`, `CUDAExtension(`.
_BUILDS_CUDA = re.compile(r"""extra_cuda_cflags|\.cu['"]|\bCUDAExtension\(""")


def _for_a_cuda_build(context: FileContext, line: int) -> bool:
    """``major, minor = torch.cuda.get_device_capability()`` in a function that JIT-builds CUDA
    sources for that arch, or in a helper read only by such functions in the file (the
    ``-gencode`` flag): the build is the lock-in, and it is reported at its ``load()``.
    Needs the whole file."""
    functions = [s for s in context.enclosing(line) if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if not functions:
        return False
    function = functions[-1]
    if _BUILDS_CUDA.search(context.source(function)):
        return True
    uses = [n for n in context.loads().get(function.name, ())
            if not _first_line(function) <= n.lineno <= (function.end_lineno or 0)]
    callers = [[s for s in context.enclosing(n.lineno) if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
               for n in uses]
    return bool(uses) and all(c and _BUILDS_CUDA.search(context.source(c[-1])) for c in callers)


def _parents_at(context: FileContext, line: int) -> dict[int, ast.AST]:
    """The parent of every node in the statements that span the line."""
    parents: dict[int, ast.AST] = {}
    for statement in context.statements:
        if statement.lineno <= line <= (statement.end_lineno or statement.lineno):
            for node in _header(statement):
                for child in ast.iter_child_nodes(node):
                    parents.setdefault(id(child), node)
    return parents


def _over_cuda_devices(context: FileContext, comprehension: ast.expr) -> bool:
    """``[... for i in range(torch.cuda.device_count())]``: no element where CUDA is absent."""
    return isinstance(comprehension, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)) and any(
        isinstance(g.iter, ast.Call) and isinstance(g.iter.func, ast.Name) and g.iter.func.id == "range"
        and len(g.iter.args) == 1 and context.source(g.iter.args[0]) == "torch.cuda.device_count()"
        for g in comprehension.generators)


def _read_safely_when_empty(read: ast.Name, parents: dict[int, ast.AST]) -> bool:
    """``names + ["cpu"]``: a read whose result is never empty.  Not ``len(names)`` (a divisor),
    a loop over it (what it leaves unset), ``max(names)`` or ``names[0]``."""
    parent = parents.get(id(read))
    if isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Add):
        other = parent.right if parent.left is read else parent.left
        return isinstance(other, (ast.List, ast.Tuple)) and bool(other.elts)
    return False


def _names_of_no_device(context: FileContext, line: int) -> bool:
    """``gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]`` read
    only as ``gpus + ["cpu"]`` in its function: where CUDA is absent no property is asked for, and
    the empty list breaks nothing."""
    function = context.innermost_function(line)
    if function is None:
        return False
    assigned = [s for s in ast.walk(function) if isinstance(s, ast.Assign) and len(s.targets) == 1
                and isinstance(s.targets[0], ast.Name) and s.lineno <= line <= (s.end_lineno or s.lineno)]
    if len(assigned) != 1 or not _over_cuda_devices(context, assigned[0].value):
        return False
    name = assigned[0].targets[0].id  # type: ignore[attr-defined]
    parents = context.parents
    reads = [n for n in ast.walk(function) if isinstance(n, ast.Name) and n.id == name]
    loads = [n for n in reads if isinstance(n.ctx, ast.Load)]
    return len(reads) == len(loads) + 1 and bool(loads) and all(_read_safely_when_empty(n, parents) for n in loads)


# A constant that is itself a device name: `f"{'cuda' if ok else 'cpu'}:0"` chooses a device.
_DEVICE_WORD = re.compile(r"(cuda|cpu|gpu|mps|xla|xpu)(:\d*)?", re.IGNORECASE)

# Calls whose only effect is text for a person: logs, prints, progress-bar captions.
_DISPLAY_CALL = re.compile(r"(print|log|warn|info|debug|warning|error|set_postfix\w*|set_description\w*)")
_DISPLAY_WORD = re.compile(r"\b\w*(print|log|warn|info|debug|error|set_postfix|set_description)\w*\(")


# CUDA queries that answer without raising where CUDA is absent.
_QUIET_QUERIES = frozenset({"torch.cuda.is_available", "torch.cuda.is_initialized", "torch.cuda.device_count"})


def _only_in_text(context: FileContext, line: int, rule: str) -> bool:
    """``f"cuda.available={torch.cuda.is_available()}"``, ``logger.info("GPUs: %s",
    torch.cuda.device_count())``: every CUDA query on the line only becomes text, in an
    f-string that names no device or as an argument of a log or print call made for itself.
    A device-management finding needs every torch.cuda call on the line to be such a query
    (``torch.cuda.current_device()`` raises while the text is built)."""
    parents = _parents_at(context, line)
    cuda_calls = [c for c in context.calls_at(line) if context.source(c.func).startswith("torch.cuda.")]
    queries = [c for c in cuda_calls if context.source(c.func) in _QUIET_QUERIES]
    if not queries or (rule == CUDA_DEVICE_MANAGEMENT and len(queries) < len(cuda_calls)):
        return False

    def becomes_text(node: ast.AST) -> bool:
        parent = parents.get(id(node))
        while parent is not None:
            if isinstance(parent, ast.JoinedStr):
                compared = {id(c) for n in ast.walk(parent) if isinstance(n, ast.Compare) for c in ast.walk(n)}
                return not any(isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in compared
                               and _DEVICE_WORD.fullmatch(n.value.strip()) for n in ast.walk(parent))
            if isinstance(parent, ast.Call) and parent is not node and _DISPLAY_CALL.fullmatch(last_name(parent.func)):
                return isinstance(parents.get(id(parent)), ast.Expr)
            if isinstance(parent, ast.stmt):
                return False
            parent = parents.get(id(parent))
        return False
    return all(becomes_text(q) for q in queries)


def _query_stored_for_text(context: FileContext, line: int) -> str | None:
    """``num_gpus = torch.cuda.device_count()`` whose every read in the file is inside a log
    or print call made for itself (``print(" > Number of GPUs: ", num_gpus)``).  Needs the
    whole file."""
    stored = next((s for s in context.statements if isinstance(s, ast.Assign) and s.lineno == line
                   and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) and isinstance(s.value, ast.Call)
                   and not s.value.args and context.source(s.value.func) in _QUIET_QUERIES), None)
    if stored is None:
        return None
    name = stored.targets[0].id  # type: ignore[attr-defined]
    reads = context.loads().get(name, [])

    def shown(node: ast.AST) -> bool:
        parents = _parents_at(context, node.lineno)  # type: ignore[attr-defined]
        parent = parents.get(id(node))
        while parent is not None and not isinstance(parent, ast.stmt):
            if isinstance(parent, ast.Call) and _DISPLAY_CALL.fullmatch(last_name(parent.func)):
                return isinstance(parents.get(id(parent)), ast.Expr)
            parent = parents.get(id(parent))
        return False
    return name if reads and all(shown(n) for n in reads) else None


def _flag_read_only_for_display(context: FileContext, line: int) -> str | None:
    """``self.gpu_available = torch.cuda.is_available() and ...`` whose every read in the file
    is the test of an ``if`` that only logs or updates a progress bar.  Needs the whole file."""
    stored = next((s for s in context.statements if isinstance(s, ast.Assign) and s.lineno == line
                   and len(s.targets) == 1 and isinstance(s.targets[0], (ast.Name, ast.Attribute))), None)
    if stored is None:
        return None
    target = stored.targets[0]
    name = target.id if isinstance(target, ast.Name) else target.attr  # type: ignore[attr-defined]
    reads = context.loads().get(name, [])
    if not reads:
        return None
    for read in reads:
        guard = next((s for s in context.ifs if s.test.lineno <= read.lineno <= (s.test.end_lineno or 0)), None)
        if guard is None or guard.orelse or not all(
                isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and _DISPLAY_CALL.fullmatch(last_name(s.value.func))
                for s in guard.body):
            return None
    return name


def _seeds_what_manual_seed_seeded(context: FileContext, line: int) -> bool:
    """``torch.manual_seed(seed)`` then ``if torch.cuda.is_available():
    torch.cuda.manual_seed_all(seed)``: torch.manual_seed already seeds every device."""
    guard = next((s for s in context.ifs if s.lineno == line and not s.orelse), None)
    if guard is None or not all(
            isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
            and re.fullmatch(r"torch\.cuda\.manual_seed(_all)?", context.source(s.value.func)) for s in guard.body):
        return False
    scopes = [s for s in context.enclosing(line) if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    start = scopes[-1].lineno if scopes else 1
    return bool(re.search(r"(?<![\w.])torch\.manual_seed\(", "".join(context.lines[start - 1:line - 1])))


def _stored_count(context: FileContext, line: int) -> ast.Assign | None:
    """``n_gpu = torch.cuda.device_count()`` on ``line``: a plain name bound to the count."""
    return next((s for s in context.statements if isinstance(s, ast.Assign) and s.lineno == line
                 and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
                 and context.source(s.value) == "torch.cuda.device_count()"), None)


def _count_shares_cpu_workers(context: FileContext, line: int) -> bool:
    """``nd = torch.cuda.device_count()`` read only to share the CPUs among data-loader
    workers (``os.cpu_count() // max(nd, 1)``): the loader's result is the same."""
    stored = _stored_count(context, line)
    if stored is None:
        return False
    name = stored.targets[0].id  # type: ignore[attr-defined]
    scopes = [s for s in context.enclosing(line) if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    end = (scopes[-1].end_lineno or line) if scopes else len(context.lines)
    reading = [text for text in context.lines[line:end] if re.search(rf"(?<![\w.]){re.escape(name)}\b", text)]
    return bool(reading) and all("cpu_count(" in text and not re.search(rf"(?<![\w.]){re.escape(name)}\s*=(?!=)", text)
                                 for text in reading)


def _asserts_cuda(context: FileContext, test: ast.expr, ranks: frozenset[str] = frozenset()) -> bool:
    """``torch.cuda.is_available()``, ``torch.cuda.device_count() > rank``, ``device.type == 'cuda'``:
    a test that fails where CUDA is absent.  One that only counts or asks for CUDA must fail with
    the answers there (``args.gpus <= torch.cuda.device_count()`` holds for 0 GPUs asked)."""
    if "torch.cuda." in context.source(test):
        queries = {id(n): answer for n in walk_nodes(test)
                   if isinstance(n, ast.expr) and (answer := _query_answer(n)) is not None}
        calls = [n for n in walk_nodes(test) if isinstance(n, ast.Call) and context.source(n.func).startswith("torch.cuda.")]
        if not calls and isinstance(test, ast.Attribute):
            return False  # `assert torch.cuda.is_available`: a function, always true
        if calls and all(id(c) in queries for c in calls):
            return fails_with(test, _one_of(set(queries)), 0, ranks)  # 0 and False compare and test alike
        return True
    return (
        isinstance(test, ast.Compare) and isinstance(test.left, ast.Attribute) and test.left.attr == "type"
        and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq) and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "cuda")


# What a stored CUDA query holds where CUDA is absent.
_ANSWER_WITHOUT_CUDA = {"device_count": 0, "is_available": False}


def _query_answer(value: ast.expr) -> int | bool | None:
    """What ``torch.cuda.device_count()`` or ``torch.cuda.is_available()`` answers where CUDA is absent."""
    if (isinstance(value, ast.Call) and not value.args and not value.keywords
            and isinstance(value.func, ast.Attribute) and value.func.attr in _ANSWER_WITHOUT_CUDA
            and isinstance(value.func.value, ast.Attribute) and value.func.value.attr == "cuda"
            and isinstance(value.func.value.value, ast.Name) and value.func.value.value.id == "torch"):
        return _ANSWER_WITHOUT_CUDA[value.func.attr]
    return None


def _forget_rebound(statement: ast.stmt, stored: dict[str, tuple[int, int | bool]]) -> None:
    """Forget the stored counts ``statement`` binds again (in an ``if``, a loop target, ``+=``, a
    tuple) or tests (``if n_gpus == 0: return run_cpu()``: what follows may never see 0)."""
    compound = isinstance(statement, (ast.If, ast.While, ast.For, ast.AsyncFor, ast.With, ast.AsyncWith,
                                      ast.Try, ast.Match))
    for node in walk_nodes(statement):
        if isinstance(node, ast.Name) and node.id in stored and (
                compound or isinstance(node.ctx, (ast.Store, ast.Del))):
            stored.pop(node.id, None)


def _names(name: str) -> Callable[[ast.expr], bool]:
    def test(node: ast.expr) -> bool:
        return isinstance(node, ast.Name) and node.id == name
    return test


def _one_of(nodes: set[int]) -> Callable[[ast.expr], bool]:
    def test(node: ast.expr) -> bool:
        return id(node) in nodes
    return test


@dataclasses.dataclass(frozen=True)
class _CudaAsserts:
    """A file's asserts on CUDA, read once: the lines each stops where CUDA is absent (the rest
    of its block), and the stored counts each requires (by the line that stores them)."""
    stopped: tuple[tuple[int, int], ...]
    requiring: dict[int, int]  # line of `n = torch.cuda.device_count()` -> line of its assert


def _cuda_asserts(context: FileContext) -> _CudaAsserts:
    """One pass over each block: ``n_gpus = torch.cuda.device_count()`` is remembered until the
    block binds or tests ``n_gpus`` again; an assert that fails with what it holds where CUDA is
    absent (``assert n_gpus >= 2``), or an assert on torch.cuda that fails there, stops the rest."""
    found = getattr(context, "_cuda_asserts", None)
    if found is not None:
        return found
    stopped: list[tuple[int, int]] = []
    requiring: dict[int, int] = {}
    for block in context.blocks():
        first = None
        stored: dict[str, tuple[int, int | bool]] = {}
        for index, statement in enumerate(block):
            if isinstance(statement, ast.Assert):
                ranks = _ranks_at(context, statement.lineno)
                required = next((line for name, (line, answer) in stored.items()
                                 if fails_with(statement.test, _names(name), answer, ranks)), None)
                if required is not None and not _caught(context, statement.lineno):
                    requiring.setdefault(required, statement.lineno)
                if first is None and (required is not None or _asserts_cuda(context, statement.test, ranks)):
                    first = index
                continue
            answer = None
            if (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                    and isinstance(statement.targets[0], ast.Name)):
                answer = _query_answer(statement.value)
            if stored:
                _forget_rebound(statement, stored)
            if answer is not None:
                stored[statement.targets[0].id] = (statement.lineno, answer)  # type: ignore[attr-defined]
        if first is not None and first + 1 < len(block):
            stopped.append((block[first + 1].lineno, block[-1].end_lineno or block[-1].lineno))
    found = _CudaAsserts(tuple(stopped), requiring)
    context._cuda_asserts = found  # type: ignore[attr-defined]
    return found


def _ranks_at(context: FileContext, line: int) -> frozenset[str]:
    """The names known to be at least 0 at ``line``: those an ``if`` around it tests with ``!= -1``,
    ``>= 0`` or ``> -1`` (``if LOCAL_RANK != -1: assert torch.cuda.device_count() > LOCAL_RANK``)."""
    names: set[str] = set()
    for statement in context.ifs:
        if not (statement.body and statement.body[0].lineno <= line <= (statement.body[-1].end_lineno or 0)):
            continue
        tests = statement.test.values if isinstance(statement.test, ast.BoolOp) and isinstance(
            statement.test.op, ast.And) else [statement.test]
        for test in tests:
            if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name)
                    and isinstance(test.ops[0], (ast.NotEq, ast.GtE, ast.Gt))):
                bound = test.comparators[0]
                value = getattr(bound, "value", None)
                if (isinstance(bound, ast.UnaryOp) and isinstance(bound.op, ast.USub) and isinstance(bound.operand, ast.Constant)
                        and isinstance(bound.operand.value, int)):
                    value = -bound.operand.value
                if (isinstance(test.ops[0], ast.NotEq) and value == -1) or (
                        isinstance(test.ops[0], ast.GtE) and value == 0) or (isinstance(test.ops[0], ast.Gt) and value == -1):
                    names.add(test.left.id)
    return frozenset(names)


# `with pytest.raises(AssertionError):`, `with self.assertRaises(...)`, `with contextlib.suppress(...)`
_CATCHING_WITH = re.compile(r"\b(raises|assertRaises\w*|suppress)\(")


def _caught(context: FileContext, line: int) -> bool:
    """A line in the body of a ``try`` whose handlers catch an AssertionError (``except:``,
    ``except Exception``, ``except builtins.AssertionError``) or of a ``with`` that catches
    (``pytest.raises``, ``contextlib.suppress``): a failing assert there does not stop the program."""
    broad = {"AssertionError", "Exception", "BaseException"}
    for statement in context.statements:
        if isinstance(statement, (ast.With, ast.AsyncWith)) and statement.body and (
                statement.body[0].lineno <= line <= (statement.body[-1].end_lineno or 0)) and any(
                _CATCHING_WITH.search(context.source(item.context_expr)) for item in statement.items):
            return True
        if not isinstance(statement, ast.Try) or not statement.body:
            continue
        if not statement.body[0].lineno <= line <= (statement.body[-1].end_lineno or 0):
            continue
        for handler in statement.handlers:
            kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
            if any(k is None or (isinstance(k, (ast.Name, ast.Attribute))
                                 and (k.id if isinstance(k, ast.Name) else k.attr) in broad) for k in kinds):
                return True
    return False


def _after_cuda_assert(context: FileContext, line: int) -> bool:
    """``assert torch.cuda.device_count() > LOCAL_RANK, "insufficient CUDA devices"`` (or an
    assert on a stored query that fails without CUDA) earlier in the same block: where CUDA is
    absent the assert stops the path before the line (the assert is the lock-in, reported at
    its own line).  Needs the whole file."""
    return any(start <= line <= end for start, end in _cuda_asserts(context).stopped)


def _asserted_count(context: FileContext, line: int) -> str | None:
    """``n_gpus = torch.cuda.device_count()`` then ``assert n_gpus >= 2`` in the same block, or
    ``assert rank < torch.cuda.device_count()``, the assert failing with a count of 0 and not
    caught: what stops the program where CUDA is absent.  What the reason says.  Needs the whole file."""
    asserted = _cuda_asserts(context).requiring.get(line)
    if asserted is not None:
        return f"asserted at line {asserted}"
    for statement in context.statements:
        if not (isinstance(statement, ast.Assert) and statement.lineno <= line <= (statement.test.end_lineno or 0)):
            continue
        counts = {id(n) for n in walk_nodes(statement.test) if isinstance(n, ast.Call) and n.lineno == line
                  and _query_answer(n) == 0 and n.func.attr == "device_count"}  # type: ignore[attr-defined]
        if counts and fails_with(statement.test, _one_of(counts), 0, _ranks_at(context, line)) \
                and not _caught(context, line):
            return "asserted"
    return None


def _raised_count(context: FileContext, line: int) -> str | None:
    """``if torch.cuda.device_count() == 0: raise RuntimeError("No CUDA GPUs detected")``, or the
    count stored in a name (``count = torch.cuda.device_count()``) that the next statement naming it
    tests so: where CUDA is absent the program stops with its own error, nothing runs silently (the
    judges call such a raise a guard, not a lock-in, unlike a bare assert: ``_asserted_count``).  Not
    where a handler of the file may catch it (``_raise_not_caught``).  What the reason says.  Needs
    the whole file."""
    for branch in context.ifs:
        if branch.test.lineno <= line <= (branch.test.end_lineno or 0):
            counts = {id(n) for n in walk_nodes(branch.test) if isinstance(n, ast.Call) and n.lineno == line
                      and _query_answer(n) == 0 and n.func.attr == "device_count"}  # type: ignore[attr-defined]
            if counts and _raises_on_zero(branch, _one_of(counts)):
                return _raise_not_caught(context, branch)
    for block, index in _blocks_at(context, line):
        statement = block[index]
        if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name) and _query_answer(statement.value) == 0
                and statement.value.func.attr == "device_count"):  # type: ignore[attr-defined]
            continue
        name = statement.targets[0].id
        position = next((i for i, s in enumerate(block[index + 1:], index + 1)
                         if any(isinstance(n, ast.Name) and n.id == name for n in walk_nodes(s))), None)
        if position is None or any(isinstance(s, _COMPOUND_OR_EXIT) for s in block[index + 1:position]):
            continue  # `if device == "cpu": return 1` before the test: a way out that never sees 0
        test = block[position]
        if isinstance(test, ast.If) and _raises_on_zero(test, _names(name)):
            return _raise_not_caught(context, test)
    return None


_COMPOUND_OR_EXIT = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.TryStar, ast.With, ast.AsyncWith, ast.Match,
                     ast.Return, ast.Raise, ast.Break, ast.Continue)


def _blocks_at(context: FileContext, line: int) -> list[tuple[list[ast.stmt], int]]:
    """Each statement list holding a statement that starts at ``line``, with its index: the blocks
    indexed once per file."""
    index = context.__dict__.get("_blocks_by_line")
    if index is None:
        index = {}
        for block in context.blocks():
            for position, statement in enumerate(block):
                index.setdefault(statement.lineno, []).append((block, position))
        context.__dict__["_blocks_by_line"] = index
    return index.get(line, [])


def _raises_on_zero(statement: ast.If, is_count: Callable[[ast.expr], bool]) -> bool:
    """The ``if`` holds where the count is 0 and its body ends in a ``raise`` of an error, with no
    way out before it."""
    body = statement.body
    return (fails_with(ast.UnaryOp(op=ast.Not(), operand=statement.test), is_count, 0)
            and isinstance(body[-1], ast.Raise) and body[-1].exc is not None
            and not any(isinstance(n, (ast.Return, ast.Break, ast.Continue, ast.Yield, ast.YieldFrom))
                        for s in body for n in walk_nodes(s)))


def _raise_not_caught(context: FileContext, test: ast.If) -> str | None:
    """The reason's line, unless a handler of the file may catch the raise: a ``try`` (or a ``with``
    that may catch) around it, or around a call of its function, of its class (for ``__init__``) or
    of their callers, up to ``_CALLERS_DEEP`` calls up.  Any escape refuses too: a decorated
    function, one named as a value (a registry dict, a callback) or called at import.  A caller in
    another file is not seen."""
    if _in_handled_try(context, test.lineno):
        return None
    function = context.innermost_function(test.lineno)
    if function is None:
        return None  # raised at import: an importer elsewhere may catch it (an optional kernel module)
    first = _callee_names(context, function)
    if first is None:
        return None
    names, seen = first, set[str]()
    for _ in range(_CALLERS_DEEP):
        callers: set[str] = set()
        for name in names - seen:
            seen.add(name)
            for node in context.loads().get(name, ()):
                caller = context.innermost_function(node.lineno)
                if caller is function:
                    continue
                if (caller is None or _in_handled_try(context, node.lineno)
                        or not isinstance(context.parents.get(id(node)), ast.Call)
                        or context.parents[id(node)].func is not node):  # type: ignore[attr-defined]
                    return None
                more = _callee_names(context, caller)
                if more is None:
                    return None
                callers |= more
        names = callers - seen
        if not names:
            return f"line {test.body[-1].lineno}"
    return None


# How many calls up a handler that may catch a raise is looked for.
_CALLERS_DEEP = 4


def _callee_names(context: FileContext, function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str] | None:
    """The names a call of ``function`` spells: its own, and its class's for ``__init__``.  None for
    a decorated function, which escapes (``@fallback_to(1)`` may catch)."""
    if function.decorator_list:
        return None
    owner = next((s for s in reversed(context.enclosing(function.lineno)) if isinstance(s, ast.ClassDef)), None)
    if function.name in ("__init__", "__new__", "__call__", "__post_init__") and owner is not None:
        return {function.name, owner.name}
    return {function.name}


def _in_handled_try(context: FileContext, line: int) -> bool:
    """Inside a ``try`` with handlers, or a ``with`` whose manager may catch: a known catching one
    (``suppress``, ``pytest.raises``) or one the file defines (a ``contextmanager`` may swallow)."""
    spans = context.__dict__.get("_handled_try_spans")
    if spans is None:
        defined = {s.name for s in context.statements if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        spans = []
        for statement in context.statements:
            if isinstance(statement, (ast.Try, ast.TryStar)):
                catches = bool(statement.handlers)
            elif isinstance(statement, (ast.With, ast.AsyncWith)):
                catches = any(_CATCHING_WITH.search(context.source(item.context_expr))
                              or (isinstance(item.context_expr, ast.Call) and last_name(item.context_expr.func) in defined)
                              for item in statement.items)
            else:
                continue
            if catches and statement.body:
                spans.append((statement.body[0].lineno, statement.body[-1].end_lineno or statement.body[-1].lineno))
        context.__dict__["_handled_try_spans"] = spans
    return any(first <= line <= last for first, last in spans)


def _names_a_tensor_type_only(context: FileContext, line: int) -> bool:
    """``Union[torch.LongTensor, torch.cuda.LongTensor]``, ``x.dtype != torch.cuda.HalfTensor``:
    the CUDA tensor type is only named in a type or compared; no tensor is made."""
    parents = _parents_at(context, line)
    types = [n for n in context._expressions_at(line) if isinstance(n, ast.Attribute)
             and re.fullmatch(r"torch\.cuda\.\w+Tensor", context.source(n))]
    if not types:
        return False

    def named_only(node: ast.AST) -> bool:
        parent = parents.get(id(node))
        if isinstance(parent, (ast.Tuple, ast.List)):
            parent = parents.get(id(parent))
        if isinstance(parent, ast.Subscript):
            return parent.value is not node
        return isinstance(parent, ast.Compare)
    return all(named_only(t) for t in types)


def _used_only_after_cuda_assert(context: FileContext, line: int, depth: int = 0) -> str | None:
    """A line of a module-level function that the file uses only after an assert on CUDA in
    the same block (``assert device.type == 'cuda'`` then ``mp.spawn(run_ddp, ...)``), directly
    or through other such functions.  Needs the whole file; uses in other files are not seen."""
    scopes = context.enclosing(line)
    function = scopes[0] if scopes and depth < 4 else None
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    uses = [n for n in context.loads().get(function.name, ())
            if not _first_line(function) <= n.lineno <= (function.end_lineno or 0)]
    if uses and all(_after_cuda_assert(context, n.lineno) or _used_only_after_cuda_assert(context, n.lineno, depth + 1)
                    for n in uses):
        return function.name
    return None


def _if_bodies_holding(context: FileContext, line: int) -> Iterator[ast.If]:
    for statement in context.ifs:
        if statement.body[0].lineno <= line <= (statement.body[-1].end_lineno or 0):
            yield statement


def _innermost_class(context: FileContext, line: int) -> ast.ClassDef | None:
    return next((s for s in reversed(context.enclosing(line)) if isinstance(s, ast.ClassDef)), None)


def _methods(cls: ast.ClassDef) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _conjuncts(test: ast.expr) -> list[ast.expr]:
    """What must all hold for ``test`` to hold: the operands of an ``and``, or the test itself."""
    return test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]


def _flag_tests(context: FileContext, line: int, column: int) -> Iterator[tuple[ast.expr, int]]:
    """The tests a finding runs (or counts) only under, with their lines: those of the ``if``
    bodies holding its line, each operand of their ``and``; and where the finding is in an
    ``and`` test itself (``if self.use_cuda and torch.cuda.is_available():``, ``x.cuda() if
    self.use_cuda and ... else x``), that test's other operands: the result matters only when
    they all hold."""
    for statement in _if_bodies_holding(context, line):
        yield from ((operand, statement.lineno) for operand in _conjuncts(statement.test))
    tests = [(s.test, s.lineno) for s in context.ifs]
    tests += [(e.test, e.lineno) for s in context.statements if s.lineno <= line <= (s.end_lineno or s.lineno)
              for e in _header(s) if isinstance(e, ast.IfExp)]
    for test, start in tests:
        operands = _conjuncts(test)
        if len(operands) > 1 and context.holds(test, line, column):
            yield from ((operand, start) for operand in operands if not context.holds(operand, line, column))


def _class_opt_in_flag(context: FileContext, line: int, column: int) -> str | None:
    """``if self.use_cuda:`` (or ``if use_cuda:`` with ``use_cuda`` a parameter handed on
    inside the class, or either beside other tests in an ``and``) where the class takes the
    flag as a parameter that is False/None by default, never with another default, and stores
    it only from such a parameter: CUDA only for a caller that opts in.  Needs the whole file."""
    cls = _innermost_class(context, line)
    if cls is None:
        return None
    function = context.innermost_function(line)
    for test, start in _flag_tests(context, line, column):
        on_self = (isinstance(test, ast.Attribute) and isinstance(test.value, ast.Name) and test.value.id == "self")
        name = last_name(test) if on_self or isinstance(test, ast.Name) else ""
        if not _CUDA_FLAG.fullmatch(name) or not (start >= getattr(function, "lineno", 0)):
            continue
        if not on_self and not (function is not None and name in _parameters(function)
                                and not _rebinds(function, name)):
            continue
        defaults = [p[name] for m in _methods(cls) if name in (p := _parameters(m))]
        if not any(_off(d) for d in defaults) or not all(d is None or _off(d) for d in defaults):
            continue
        stored = [(m, n.value) for m in _methods(cls) for n in ast.walk(m) if isinstance(n, ast.Assign)
                  and any(isinstance(t, ast.Attribute) and t.attr == name and isinstance(t.value, ast.Name)
                          and t.value.id == "self" for t in n.targets)]
        if all((isinstance(v, ast.Name) and v.id in _parameters(m)) or _off(v) for m, v in stored):
            return name
    return None


def _under_flag_test(context: FileContext, line: int, column: int) -> bool:
    """The finding runs (or counts) only under ``use_cuda`` or ``self.use_cuda`` (a flag by name)."""
    return any(_CUDA_FLAG.fullmatch(last_name(test)) for test, _ in _flag_tests(context, line, column))


def _rebinds(function: ast.AST, name: str) -> bool:
    """``use_cuda = torch.cuda.is_available()`` inside the function: the parameter is not all it reads."""
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) for n in ast.walk(function))


def _rebound_on(function: ast.AST, name: str) -> bool:
    """``use_cuda = DEFAULT_MODE`` inside the function: a value that may be on whatever the caller
    passed; not ``cuda = bool(cuda)``, which reads the parameter, nor a CUDA query."""
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store):
            assigned = next((a.value for a in ast.walk(function) if isinstance(a, ast.Assign)
                             and any(t is node for t in a.targets)), None)
            if assigned is None or not (_off(assigned) or _set_by_a_cuda_query(assigned) or any(
                    isinstance(n, ast.Name) and n.id == name for n in ast.walk(assigned))):
                return True
    return False


def _set_by_a_cuda_query(value: ast.expr) -> bool:
    """``torch.cuda.is_available()``, ``use_cuda and torch.cuda.is_available()``, ``x.is_cuda``: a
    value that is False wherever CUDA is absent; not one that asks for another accelerator too
    (``torch.cuda.is_available() or torch.backends.mps.is_available()`` is True on a Mac)."""
    queries = [n for n in ast.walk(value) if (isinstance(n, ast.Call) and last_name(n.func) in (
        "is_available", "device_count")) or (isinstance(n, ast.Attribute) and n.attr.startswith("is_"))]
    return any(isinstance(n, ast.Call) or n.attr == "is_cuda" for n in queries) and not any(
        default_path.OTHER_ACCELERATOR.search(ast.unparse(n)) for n in queries)


def _turns_on(value: ast.expr | None, names_hand_on: bool = True) -> bool:
    """A value handed to a CUDA flag that may turn it on by default: ``True``, a setting read from
    elsewhere; not ``False``/``None``, a CUDA query, or (where ``names_hand_on``) a name, which hands
    on a parameter checked where it is defined."""
    if value is None or _off(value) or _set_by_a_cuda_query(value):
        return False
    return not (names_hand_on and isinstance(value, ast.Name))


def _on_by_default(context: FileContext, name: str, seen: frozenset[str] = frozenset()) -> bool:
    """Somewhere in the file the CUDA flag ``name`` may be on without anybody asking for CUDA: a
    parameter or field defaulting to True or to a constant, ``self.use_cuda = True``, a value read
    from a config or handed on from a name that may be on (``self._use_cuda = use_cuda`` where a
    caller passes ``use_cuda=True``; ``use_cuda = DEFAULT_MODE``), a caller passing ``use_cuda=True``
    or ``True`` in its place (to a function or a class), a ``"use_cuda": True`` entry, a loop or a
    parametrized test over its values, an option on unless given."""
    seen = seen | {name}
    positions = _parameter_positions(context, name)
    off_classes = _classes_taking_off(context, name)

    def handed_on(value: ast.expr | None) -> bool:
        """``self.use_cuda`` or ``loader.use_cuda`` where ``loader`` is one of this file's classes
        that take the flag off by default: the same flag, checked where it is set."""
        if value is None or not (isinstance(value, ast.Attribute) and value.attr == name
                                 and isinstance(value.value, ast.Name)):
            return False
        owner = value.value.id
        return owner == "self" or any(_names_an_instance(context, owner, cls) for cls in off_classes)

    def may_be_on(value: ast.expr | None) -> bool:
        if value is None or handed_on(value):
            return False
        if _turns_on(value):
            return True
        source = value.id if isinstance(value, ast.Name) else (
            value.attr if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name)
            and value.value.id == "self" else None)
        return source is not None and source not in seen and _on_by_default(context, source, seen)

    for node in ast.walk(context.tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            if name in (parameters := _parameters(node)) and _turns_on(parameters[name], names_hand_on=False):
                return True
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets: list[ast.expr] = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(may_be_on(value) for value in _values_stored_in(targets, node.value, name)):
                return True  # `self.use_cuda = gpu` where `gpu=True`
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            if any(isinstance(t, ast.Name) and t.id == name for t in ast.walk(node.target)):
                return True  # `for use_cuda in (False, True):`
        elif isinstance(node, ast.keyword):
            if node.arg == name and _turns_on(node.value) and not handed_on(node.value):
                return True
        elif isinstance(node, ast.Dict):
            if any(isinstance(k, ast.Constant) and k.value == name and _turns_on(v)
                   for k, v in zip(node.keys, node.values)):
                return True
        elif isinstance(node, ast.Call):
            called = last_name(node.func)
            if called == "parametrize" and node.args and isinstance(node.args[0], ast.Constant) and name in re.split(
                    r"[,\s]+", str(node.args[0].value)):
                return True  # `@pytest.mark.parametrize("use_cuda", [False, True])`
            if (called == "add_argument" and node.args and isinstance(node.args[0], ast.Constant)
                    and str(node.args[0].value).lstrip("-").replace("-", "_") == name
                    and name not in _off_cli_options(context)):
                return True
            index = positions.get(called)
            if index is not None and len(node.args) > index and not any(
                    isinstance(a, ast.Starred) for a in node.args[:index + 1]) and _turns_on(node.args[index]) \
                    and not handed_on(node.args[index]):
                return True  # `train(model, loader, True)` for `def train(model, loader, use_cuda)`
    return False


_UNKNOWN = ast.Constant(value=...)  # a value stored by unpacking that this file cannot see


def _values_stored_in(targets: list[ast.expr], value: ast.expr | None, name: str) -> list[ast.expr | None]:
    """What an assignment stores in ``name`` (or ``self.name``): ``self.use_cuda, self.n = True, n``
    stores ``True``; unpacking a call stores something unknown, which may be on."""
    stored: list[ast.expr | None] = []
    for target in targets:
        if isinstance(target, (ast.Tuple, ast.List)):
            if not any(last_name(t) == name for t in target.elts):
                continue
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) and not any(
                    isinstance(e, ast.Starred) for e in (*target.elts, *value.elts)):
                stored += [v for t, v in zip(target.elts, value.elts) if last_name(t) == name]
            else:
                stored.append(_UNKNOWN)
        elif last_name(target) == name:
            stored.append(value)
    return stored


def _classes_taking_off(context: FileContext, name: str) -> list[str]:
    """This file's classes whose ``__init__`` takes the flag ``name`` off by default."""
    return [node.name for node in ast.walk(context.tree) if isinstance(node, ast.ClassDef) and any(
        isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name == "__init__"
        and name in (p := _parameters(m)) and _off(p[name]) for m in node.body)]


def _names_an_instance(context: FileContext, variable: str, cls: str) -> bool:
    """``loader`` is an instance of ``TrainDataLoader``: it is made by ``loader = TrainDataLoader(...)``,
    annotated ``loader: TrainDataLoader``, or named after the class (``train_data_loader``, ``loader``)."""
    if re.sub(r"_", "", cls.lower()).endswith(re.sub(r"_", "", variable.lower())) and len(variable) >= 3:
        return True
    for node in ast.walk(context.tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and last_name(node.value.func) == cls \
                and any(isinstance(t, ast.Name) and t.id == variable for t in node.targets):
            return True
        if isinstance(node, ast.arg) and node.arg == variable and node.annotation is not None \
                and last_name(node.annotation) == cls:
            return True
    return False


def _parameter_positions(context: FileContext, name: str) -> dict[str, int]:
    """For each function of the file that takes ``name`` positionally, its place among the
    arguments a caller writes (``self`` and ``cls`` left out of methods); a class's ``__init__``
    under the class's name too, since callers write ``Loader(data, True)``."""
    positions = {}
    for node in ast.walk(context.tree):
        functions = [(node.name, node)] if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else [
            (node.name, m) for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
            and m.name == "__init__"] if isinstance(node, ast.ClassDef) else []
        for called, function in functions:
            arguments = [a.arg for a in function.args.posonlyargs + function.args.args]
            if arguments and arguments[0] in ("self", "cls"):
                arguments = arguments[1:]
            if name in arguments:
                positions[called] = arguments.index(name)
    return positions


# A flag that asks for CUDA by name; `use_gpu` asks for a GPU, which code that maps it to CUDA
# refuses on another accelerator's machine (tests/test_scan_precision_round11.py keeps it).
_CUDA_BY_NAME = re.compile(r"_*(use_)?cuda", re.IGNORECASE)


def _cuda_flag_statement(site: _Site) -> str | None:
    """``if use_cuda: x = x.cuda()`` (or ``if self._use_cuda:``, ``if cuda:``, ``if use_cuda == "all":``,
    ``if use_cuda and x:``) where nothing in the file turns the flag on by default: the body runs only
    for a caller that asks for CUDA, as the conditional expression ``x.cuda() if use_cuda else x``
    does.  ``if args.cuda:`` and ``if cfg.use_cuda:`` stay: their defaults live in another file or a
    config; so does ``if use_gpu:``, a request for any GPU.  Needs the whole file."""
    tests = [(name, s.test) for s in _if_bodies_holding(site.context, site.line) if (name := _flag_tested(s.test))]
    test = next((test for name, test in tests if not site.file.flag_on_by_default(name)), None)
    if test is None:
        return None
    text = ast.unparse(test)
    return text if len(text) <= 60 else text[:57] + "..."  # the note quotes the test the user reads


def _model_parallel_opt_in(context: FileContext) -> bool:
    """The file is a model with the naive model parallelism of Hugging Face's older GPT-2 and T5
    code, copied into many packages: ``self.model_parallel`` is set to something other than False
    only inside a method ``parallelize()``, and nothing in the file calls ``parallelize()`` but
    another ``parallelize()`` (``GPT2LMHeadModel.parallelize`` calls its transformer's).  Asked once
    a file."""
    seen = False
    for node in walk_nodes(context.tree):
        if isinstance(node, ast.Constant) and node.value == "model_parallel":
            return False  # `setattr(self, "model_parallel", True)`, `{"model_parallel": True}`
        called = isinstance(node, ast.Call) and last_name(node.func) == "parallelize"
        stored = (isinstance(node, (ast.Attribute, ast.Name)) and isinstance(node.ctx, ast.Store)
                  and last_name(node) == "model_parallel")
        if not (called or stored):
            continue
        line = getattr(node, "lineno", 0)
        function = context.innermost_function(line)
        in_parallelize = function is not None and function.name == "parallelize" and _innermost_class(
            context, line) is not None
        if called:
            if not in_parallelize:
                return False  # `self.parallelize()` in `__init__` or `from_pretrained`
            continue
        seen = True
        on_self = isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
        assignment = next((a for a in walk_nodes(function or context.tree) if isinstance(a, (ast.Assign, ast.AnnAssign))
                           and any(t is node for t in (a.targets if isinstance(a, ast.Assign) else [a.target]))), None)
        if not on_self or assignment is None:
            return False  # a class attribute, a tuple, `|=`, another object's flag
        if not (in_parallelize or _off(assignment.value)):
            return False
    return seen


def _naive_model_parallel(site: _Site) -> bool:
    """``def parallelize(self, device_map=None)``, ``deparallelize`` and ``if self.model_parallel:``
    in such a model (``_model_parallel_opt_in``): CUDA only after the user calls ``parallelize()``,
    asking for several CUDA devices."""
    if site.file.search(_MODEL_PARALLEL) is None or not site.file.model_parallel_opt_in:
        return False
    context = site.file.whole()
    function = context.innermost_function(site.line)
    if function is not None and function.name in ("parallelize", "deparallelize"):
        return True
    return any(_tests_model_parallel(s.test) for s in _if_bodies_holding(context, site.line))


_MODEL_PARALLEL = re.compile(r"\bmodel_parallel\b")


def _tests_model_parallel(test: ast.expr) -> bool:
    return any(isinstance(operand, ast.Attribute) and operand.attr == "model_parallel"
               and isinstance(operand.value, ast.Name) and operand.value.id == "self" for operand in _needed(test))


def _needed(test: ast.expr) -> Iterator[ast.expr]:
    """What must hold for ``test`` to hold: the test, or each operand of an ``and`` (nested too)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        for value in test.values:
            yield from _needed(value)
    else:
        yield test


def _flag_tested(test: ast.expr) -> str | None:
    """The CUDA flag whose being on ``test`` needs: ``use_cuda``, ``self._use_cuda``, ``use_cuda ==
    "all"``, ``use_cuda in ("all", "batch")``, or one operand of an ``and``."""
    return next((name for operand in _needed(test) if (name := _flag_in(operand))), None)


def _flag_in(test: ast.expr) -> str | None:
    if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.In))
            and all(isinstance(c, ast.Constant) and isinstance(c.value, str) for c in (
                test.comparators[0].elts if isinstance(test.comparators[0], (ast.Tuple, ast.List, ast.Set))
                else [test.comparators[0]]))):
        test = test.left  # a mode of the flag: `use_cuda == "batch"`
    if not (isinstance(test, ast.Name) or (isinstance(test, ast.Attribute) and isinstance(test.value, ast.Name)
                                           and test.value.id == "self")):
        return None
    name = last_name(test)
    return name if _CUDA_BY_NAME.fullmatch(name) else None


def _isinstance_type_test(context: FileContext, line: int) -> bool:
    """``isinstance(x, torch.cuda.FloatTensor)`` (alone or in a tuple of types): a type test that
    raises on no build; for another accelerator's tensor it is just False."""
    parents = _parents_at(context, line)
    types = [n for n in context._expressions_at(line) if isinstance(n, ast.Attribute)
             and re.fullmatch(r"torch\.cuda\.\w+Tensor", context.source(n))]

    def tested(node: ast.AST) -> bool:
        parent = parents.get(id(node))
        if isinstance(parent, ast.Tuple):
            node, parent = parent, parents.get(id(parent))
        return (isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name)
                and parent.func.id in ("isinstance", "issubclass") and len(parent.args) == 2 and parent.args[1] is node)
    return bool(types) and all(tested(t) for t in types) and not _raises_on_the_test(context, line)


def _raises_on_the_test(context: FileContext, line: int) -> bool:
    """The test on ``line`` is an assert's, or an ``if`` whose branch raises: where it fails the code
    stops with an error, not silently."""
    if any(isinstance(s, ast.Assert) and s.lineno <= line <= (s.end_lineno or s.lineno) for s in context.statements):
        return True
    return any(s.test.lineno <= line <= (s.test.end_lineno or s.test.lineno)
               and any(isinstance(b[-1], ast.Raise) for b in (s.body, s.orelse) if b) for s in context.ifs)


# Qt's event handlers (`mousePressEvent(self, ev)`): their argument is an event, whose
# `.double()` asks whether the click was a double click.
_QT_EVENT_HANDLER = re.compile(r"[a-z]\w*Event")


# Methods of a Qt (or pyqtgraph) mouse event that no tensor or module has, and the names such an
# event argument goes by.
_QT_EVENT_METHODS = frozenset({"button", "buttons", "scenePos", "screenPos", "modifiers", "accept", "ignore",
                               "isAccepted", "globalPos", "angleDelta", "buttonDownPos", "lastPos"})
_EVENT_NAME = re.compile(r"e|ev|evt|event|\w+_event")


def _qt_event_double(context: FileContext, line: int) -> bool:
    """``ev.double()`` on the event argument of a Qt handler (``mouseClickEvent(self, ev)``,
    or a function whose argument named ``event``/``ev`` is also asked for ``ev.button()``,
    ``ev.scenePos()`` and never rebound): not ``Tensor.double()``."""
    function = context.innermost_function(line)
    if function is None:
        return False
    arguments = [a.arg for a in function.args.args if a.arg != "self"]
    receivers = {r.id if isinstance(r := c.func.value, ast.Name) else "" for c in context.calls_at(line)
                 if isinstance(c.func, ast.Attribute) and c.func.attr == "double" and not c.args}
    if len(receivers) != 1 or (receiver := next(iter(receivers))) not in arguments:
        return False
    if _QT_EVENT_HANDLER.fullmatch(function.name) and len(arguments) == 1:
        return True
    if not _EVENT_NAME.fullmatch(receiver) or _rebinds(function, receiver):
        return False
    return any(isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
               and node.func.attr in _QT_EVENT_METHODS and isinstance(node.func.value, ast.Name)
               and node.func.value.id == receiver for node in ast.walk(function))


def _class_flag(site: _Site) -> str | None:
    if not _under_flag_test(site.context, site.line, site.finding.column) or not site.file.search(_OFF_FLAG_DEFAULT):
        return None
    return _class_opt_in_flag(site.file.whole(), site.line, site.finding.column)


# `use_cuda: bool = False` or `gpu=None` in a signature.
_OFF_FLAG_DEFAULT = re.compile(r"\b(use_)?(cuda|gpu)\s*(:\s*[\w\[\]|. ]{1,30})?=\s*(False|None)\b", re.IGNORECASE)


def _off_cli_options(context: FileContext) -> set[str]:
    """The argparse options of the file that are off unless given: ``add_argument("--use_cuda",
    action="store_true")``, ``default=False``.  An option added twice, or on by default, is not."""
    seen: dict[str, list[bool]] = {}
    for node in ast.walk(context.tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument" and node.args and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str) and node.args[0].value.startswith("--")):
            continue
        keywords = {k.arg: k.value for k in node.keywords}
        dest = keywords.get("dest")
        name = str(dest.value) if isinstance(dest, ast.Constant) else node.args[0].value[2:].replace("-", "_")
        action = keywords.get("action")
        store_true = isinstance(action, ast.Constant) and action.value == "store_true"
        seen.setdefault(name, []).append(("default" in keywords and _off(keywords["default"]))
                                         or (store_true and "default" not in keywords))
    return {name for name, off in seen.items() if all(off)}


def _cli_flag_off(context: FileContext, line: int) -> str | None:
    """``if args.use_cuda:`` under a ``--use_cuda`` option off by default, or ``if use_cuda:``
    in a function that every call in the file hands ``use_cuda=args.use_cuda`` of such an
    option (whatever the parameter's own default).  Needs the whole file."""
    options = None
    for statement in _if_bodies_holding(context, line):
        test = statement.test
        if isinstance(test, ast.Attribute) and isinstance(test.value, ast.Name) and _CUDA_FLAG.fullmatch(test.attr):
            options = _off_cli_options(context) if options is None else options
            if test.attr in options:
                return f"--{test.attr}"
            continue
        function = context.innermost_function(statement.lineno)
        if not (isinstance(test, ast.Name) and _CUDA_FLAG.fullmatch(test.id) and function is not None
                and test.id in _parameters(function)):
            continue
        options = _off_cli_options(context) if options is None else options
        name = function.name
        calls = [n for n in ast.walk(context.tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                 and n.func.id == name]
        handed = [next((k.value for k in c.keywords if k.arg == test.id), None) for c in calls]
        if handed and all(isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name) and v.attr in options
                          for v in handed):
            return f"--{handed[0].attr}"  # type: ignore[union-attr]
    return None


def _cli_flag(site: _Site) -> str | None:
    if not site.file.mentions("add_argument") or not _under_flag_test(site.context, site.line, site.finding.column):
        return None
    return _cli_flag_off(site.file.whole(), site.line)


def _class_asserting_cuda(context: FileContext, line: int) -> bool:
    """A line of a class whose ``__init__`` asserts on ``torch.cuda`` in its own body
    (``assert torch.cuda.is_available(), "This only works on GPU"``): where CUDA is absent
    no instance exists; the assert is the lock-in, reported at its own line."""
    cls = _innermost_class(context, line)
    if cls is None:
        return False
    init = next((m for m in _methods(cls) if m.name == "__init__"), None)
    asserts = [s for s in (init.body if init else []) if isinstance(s, ast.Assert)
               and "torch.cuda." in context.source(s.test)]
    return bool(asserts) and all(not s.lineno <= line <= (s.end_lineno or s.lineno) for s in asserts)


def _in_class_asserting_cuda(site: _Site) -> bool:
    return bool(site.file.search(_CUDA_ASSERT)) and _class_asserting_cuda(site.file.whole(), site.line)


def _cuda_tuning_call(context: FileContext, node: ast.expr) -> str | None:
    """``torch.cuda.empty_cache()``, ``mp.set_start_method("spawn")``: releases cached memory
    or chooses how processes start, which CUDA needs and other devices do not."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return None
    name = node.func.attr
    # `cudagraph_mark_step_begin` only marks a step for CUDA graphs (a no-op without CUDA, CPU torch 2.13)
    if name in ("set_start_method", "ipc_collect", "cudagraph_mark_step_begin") or context.source(node.func) in (
            "torch.cuda.empty_cache", "torch.cuda.synchronize"):
        return name
    return None


# TF32 switches (`allow_tf32`, `fp32_precision`): a number format only NVIDIA GPUs have.
# Not `cudnn.benchmark`, held at silent since round 8 (docs/precision/policy.md).
_TF32 = re.compile(r"tf32|fp32_precision")


# Reads of the CUDA caching allocator's counters: only CUDA keeps them.  Not mem_get_info, whose
# free memory sizes batches.
_CUDA_MEMORY_READINGS = frozenset(f"torch.cuda.{name}" for name in (
    "memory_stats", "memory_stats_as_nested_dict", "memory_allocated", "max_memory_allocated",
    "memory_reserved", "max_memory_reserved", "memory_summary"))


def _records_cuda_memory(context: FileContext, statement: ast.stmt, whole: Callable[[], FileContext]) -> bool:
    """``ops["cuda_drift"] = torch.cuda.memory_stats(device)``: keeps a CUDA memory reading
    under a constant key of a mapping that its function never reads back by that key, for a
    report of CUDA memory use.  A name (``peak = ...``) is read later, unbound where CUDA is
    absent; an entry read back (``cfg["mem"][0] // n``) raises KeyError there."""
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(target := statement.targets[0], ast.Subscript)
            and isinstance(target.slice, ast.Constant) and isinstance(statement.value, ast.Call)
            and context.source(statement.value.func) in _CUDA_MEMORY_READINGS):
        return False
    file = whole()  # the reads need every statement of the function, not only those with trigger words
    function = file.innermost_function(statement.lineno)
    if function is None:
        return False
    holder, key = context.source(target.value), target.slice.value
    return not any(isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) and isinstance(n.slice, ast.Constant)
                   and n.slice.value == key and file.source(n.value) == holder for n in ast.walk(function))


# What a reading kept only for a report may be made of beside CUDA memory readings: numbers and
# their text (`torch.cuda.memory_allocated() / 2**30`, `round(...)`).
_REPORT_VALUE_CALLS = frozenset({"round", "int", "float", "str", "format", "torch.cuda.get_device_name"})


def _report_call(statement: ast.stmt) -> bool:
    """``logger.info(f"GPU memory: {allocated:.2f} GB")``, ``print(...)`` as a statement, binding
    nothing (no ``:=``): a call made for a person."""
    return (isinstance(statement, ast.Expr) and host_move.shown_call(statement.value)
            and not any(isinstance(n, ast.NamedExpr) for n in walk_nodes(statement)))


def _kept_for_report(context: FileContext, statement: ast.stmt, guard: ast.If,
                     whole: Callable[[], FileContext]) -> bool:
    """``allocated = torch.cuda.memory_allocated() / 2**30`` in the body of ``guard``, whose every
    read in its function is in a report call of that body: the number only becomes text."""
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name) and any(_report_call(s) for s in guard.body)):
        return False
    calls = [n for n in walk_nodes(statement.value) if isinstance(n, ast.Call)]
    if not calls or not all(context.source(c.func) in _CUDA_MEMORY_READINGS | _REPORT_VALUE_CALLS for c in calls):
        return False
    # every read needs the whole function, and its places the whole file's (the cut is re-indented)
    file = whole()
    function = file.innermost_function(statement.lineno)
    same = next((s for s in file.ifs if s.lineno == guard.lineno), None)
    if function is None or same is None:
        return False
    name = statement.targets[0].id
    shown = {id(n) for report in same.body if _report_call(report) for n in walk_nodes(report)}
    if any(isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names for n in walk_nodes(function)):
        return False  # read by other functions
    named = [n for n in walk_nodes(function) if isinstance(n, ast.Name) and n.id == name]
    loads = [n for n in named if isinstance(n.ctx, ast.Load)]
    # bound once, by this statement: `del used` or `used += 1` elsewhere is a read or a binding of its own
    return len(named) == len(loads) + 1 and bool(loads) and all(id(n) in shown for n in loads)


def _guards_only_cuda_tuning(context: FileContext, line: int, whole: Callable[[], FileContext]) -> bool:
    """``if torch.cuda.is_available():`` with no else, whose body only sets TF32 flags,
    empties the CUDA cache, picks the "spawn" start method that CUDA needs or keeps a
    reading of CUDA memory, and reports on it (a log or print call, and the readings that only
    it shows): skipping it where CUDA is absent changes no result.  Not in a timing function,
    where a synchronize changes the figure and the memory reading is the figure."""
    if any(_TIMING_SCOPE.search(getattr(scope, "name", "")) for scope in context.enclosing(line)):
        return False
    for statement in context.ifs:
        if not statement.lineno <= line <= (statement.test.end_lineno or statement.lineno) or statement.orelse:
            continue
        reports = [s for s in statement.body if _report_call(s)]
        tuning = [s for s in statement.body if s not in reports]
        calls = [_cuda_tuning_call(context, s.value) for s in tuning if isinstance(s, ast.Expr)]
        flags: list[ast.stmt] = [s for s in tuning if isinstance(s, ast.Assign) and isinstance(s.value, ast.Constant)
                 and all(isinstance(t, ast.Attribute) and _TF32.search(t.attr)
                         and context.source(t).startswith(("torch.backends.cuda.", "torch.backends.cudnn.", "cudnn."))
                         for t in s.targets)]
        flags += [s for s in tuning if s not in flags and (_records_cuda_memory(context, s, whole)
                                                           or _kept_for_report(context, s, statement, whole))]
        # a synchronize alone may end a timed region (its absence on MPS changes the figure);
        # beside empty_cache it only lets the release finish.  Reports alone are
        # _guards_only_a_check's: here they come beside tuning or the readings they show.
        return (len(calls) + len(flags) == len(tuning) and bool(tuning) and all(calls)
                and ("synchronize" not in calls or "empty_cache" in calls))
    return False


class _File:
    """One scanned file as the lowerings see it: the statements parsed with trigger words, and
    the whole file parsed only when a lowering needs every use of a name."""

    def __init__(self, tree: ast.Module | None, text: str, path: str, findings: list[Finding]) -> None:
        self.context = FileContext(tree, text) if tree is not None else None
        self.findings = findings
        self.consequences: dict[int, check_consequence.Consequence | None] = {}
        self.text = text
        self.path = path
        self.disk_path: str | None = None
        self._whole: FileContext | None = None
        self.default_path: dict[tuple[int, int], default_path.Verdict | None] = {}
        self._searched: dict[re.Pattern[str], re.Match[str] | None] = {}
        self._mentioned: dict[str, bool] = {}
        self._flags_on: dict[str, bool] = {}

    # The lowerings ask these of the whole text for each finding of the file: a large
    # file has dozens of findings, and a search for a word it lacks reads all of it.
    def search(self, pattern: re.Pattern[str]) -> re.Match[str] | None:
        if pattern not in self._searched:
            self._searched[pattern] = pattern.search(self.text)
        return self._searched[pattern]

    def mentions(self, word: str) -> bool:
        if word not in self._mentioned:
            self._mentioned[word] = word in self.text
        return self._mentioned[word]

    def whole(self) -> FileContext:
        if self._whole is None:
            assert self.context is not None
            self._whole = _whole(self.text, self.context)
        return self._whole

    @functools.cached_property
    def model_parallel_opt_in(self) -> bool:
        return _model_parallel_opt_in(self.whole())

    def flag_on_by_default(self, name: str) -> bool:
        """``_on_by_default`` of the whole file, asked once a name: a file has many findings under
        one flag."""
        if name not in self._flags_on:
            self._flags_on[name] = _on_by_default(self.whole(), name)
        return self._flags_on[name]

    @functools.cached_property
    def in_package_tests(self) -> bool:
        return _package_tests(self.path)

    @functools.cached_property
    def gpu_named_test(self) -> str | None:
        return gpu_test_names.gpu_suite_of_test_file(self.path, self.disk_path)

    @functools.cached_property
    def skipped_as_a_whole(self) -> bool:
        return bool(_MODULE_SKIP.search(self.text)) and "cuda" in self.text.lower()


@dataclasses.dataclass(frozen=True)
class _Site:
    file: _File
    finding: Finding

    @property
    def line(self) -> int:
        return self.finding.line

    @property
    def context(self) -> FileContext:
        """Asked only by lowerings that need the tree, which are skipped where the file has none."""
        assert self.file.context is not None
        return self.file.context


# What a predicate answers: whether the lowering applies; a string (a flag's or a function's
# name) both says yes and fills the ``{}`` of the reason.
_Answer = bool | str | None


@dataclasses.dataclass(frozen=True)
class Lowering:
    """One shape the judges found mostly wrong at error or silent: findings of ``rules`` for
    which ``applies`` answers yes are lowered to ``severity``, saying ``reason``."""

    rules: frozenset[str]
    applies: Callable[[_Site], _Answer]
    severity: str
    reason: str
    needs_tree: bool = True


def _at_line(check: Callable[[FileContext, int], _Answer]) -> Callable[[_Site], _Answer]:
    """A predicate on the finding's line in the parsed file."""
    return lambda site: check(site.context, site.line)


def _in_whole_file(check: Callable[[FileContext, int], _Answer]) -> Callable[[_Site], _Answer]:
    """A predicate on the finding's line that needs every function of the file, parsed in full."""
    return lambda site: check(site.file.whole(), site.line)


def _in_cuda_guarded_function(site: _Site) -> str | None:
    decorators = [target.id for s in site.context.enclosing(site.line) if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                  for d in s.decorator_list if isinstance(target := d.func if isinstance(d, ast.Call) else d, ast.Name)]
    if not any(re.search(rf"\bdef\s+{re.escape(name)}\s*\(", site.file.text) for name in decorators):
        return None  # no decorator this file defines
    return _cuda_guard_decorator(site.file.whole(), site.line)


def _in_cuda_kernel_of_an_op(site: _Site) -> str | None:
    return (_cuda_kernel_of_an_op(site.file.whole(), site.line, site.finding.column)
            if site.file.search(_TORCH_LIBRARY) else None)


def _check_decides(severity: str) -> Callable[[_Site], str | None]:
    """The reason, when what the CUDA check guards says it is ``severity`` (check_consequence.py)."""
    def decides(site: _Site) -> str | None:
        key = id(site.finding)
        if key not in site.file.consequences:
            site.file.consequences[key] = check_consequence.consequence(site.context, site.file.findings,
                                                                        site.finding, site.file.whole)
        found = site.file.consequences[key]
        return found.reason if found is not None and found.severity == severity else None
    return decides


def _availability_probe(site: _Site) -> bool:
    return (_returns_unavailable(site.context, site.line)
            and _probe_says_unavailable(site.file.whole(), site.line))


# A device test's text: `.is_cuda`, a "cuda" or "xla" string.  Read before the whole file is parsed.
_DEVICE_TEST_HINT = re.compile(r"""\.is_cuda\b|['"](cuda|xla)(:\d*)?['"]""")


# A name a condition tests: `if _is_cuda(device):`, `and on_cuda`, `if not is_xla:`.
_TESTED_NAME = re.compile(r"\b(?:if|elif|and|or|not)\s+(?:not\s+)?(\w+)\b")


# `def _is_cuda(`, `on_cuda = x.device.type == "cuda"`: a helper a condition may call, a flag it may test.
_HELPER_OR_DEVICE_FLAG = re.compile(rf"""^[ \t]*(?:def\s+(\w+)\(|(\w+)\s*=[^\n]*(?:{_DEVICE_TEST_HINT.pattern}))""",
                                    re.MULTILINE)


@functools.lru_cache(maxsize=64)
def _helpers_and_device_flags(text: str) -> frozenset[str]:
    return frozenset(name for found in _HELPER_OR_DEVICE_FLAG.findall(text) for name in found[:2] if name)


# A device test written out: `.is_cuda`, `== "cuda"`, `"xla" !=`, `in ("cuda", ...)`, `.startswith("cuda")`.
# Searched one by one: each starts with a literal or a rare character, which re skips to, while
# their alternation is tried at every character (4x slower on the transformers tree).
_DEVICE_COMPARISONS = (re.compile(r"\.is_cuda\b"), re.compile(r"""[=!]=\s*(?:torch\.device\(\s*)?['"](?:cuda|xla)"""),
                       re.compile(r"""startswith\(\s*['"](?:cuda|xla)"""),
                       re.compile(r"""['"](?:cuda|xla)(?::\d*)?['"]\s*\)?\s*[=!]="""))
_MEMBERSHIP_TEST = re.compile(r"""in\s*[(\[{]\s*['"](?:cuda|xla)""")  # `in ("cuda", ...)`; `\bin` checked below


@functools.lru_cache(maxsize=64)
def _compares_devices(text: str) -> bool:
    return any(pattern.search(text) for pattern in _DEVICE_COMPARISONS) or any(
        found.start() == 0 or not (text[found.start() - 1].isalnum() or text[found.start() - 1] == "_")
        for found in _MEMBERSHIP_TEST.finditer(text))


def _guarded_by_device_test(site: _Site) -> str | None:
    # the statements with trigger words hold the device tests written out (`"cuda"`, `.is_cuda`); the
    # whole file is parsed only when the line's function tests a name the file defines or assigns (a
    # helper such as `_is_cuda(device)`, a flag), whose statements may hold none
    if not _compares_devices(site.file.text):
        return None
    found = device_guard.guarded_by_device_test(site.context, site.line, site.finding.column)
    if found is not None:
        return found
    function = site.context.innermost_function(site.line)
    window = "".join(site.context.lines[(_first_line(function) if function is not None else 1) - 1:site.line])
    if not set(_TESTED_NAME.findall(window)) & _helpers_and_device_flags(site.file.text):
        return None
    return device_guard.guarded_by_device_test(site.file.whole(), site.line, site.finding.column)


def _cuda_tensor_unit(site: _Site) -> bool:
    unit = _unit(site.context, site.line)
    return (unit is not None and site.file.text.count(unit[0]) > 1  # defined, and used somewhere
            and _reached_only_for_cuda_tensors(site.file.whole(), site.line))


def _public_function_for_cuda_tensors(site: _Site) -> str | None:
    """``def dtw_cuda(x)`` at module level, public, that its own file calls only under a device
    test (``if x.is_cuda: return dtw_cuda(x)``): the file's other path is what runs without CUDA."""
    scopes = site.context.enclosing(site.line)
    if not scopes or not isinstance(scopes[0], (ast.FunctionDef, ast.AsyncFunctionDef)) or len(scopes) > 1:
        return None
    name = scopes[0].name
    if site.file.text.count(name) < 2 or not _compares_devices(site.file.text):
        return None
    context = site.file.whole()
    scope = next(s for s in context.enclosing(site.line) if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)))
    uses = [n for n in context.loads().get(name, ()) if not _first_line(scope) <= n.lineno <= (scope.end_lineno or 0)]
    guarded = bool(uses) and all(_on_a_cuda_route(context, n.lineno)
                                 or device_guard.guarded_by_device_test(context, n.lineno, context.column_of(n))
                                 for n in uses)
    return name if guarded else None


# `assert torch.cuda.device_count() > LOCAL_RANK`, `assert device.type == 'cuda'`: read before
# the whole file is parsed.
_CUDA_ASSERT = re.compile(r"^\s*assert\b[^\n]*(\btorch\.cuda\.|\.type\s*==\s*['\"]cuda['\"])", re.MULTILINE)


# `n_gpus = torch.cuda.device_count()` and an assert somewhere in the file: the assert may test it.
_STORED_QUERY_IN_TEXT = re.compile(r"^[ \t]*\w+\s*=\s*torch\.cuda\.(?:device_count|is_available)\(\)", re.MULTILINE)
_ASSERT_IN_TEXT = re.compile(r"^[ \t]*assert\b", re.MULTILINE)
_RAISE_IN_TEXT = re.compile(r"^[ \t]*raise\b", re.MULTILINE)


def _may_assert_cuda(site: _Site) -> bool:
    return bool(site.file.search(_CUDA_ASSERT)) or bool(
        site.file.search(_STORED_QUERY_IN_TEXT) and site.file.search(_ASSERT_IN_TEXT))


def _stopped_by_cuda_assert(site: _Site) -> bool:
    return _may_assert_cuda(site) and _after_cuda_assert(site.file.whole(), site.line)


def _private_past_cuda_exit(site: _Site) -> str | None:
    if not (any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name.startswith("_")
                for s in site.context.enclosing(site.line)) and _has_cuda_exit(site.file.text)):
        return None
    return after_cuda_exit.reached_only_past_cuda_exit(site.file.whole(), site.line, path=site.file.disk_path)


@functools.lru_cache(maxsize=64)
def _has_cuda_exit(text: str) -> bool:
    """``if not torch.cuda.is_available(): return``: read from the text before the whole file is
    parsed, once per file."""
    return re.search(r"\bnot\s+torch\.cuda\.is_available\(\)", text) is not None


def _function_after_cuda_assert(site: _Site) -> str | None:
    if not _may_assert_cuda(site):
        return None
    return _used_only_after_cuda_assert(site.file.whole(), site.line)


# `num_gpus = torch.cuda.device_count()`: read from the line before the whole file is parsed.
_STORED_QUERY = re.compile(r"^\s*(\w+)\s*=\s*torch\.cuda\.(is_available|is_initialized|device_count)\(\)\s*(#.*)?$")


def _shown_query(site: _Site) -> str | None:
    stored = _STORED_QUERY.match(site.context.lines[site.line - 1]) if site.line <= len(site.context.lines) else None
    if stored is None:
        return None
    name = re.compile(rf"(?<![\w.]){re.escape(stored.group(1))}\b(?!\s*=[^=])")  # not `f(num_gpus=1)`
    reads = [text for n, text in enumerate(site.context.lines, 1) if n != site.line and name.search(text)]
    if not reads or not all(_DISPLAY_WORD.search(text) for text in reads):  # most stored queries choose a device
        return None
    return _query_stored_for_text(site.file.whole(), site.line)


def _display_flag(site: _Site) -> str | None:
    if not any(isinstance(s, ast.Assign) and s.lineno == site.line for s in site.context.statements):
        return None
    return _flag_read_only_for_display(site.file.whole(), site.line)


def _visible_devices_plumbing(site: _Site) -> bool:
    return site.finding.rule_id == CUDA_VISIBLE_DEVICES or "CUDA_VISIBLE_DEVICES" in site.finding.snippet


def _lammps_code(site: _Site) -> bool:
    return bool(_NO_MPS_HOST.search(Path(site.file.path).name)) or any(
        _NO_MPS_HOST.search(scope.name) for scope in site.context.enclosing(site.line))


# `GradScaler(enabled = amp)` on the finding's line or the next ones: worth parsing the whole file for.
_ENABLED_KEYWORD = re.compile(r"\benabled\s*=")

# `if not use_amp: return`, `assert args.distributed`: an exit before the line that may make it opt-in.
_EARLY_EXIT = re.compile(r"^\s*(if\s+not\b[^\n]*:\s*(#[^\n]*)?\n\s*(return|continue)\b|assert\s+[\w.]+\s*(,|\n|and\b))",
                         re.MULTILINE)


def _default_path_verdict(site: _Site) -> default_path.Verdict | None:
    key = (site.line, site.finding.column)
    if key not in site.file.default_path:
        context, verdict = site.context, None
        function = context.innermost_function(site.line)
        start = function.lineno if function is not None else 1
        gates = site.finding.rule_id != CUDA_AVAILABILITY_CHECK  # a check gated by an option still picks the CPU
        if (any(default_path.could_be_opt_in(test, taken)
                for test, taken in default_path.conditions(context, site.line, site.finding.column, gates))
                or _EARLY_EXIT.search("".join(context.lines[start - 1:site.line - 1]))):
            verdict = default_path.off_default_path(site.file.whole(), site.line, site.finding.column, gates)
        site.file.default_path[key] = verdict
    return site.file.default_path[key]


def _opt_in_option(site: _Site) -> str | None:
    verdict = _default_path_verdict(site)
    if verdict is None or verdict.kind != default_path.OPT_IN:
        return None
    if verdict.debug and (site.file.disk_path is None or debug_logging.on_in_package(site.file.disk_path)):
        return None  # debug logging that another file of the package (or its scripts) may turn on
    return verdict.option


def _cuda_derived_option(site: _Site) -> str | None:
    verdict = _default_path_verdict(site)
    return verdict.option if verdict is not None and verdict.kind == default_path.CUDA_DERIVED else None


# Top-level imports of a runtime that exists only for NVIDIA GPUs (TensorRT, TensorRT-LLM,
# Triton Inference Server's Python backend and client, PyCUDA, CV-CUDA, the Video Codec SDK's
# bindings, cuda-python).
_NVIDIA_RUNTIME_IMPORT = re.compile(
    r"^(import|from)\s+(tensorrt|tensorrt_llm|torch_tensorrt|tritonclient|triton_python_backend_utils|pycuda"
    r"|cvcuda|PyNvVideoCodec|cuda(\.bindings|\.cudart|\.cuda)?)\b(?!\.\w*\s*import\s+\w*(hip|rocm))", re.MULTILINE)


def _nvidia_runtime_module(site: _Site) -> str | None:
    found = site.file.search(_NVIDIA_RUNTIME_IMPORT)
    return found.group(2) if found else None


# Folders that hold one device's build of the same extension: `extensions/cuda` beside `extensions/hip`.
_DEVICE_FOLDER = re.compile(r"cuda|hip|rocm|mps|metal|xpu|sycl|cpu|cpp|npu", re.IGNORECASE)
_OTHER_DEVICE_FOLDER = re.compile(r"hip|rocm|mps|metal|xpu|sycl|npu", re.IGNORECASE)
# The loader's choice between the builds: by the torch build, a device type or an availability check.
_DEVICE_DISPATCH = re.compile(r"torch\.version\.(cuda|hip)|\.is_available\(\)|device\.type\s*==")


@functools.lru_cache(maxsize=1024)
def _device_twins(folder: str) -> str | None:
    """For a folder ``.../cuda`` whose parent also holds a build for another device and a Python
    loader that picks one by the torch build or the device, the twins' names."""
    parent, name = os.path.split(folder)
    if name.lower() != "cuda":
        return None
    try:
        siblings = [n for n in os.listdir(parent) if os.path.isdir(os.path.join(parent, n))]
        loaders = [n for n in os.listdir(parent) if n.endswith(".py")]
    except OSError:
        return None
    twins = sorted(n for n in siblings if n != name and _OTHER_DEVICE_FOLDER.fullmatch(n))
    if not twins:
        return None
    for loader in loaders:
        try:
            text = Path(parent, loader).read_text(errors="replace")
        except OSError:
            continue
        if _DEVICE_DISPATCH.search(text):
            return ", ".join(twins)
    return None


def _extension_with_device_twins(site: _Site) -> str | None:
    folder = Path(site.file.path).resolve().parent
    for above in (folder, *folder.parents):
        if above == above.parent:
            break
        twins = _device_twins(str(above))
        if twins:
            return twins
    return None


def _in_build_only_command(site: _Site) -> str | None:
    if not site.file.mentions(".command(") or not site.file.mentions("load("):
        return None
    function = site.file.whole().innermost_function(site.line)
    return optional_native.build_only_command(function) if function is not None else None


# Where a lookup on PATH comes from: it answers None where the program is absent.
_PROGRAM_LOOKUPS = {"shutil": "which", "distutils.spawn": "find_executable"}


@functools.lru_cache(maxsize=64)
def _lookup_spellings(tree: ast.Module) -> frozenset[str]:
    """How the file calls a lookup on PATH (``shutil.which``, ``which`` from shutil): only names
    that nothing in the file binds otherwise (a local ``def which`` or ``class shutil``)."""
    imported: dict[str, set[str]] = {}  # name -> what its imports bind it to
    other: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                imported.setdefault(alias.asname or alias.name.split(".")[0], set()).add(
                    alias.name if alias.asname or "." not in alias.name else alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                imported.setdefault(alias.asname or alias.name, set()).add(
                    f"{'.' * node.level}{node.module or ''}.{alias.name}")
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            other.add(node.id)
        elif isinstance(node, ast.arg):
            other.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            other.add(node.name)
    found = set()
    for name, sources in imported.items():
        if name in other or len(sources) != 1:
            continue
        source = next(iter(sources))
        if source in _PROGRAM_LOOKUPS:
            found.add(f"{name}.{_PROGRAM_LOOKUPS[source]}")
        elif any(source == f"{module}.{function}" for module, function in _PROGRAM_LOOKUPS.items()):
            found.add(name)
    return frozenset(found)


def _looks_up_nvidia_smi(context: FileContext, node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and context.source(node.func) in _lookup_spellings(context.tree)
            and len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Constant)
            and node.args[0].value == "nvidia-smi")


def _lookup_compared_with_none(context: FileContext, test: ast.expr, ops: tuple[type, ...]) -> ast.Call | None:
    """The lookup in ``shutil.which("nvidia-smi") <op> None``, for an operator among ``ops``."""
    if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ops)
            and _looks_up_nvidia_smi(context, test.left) and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value is None):
        return test.left  # type: ignore[return-value]
    return None


def _absent_when_true(context: FileContext, test: ast.expr) -> ast.Call | None:
    """The lookup in ``not shutil.which("nvidia-smi")`` or ``shutil.which("nvidia-smi") is None``."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return test.operand if _looks_up_nvidia_smi(context, test.operand) else None  # type: ignore[return-value]
    return _lookup_compared_with_none(context, test, (ast.Is, ast.Eq))


def _present_when_true(context: FileContext, test: ast.expr) -> ast.Call | None:
    """The lookup in ``shutil.which("nvidia-smi")`` or ``shutil.which("nvidia-smi") is not None``."""
    if _looks_up_nvidia_smi(context, test):
        return test  # type: ignore[return-value]
    return _lookup_compared_with_none(context, test, (ast.IsNot, ast.NotEq))


def _nvidia_smi_looked_up(site: _Site) -> str | None:
    """The "nvidia-smi" is the argument of ``shutil.which`` in the test of an ``if`` (a lookup
    only tested, which answers None where the program is absent), or runs only where that lookup
    found it: in the body of ``if shutil.which("nvidia-smi"):``, or after an ``if not
    shutil.which("nvidia-smi"): ... return`` among the statements of its function or module."""
    if "nvidia-smi" not in site.context.lines[site.line - 1] or "which" not in site.file.text and (
            "find_executable" not in site.file.text):
        return None
    context = site.file.whole()
    line, column = site.line, site.finding.column
    function = context.innermost_function(line)
    scope: ast.AST = function if function is not None else context.tree
    body = function.body if function is not None else context.tree.body
    tests = [n for n in walk_nodes(scope) if isinstance(n, ast.If)]
    for statement in tests:
        if any(isinstance(n, ast.NamedExpr) for n in ast.walk(statement.test)):
            continue  # `if (smi := shutil.which(...))`: the answer is kept for later
        if any(_looks_up_nvidia_smi(context, n) and context.holds(n.args[0], line, column)  # type: ignore[attr-defined]
               for n in ast.walk(statement.test)):
            return "a lookup of nvidia-smi on PATH, only tested: it answers None where nvidia-smi is absent"
    for earlier in body:
        if (earlier.end_lineno or earlier.lineno) >= line:
            break
        if (isinstance(earlier, ast.If) and not earlier.orelse and _absent_when_true(context, earlier.test)
                and isinstance(earlier.body[-1], ast.Return)):
            return (f"past the early return where `{context.source(earlier.test)}` (line {earlier.lineno}): "
                    "it runs only where nvidia-smi is installed")
    for test in tests:
        if (_present_when_true(context, test.test) is not None and test.body
                and test.body[0].lineno <= line <= (test.body[-1].end_lineno or test.body[-1].lineno)):
            return f"under `{context.source(test.test)}` (line {test.lineno}): it runs only where nvidia-smi is installed"
    return None


def _seeded_by_manual_seed(context: FileContext, line: int) -> bool:
    """``torch.cuda.manual_seed_all(seed)`` after ``torch.manual_seed(...)`` in the same function:
    torch.manual_seed seeds every device, and off CUDA the CUDA call is a no-op (measured in
    tests/test_scan_precision_round14.py)."""
    if not re.search(r"torch\.cuda\.manual_seed(_all)?\(", context.lines[line - 1] if line <= len(context.lines) else ""):
        return False
    function = context.innermost_function(line)
    start = function.lineno if function is not None else 1
    return bool(re.search(r"(?<![\w.])torch\.manual_seed\(", "".join(context.lines[start - 1:line - 1])))


# `torch.manual_seed(` or `torch.random.manual_seed(` at the start of a line.
_SEEDS_EVERY_DEVICE = re.compile(r"\s*torch\.(?:random\.)?manual_seed\(")


def _seeded_next(context: FileContext, line: int) -> bool:
    """``torch.cuda.manual_seed_all(1)`` as a statement, followed in its block by the statement
    ``torch.random.manual_seed(1)`` (or ``torch.manual_seed``): that seeds every device again, so
    off CUDA nothing is lost."""
    for block in context.blocks():
        for statement, following in zip(block, block[1:]):
            if statement.lineno != line:
                continue
            calls = [s.value for s in (statement, following) if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)]
            return (len(calls) == 2 and re.fullmatch(r"torch\.cuda\.manual_seed(_all)?", context.source(calls[0].func))
                    is not None and context.source(calls[1].func) in ("torch.manual_seed", "torch.random.manual_seed"))
    return False


_EVERY_RULE = frozenset(RULES_BY_ID)
_CHECK = frozenset({CUDA_AVAILABILITY_CHECK})
_F64 = frozenset({FLOAT64})
# A float64 line that places its tensor: `device=`, `.to(`.
_PLACED = re.compile(r"device\s*=|\.to\(")
_DEVICE_STRING = frozenset({CUDA_DEVICE_STRING})
_QUERY = frozenset({CUDA_AVAILABILITY_CHECK, CUDA_DEVICE_MANAGEMENT})

# Lowerings that hold only in test files, asked before one statement's repeated findings are
# folded (a test-file lowering of the first leaves the second to stand for the statement).
# The first that applies wins.
TEST_FILE_LOWERINGS: tuple[Lowering, ...] = (
    Lowering(_F64, lambda site: site.file.in_package_tests, "info",
             "float64 in the tests of an installed package: they run under its own test runner (on the CPU unless "
             "they move it), never in the user's code", needs_tree=False),
    Lowering(_CHECK, _at_line(_test_device_choice), "info",
             "a test's device choice: where CUDA is absent the test still runs, on the CPU"),
    Lowering(_EVERY_RULE, lambda site: site.file.skipped_as_a_whole, "info",
             "test module skipped as a whole where its CUDA requirement is not met", needs_tree=False),
    Lowering(_CHECK, _at_line(_exits_test_case), "info", "decides which test cases run where CUDA is absent"),
    Lowering(_EVERY_RULE, _at_line(_skipping_parametrised_case), "info",
             "a CUDA case of a parametrised test that skips itself where CUDA is absent"),
    Lowering(_EVERY_RULE, _at_line(_cuda_named_test_helper), "info",
             "in the test helper {}, named for the CUDA cases it serves"),
    # not on ROCm, where torch.cuda is HIP and running a GPU suite is the port itself
    Lowering(_EVERY_RULE, lambda site: finding_severity(site.finding, "rocm") not in ("error", "silent")
             and site.file.gpu_named_test, "info",
             "in a test named for the GPU ({}): a GPU test suite by its name, which runs where torch.cuda does "
             "(CUDA, ROCm); elsewhere running it asks for such a GPU, and it says nothing of how the code it tests "
             "runs there"),
)

# The lowerings of every file, asked in order; the first that applies wins.
LOWERINGS: tuple[Lowering, ...] = (
    Lowering(_EVERY_RULE, _visible_devices_plumbing, "info",
             "CUDA_VISIBLE_DEVICES plumbing: no effect where CUDA is absent", needs_tree=False),
    Lowering(_EVERY_RULE, _at_line(_never_runs), "info", "under `if False:` (or another false constant): never runs"),
    Lowering(_EVERY_RULE, lambda site: site.file.search(old_torch_branch.VERSION_TEST_HINT) is not None
             and old_torch_branch.in_either_branch(site.context.tree, site.line)
             and old_torch_branch.only_on_old_torch(site.file.whole().tree, site.file.whole().lines, site.line), "info",
             "in the branch of `{}` that only a torch older than the version named takes; a current torch takes "
             "the other branch, which names no CUDA (the device-generic API)"),
    Lowering(_CHECK, lambda site: site.file.mentions("import")
             and cuda_queries.availability_return(site.context.tree, site.context.lines, site.line) is not None
             and cuda_queries.kernel_library_helper(
        site.file.whole().tree, site.file.whole().lines, site.line), "info",
             "answers whether an optional GPU kernel library can be used (import flag {}): where CUDA is absent it "
             "answers no and callers skip the library; this file turns the answer into no device"),
    Lowering(frozenset({OTHER_TORCH_CUDA_API}), lambda site: cuda_queries.quiet_query(
        site.context.tree, site.context.lines, site.line), "info",
             "{} answers False or 0 where CUDA is absent (measured on the CPU build of torch 2.13): the query "
             "raises nothing and chooses no \"cuda\" device; a CUDA call it guards is reported at its own line"),
    Lowering(frozenset({OTHER_TORCH_CUDA_API}), lambda site: site.file.mentions("torch.backends.cuda.preferred_")
             and cuda_queries.quiet_setting(site.context.tree, site.context.lines, site.line), "info",
             "{} raises nothing where CUDA is absent (measured on the CPU build of torch 2.13): it only picks "
             "a CUDA library, which other devices ignore"),
    Lowering(frozenset({CUDA_AUTOCAST}), lambda site: site.file.mentions("autocast") and autocast_gate.enabled_only_on_cuda(
        site.file.whole().tree, site.line), "info",
             "autocast is enabled only where `{}` holds, a test that the tensors are on CUDA: elsewhere the code "
             "itself turns it off and runs in the model's dtype; no device is chosen"),
    Lowering(_CHECK, lambda site: site.file.mentions("synchronize") and timing_log.only_logged(site.file.whole().tree,
                                                                                               site.line), "info",
             "guards only a synchronize of a timed region whose figure is only logged or printed: where CUDA is "
             "absent at most the logged time is less exact; nothing returned or stored depends on it"),
    Lowering(_CHECK, _availability_probe, "info",
             "the function is itself a CUDA availability probe: where CUDA is absent it answers \"not available\" "
             "and its callers take their other path"),
    Lowering(_CHECK, _at_line(_guards_only_a_check), "info",
             "guards only a call that checks or reports (its result unused): skipping it where CUDA is absent "
             "changes nothing"),
    Lowering(_QUERY, lambda site: _only_in_text(site.context, site.line, site.finding.rule_id), "info",
             "the CUDA query only becomes text (an f-string naming no device, or a log or print argument): "
             "no device is chosen"),
    Lowering(_QUERY, _shown_query, "info",
             "the CUDA query is stored in {}, which only log or print calls read: no device is chosen"),
    Lowering(_CHECK, _display_flag, "info",
             "the flag {} is read only to decide what a log or progress bar shows"),
    Lowering(_CHECK, _at_line(_seeds_what_manual_seed_seeded), "info",
             "seeds CUDA after torch.manual_seed, which already seeds every device: skipping it changes nothing"),
    Lowering(frozenset({CUDA_DEVICE_MANAGEMENT}), _at_line(_count_shares_cpu_workers), "info",
             "the CUDA device count only shares the CPUs among data-loader workers: the data is the same"),
    Lowering(_EVERY_RULE, _stopped_by_cuda_assert, "info",
             "after an assert on torch.cuda in the same block: where CUDA is absent the assert stops first "
             "(it is the lock-in, reported at its own line)"),
    Lowering(_EVERY_RULE, lambda site: site.file.mentions("init_process_group") and distributed_path.after_nccl_group(
        site.file.whole(), site.line), "info",
             "after init_process_group with the NCCL backend (line {}), which needs NVIDIA GPUs: where CUDA is "
             "absent it fails first (it is the lock-in, reported at its own line)"),
    Lowering(frozenset({CUDA_DEVICE_MANAGEMENT}), lambda site: site.file.mentions("set_device")
             and distributed_path.count_divides_for_set_device(site.file.whole(), site.line), "info",
             "the CUDA device count only divides a rank for torch.cuda.set_device (line {}): where CUDA is absent "
             "`% 0` raises before it, on a per-GPU path that set_device ties to CUDA (reported at its own line)"),
    Lowering(_EVERY_RULE, _function_after_cuda_assert, "info",
             "in {}, which this file uses only after an assert on CUDA: where CUDA is absent the assert stops "
             "first (it is the lock-in, reported at its own line)"),
    Lowering(_EVERY_RULE, lambda site: site.file.mentions("is_available()") and site.file.mentions("raise")
             and after_cuda_exit.refused_before(site.file.whole(), site.line), "info",
             "reached only for a request that the function refuses earlier where CUDA is absent (the raise at {})"),
    Lowering(_EVERY_RULE, _private_past_cuda_exit, "info",
             "in {}, which this file calls only after `if not torch.cuda.is_available(): return` (or raise, or an "
             "exit, also in its `if __name__ == \"__main__\":` block): where CUDA is absent the caller stops first"),
    Lowering(_EVERY_RULE, lambda site: site.file.search(cuda_stream_argument.ANNOTATION_HINT) is not None
             and cuda_stream_argument.reached_with_cuda_handle(site.file.whole(), site.line), "info",
             "reached only once {} holds a CUDA stream or event (typed so, or None): one cannot be made where "
             "CUDA is absent, and where it is made is reported at its own line"),
    Lowering(_EVERY_RULE, _in_class_asserting_cuda, "info",
             "in a class whose __init__ asserts on torch.cuda: where CUDA is absent the assert stops first (it "
             "is the lock-in, reported at its own line)"),
    Lowering(_CHECK, lambda site: _guards_only_cuda_tuning(site.context, site.line, site.file.whole), "info",
             "guards only CUDA tuning or bookkeeping (TF32/cuDNN flags, emptying the CUDA cache, the \"spawn\" "
             "start method CUDA needs, a CUDA-graphs step mark, keeping a CUDA memory reading or showing it in a "
             "log or print call): skipping it where CUDA is absent changes no result"),
    Lowering(frozenset({CUDA_TENSOR_TYPE}), _at_line(_names_a_tensor_type_only), "info",
             "the CUDA tensor type is only named in a type or compared with: no tensor is made"),
    Lowering(frozenset({CUDA_TENSOR_TYPE}), _at_line(_isinstance_type_test), "silent",
             "only an isinstance test against a CUDA tensor type: it raises on no build, and is False for another "
             "accelerator's tensors, so what it guards silently does not run there"),
    Lowering(_CHECK, _at_line(_after_accelerator_detection), "info",
             "an elif after torch.accelerator detection: reached only where no other accelerator was found"),
    Lowering(_CHECK, _at_line(_only_in_an_error_message), "info",
             "its value is read only in the message of a raise: it describes the failure, no device is chosen"),
    Lowering(frozenset({TRITON_KERNEL}), _at_line(_alternative_import), "info",
             "the same names imported again from the same package (another version's location): one lock-in, "
             "reported at the first import"),
    Lowering(frozenset({CUDA_EVENT}), _at_line(_type_alias), "info",
             "a type alias: it names CUDA events, creates none"),
    Lowering(_DEVICE_STRING, _at_line(_cupy_branch), "info",
             "names the device of a CuPy array, which is always a CUDA device: no device is chosen"),
    Lowering(_DEVICE_STRING, _capability_table_entry, "info",
             "an entry of a capability table: other {} calls in this file list other device types, so the list "
             "says which devices support the entry, not where work runs"),
    Lowering(_DEVICE_STRING, _at_line(device_compare.only_compared), "info",
             "the \"cuda\" device is only compared with (torch.device(\"cuda\") needs no GPU, and the comparison "
             "answers False where CUDA is absent): no device is chosen on this line"),
    Lowering(_DEVICE_STRING, lambda site: site.file.mentions("spawn") and spawn_defaults.filled_by_spawn(
        site.file.whole(), site.line, site.finding.column), "info",
             "default only: {} is started only by torch.multiprocessing's spawn, whose args= fill this parameter"),
    Lowering(_EVERY_RULE, _guarded_by_device_test, "info",
             "reached only when `{}` holds, a test that the device is CUDA (or XLA): elsewhere this line does not "
             "run"),
    Lowering(_EVERY_RULE, _cuda_tensor_unit, "info",
             "used in this file only where the tensors are on CUDA (an is_cuda or device-type route); elsewhere "
             "the file's other path runs"),
    Lowering(_EVERY_RULE, _public_function_for_cuda_tensors, "info",
             "in {}, which this file calls only under a device test (CUDA tensors or a CUDA device); elsewhere "
             "the file's other path runs"),
    Lowering(_EVERY_RULE, _in_cuda_guarded_function, "info",
             "in a function wrapped by {}, which returns without calling it where CUDA is absent"),
    Lowering(_EVERY_RULE, _in_cuda_kernel_of_an_op, "info",
             "in {}, registered with torch.library as an op's CUDA kernel: the dispatcher runs it only for CUDA "
             "tensors"),
    Lowering(frozenset({CUDA_DEVICE_PROPERTIES}), lambda site: site.file.mentions("device_count")
             and _names_of_no_device(site.file.whole(), site.line), "info",
             "asked only for each CUDA device, into a list read only with entries added to it (`+ [\"cpu\"]`): "
             "where CUDA is absent nothing is asked and nothing breaks"),
    Lowering(frozenset({CUDA_DEVICE_PROPERTIES}), _in_whole_file(_for_a_cuda_build), "info",
             "reads the GPU's compute capability for a JIT build of CUDA sources: the build is the lock-in, "
             "reported at its load()"),
    Lowering(frozenset({NVIDIA_TOOLING}), _nvidia_smi_looked_up, "info", "{}"),
    Lowering(_EVERY_RULE - _DEVICE_STRING, _at_line(FileContext.in_swallowing_try), "info",
             "inside a try whose broad except neither re-raises nor exits: the error is caught"),
    Lowering(_EVERY_RULE, _at_line(_in_nvidia_library_code), "info",
             "in code built on an NVIDIA-only library (TensorRT, GPUDirect Storage, NVML, CUTLASS): CUDA by design"),
    Lowering(_EVERY_RULE, _at_line(_named_for_nvidia_feature), "info",
             "in a class or function named for an NVIDIA-only feature (TensorRT, GPUDirect Storage, NVML): CUDA "
             "by design"),
    Lowering(_EVERY_RULE, _at_line(_in_report_function), "info",
             "in a function that reports the environment: diagnostics only"),
    Lowering(_EVERY_RULE, lambda site: bool(_REPORT_MODULE.search(site.file.path.replace(os.sep, "/"))), "info",
             "in a module that reports the environment (a collect_env, an `env`, `info` or `doctor` command): "
             "diagnostics only"),
    Lowering(_CHECK, _at_line(_syncs_after_extension_op), "perf",
             "guards only a synchronize after a compiled op, outside any timing: it waits for the kernel, which "
             "changes speed, not results"),
    Lowering(frozenset({CUDA_DEVICE_MANAGEMENT}), _at_line(_count_handed_to_a_launcher), "perf",
             "a CUDA device count handed on as a number of processes or devices: off CUDA less runs in parallel, "
             "with the same result"),
    Lowering(_DEVICE_STRING, _at_line(_falls_back_to_cpu), "silent",
             "falls back to the CPU where CUDA is absent: no error, but the work silently runs on the CPU instead "
             "of another accelerator"),
    Lowering(_EVERY_RULE, _at_line(_under_cuda_flag_expression), "info",
             "the chosen branch of a conditional on a CUDA flag: runs only when CUDA was asked for"),
    Lowering(_EVERY_RULE, _at_line(_opt_in_flag), "info", "only when the caller opts in with {}=True (off by default)"),
    Lowering(_EVERY_RULE, _naive_model_parallel, "info",
             "only after parallelize(), the opt-in model parallelism over several CUDA devices "
             "(model_parallel is False until it is called)"),
    Lowering(_EVERY_RULE, _cuda_flag_statement, "info",
             "only under `if {}:`, a CUDA flag this file never turns on by default: runs only when CUDA was asked "
             "for"),
    Lowering(_EVERY_RULE, _class_flag, "info",
             "only when the caller opts in with {}=True: the class takes it as a parameter that is off by default"),
    Lowering(_EVERY_RULE, _cli_flag, "info", "only when the user passes {} on the command line (off by default)"),
    Lowering(_CHECK, _at_line(_pins_only), "perf",
             "guards only pin_memory(): pinned host memory speeds the copy, nothing else"),
    Lowering(_CHECK, _at_line(_unread_flag), "info", "the flag this check is stored in is never read in this file"),
    Lowering(_EVERY_RULE, _unread_local, "info",
             "stored in {} and never read: the value is computed and dropped, so nothing runs differently"),
    Lowering(_CHECK, _check_decides("error"), "error", "{}"),
    Lowering(_CHECK, _check_decides("info"), "info", "{}"),
    Lowering(_CHECK, _check_decides("perf"), "perf", "{}"),
    Lowering(_F64, _at_line(_built_then_recast), "info",
             "a module built in float64 on the CPU and recast to its data's dtype (self.to(dtype=...)) before it "
             "runs"),
    Lowering(_F64, _at_line(_skips_mps), "perf",
             "float64 only where the device is not MPS: the MPS error cannot happen"),
    Lowering(_F64, _at_line(_on_a_cuda_literal), "info",
             "float64 on a \"cuda\" device literal: the device string fails first elsewhere and is reported on this "
             "line"),
    Lowering(_EVERY_RULE, _at_line(_cuda_or_environment), "info",
             "only where CUDA or ROCm is present, or when the user opts in through the environment ({}; off unless set)"),
    Lowering(_EVERY_RULE, _at_line(_environment_flag), "info",
             "only when the user opts in through the environment ({}; off unless set)"),
    Lowering(_F64, _at_line(_qt_event_double), "info",
             "`.double()` of a Qt event handler's event (was it a double click?): not Tensor.double()"),
    Lowering(_F64, _at_line(_new_cpu_float64), "info",
             "float64 in a tensor made without a device: it is on the CPU, where float64 works"),
    Lowering(_F64, _at_line(_dtype_table_entry), "info",
             "a dtype table entry: it makes no tensor; float64 comes out only for a caller that asks for it"),
    Lowering(_F64, _at_line(_dtype_choice), "info",
             "float64 only where a dtype option (or the inputs' dtype) chooses it; the default path keeps its dtype"),
    Lowering(_F64, _at_line(_cached_constant), "info",
             "float64 in a cached function of non-tensor arguments that names no device: a constant made on the "
             "CPU, cast and moved by its callers"),
    Lowering(_F64, _at_line(_handed_without_device), "info",
             "float64 handed to a function with no device, its result never moved here: the tensors are made on "
             "the CPU, where float64 works"),
    Lowering(_F64, lambda site: site.file.mentions("mps") and float64_device.run_on_cpu_for_mps(site.file.whole(), site.line),
             "perf",
             "float64 in a function this file only hands to {}, which runs it on CPU copies where the device is "
             "MPS: the MPS error cannot happen"),
    Lowering(_F64, lambda site: site.file.mentions("mps") and float64_device.moved_to_cpu_on_mps(site.file.whole(),
                                                                                               site.line), "perf",
             "float64 on a tensor moved first to {}, which is the CPU where the device is MPS: the MPS error "
             "cannot happen"),
    Lowering(_F64, lambda site: float64_device.handed_to_a_function(site.context, site.line)
             and float64_device.dtype_lowered_on_mps(site.file.whole(), site.line, site.file.path), "perf",
             "the float64 dtype goes through {}, which returns another dtype where the device is MPS: the MPS "
             "error cannot happen"),
    Lowering(_F64, lambda site: site.file.mentions("mps") and float64_device.in_branch_off_mps(site.file.whole(),
                                                                                              site.line), "perf",
             "float64 in the branch of a device test ({}) that MPS does not take: the MPS error cannot happen"),
    Lowering(_F64, lambda site: site.file.mentions("mps") and float64_device.replaced_on_mps_next(site.file.whole(),
                                                                                                 site.line), "perf",
             "a float64 dtype stored and replaced at once where the device is MPS ({}): the MPS error cannot "
             "happen"),
    Lowering(_F64, lambda site: site.file.mentions("mps") and float64_device.raised_on_mps_before(site.file.whole(),
                                                                                                site.line), "perf",
             "float64 after an `if <device is MPS>: raise` ({}) in its function: where the device is MPS the "
             "function raises first, so the float64 never runs there"),
    Lowering(_F64, lambda site: (site.file.mentions(".type") or site.file.mentions("is_cpu"))
             and float64_device.chosen_only_on_cpu(site.file.whole(), site.line), "info",
             "float64 in a private function this file calls only where its inputs are on the CPU (the test at {}): "
             "float64 works there"),
    Lowering(_F64, lambda site: _PLACED.search(site.context.lines[site.line - 1]) is not None
             and float64_device.placed_on_cuda_or_cpu(site.file.whole(), site.line, site.file.path), "perf",
             "float64 on a tensor or module made on or moved to {}, which is CUDA or the CPU wherever it is set, "
             "never MPS: on a Mac it runs on the CPU, where float64 works (the device choice is the finding)"),
    Lowering(_F64, _in_whole_file(float64_device.on_cpu_by_construction), "info",
             "float64 on a tensor traced back to the CPU ({}: moved there or made there without a device), through "
             "this file's private functions: float64 works there"),
    Lowering(_F64, lambda site: "set_default" in site.context.lines[site.line - 1]
             and float64_device.default_dtype_in_deviceless_file(site.file.whole(), site.line), "info",
             "a float64 default dtype in a file that names no device and moves no tensor: what it makes is on "
             "the CPU, where float64 works"),
    Lowering(_F64, _lammps_code, "info",
             "code for LAMMPS, whose devices are the CPU or CUDA/HIP (Kokkos): MPS, the one device without float64, "
             "never runs it"),
    Lowering(_EVERY_RULE, _nvidia_runtime_module, "info",
             "in a module built on {}, a runtime that exists only for NVIDIA GPUs: CUDA by design", needs_tree=False),
    Lowering(_EVERY_RULE, lambda site: site.file.search(nvidia_runtime.MAY_IMPORT) is not None
             and nvidia_runtime.reached_after_use(site.file.whole(), site.line), "info",
             "reached only after {}, a runtime that exists only for NVIDIA GPUs (imported under a guard, None "
             "elsewhere): CUDA by design"),
    Lowering(_EVERY_RULE, lambda site: optional_native.is_build_script(site.file.path, site.file.text), "info",
             "in a setuptools build script inside the package: installing the package never runs it, a user "
             "builds with it by hand", needs_tree=False),
    Lowering(_EVERY_RULE, _in_build_only_command, "info",
             "in `{}`, a command that only builds the package's extensions ahead of time: it runs only when the "
             "user invokes it"),
    Lowering(frozenset({CUDA_SOURCE_FILE, NON_HIPIFIABLE_CODE}),
             lambda site: optional_native.optional_build(site.file.path), "info",
             "optional: built only {}; a user who does not opt in never builds it", needs_tree=False),
    Lowering(frozenset({CUDA_SOURCE_FILE, NON_HIPIFIABLE_CODE}), _extension_with_device_twins, "info",
             "the CUDA build of an extension whose loader picks a build per device ({} beside it): a device "
             "dispatch, not a lock-in", needs_tree=False),
    Lowering(frozenset({CUDA_MANUAL_SEED}), _at_line(_seeded_by_manual_seed), "info",
             "seeds CUDA after torch.manual_seed, which already seeds every device; off CUDA the call does nothing"),
    Lowering(frozenset({CUDA_MANUAL_SEED}), lambda site: _SEEDS_EVERY_DEVICE.match(
        "".join(site.context.lines[site.line:site.line + 2])) is not None
        and _seeded_next(site.file.whole(), site.line), "info",
             "seeds CUDA just before torch.manual_seed, which seeds every device again; off CUDA the call does "
             "nothing"),
    Lowering(frozenset({CUDA_DEVICE_MANAGEMENT}), lambda site: site.finding.detail == "torch.cuda.device_of()", "info",
             "torch.cuda.device_of(x) selects x's CUDA device only when x is a CUDA tensor; for any other tensor "
             "it does nothing (checked on torch 2.13's CPU build), so nothing fails or changes off CUDA",
             needs_tree=False),
    Lowering(frozenset({CUDA_DEVICE_MANAGEMENT}), lambda site: site.finding.detail == "torch.cuda.device_count()"
             and site.file.search(_RAISE_IN_TEXT) is not None and _raised_count(site.file.whole(), site.line), "info",
             "where CUDA is absent the count is 0 and the program raises its own error ({}): CUDA is required "
             "explicitly, nothing runs silently (torch.accelerator.device_count() counts any accelerator)"),
    Lowering(_EVERY_RULE, _opt_in_option, "info", OPT_IN_REASON),
    Lowering(frozenset({CUDA_AUTOCAST, CUDA_GRAD_SCALER}),
             lambda site: _ENABLED_KEYWORD.search("".join(site.context.lines[site.line - 1:site.line + 3]))
             and default_path.enabling_option(site.file.whole(), site.line, site.finding.column), "info",
             OPT_IN_PREFIX + "`{}` is set does this call turn mixed precision on (`enabled=`): a user option that "
             "nothing in this file turns on by default, and with it off the call does nothing on any device"),
    Lowering(_EVERY_RULE, _cuda_derived_option, "info",
             "guarded by `{}`, which this file computes from CUDA (availability, a GPU count, or a device test "
             "that sets it): where CUDA is absent the other path runs"),
    Lowering(frozenset({CUDA_DEVICE_MANAGEMENT}), lambda site: site.file.mentions("DataParallel")
             and _count_gates_data_parallel(site.file.whole(), site.line), "perf",
             "the CUDA device count only decides whether DataParallel splits the model over several CUDA GPUs: "
             "elsewhere the model runs unwrapped on its one device, with the same results (slower only on a "
             "host with several XPUs, which DataParallel also splits over)"),
    Lowering(_CHECK, _at_line(_none_for_a_wrapper_elsewhere), "info",
             "only chooses the CUDA device ids DDP, FSDP or a barrier gets: where CUDA is absent they get None, "
             "which is what they take for a module on any other device; the module's device is chosen elsewhere"),
    # last: a louder answer only where no quieter one applies
    Lowering(frozenset({CUDA_DEVICE_MANAGEMENT}), lambda site: site.finding.detail == "torch.cuda.device_count()"
             and _may_assert_cuda(site) and _asserted_count(site.file.whole(), site.line), "error",
             "{}: where CUDA is absent the count is 0 and the assert stops the program, the lock-in to change "
             "(torch.accelerator.device_count() counts any accelerator)"),
)


def _lower_first(file: _File, findings: list[Finding], lowerings: tuple[Lowering, ...]) -> list[Finding]:
    """Lower each finding by the first of ``lowerings`` that applies; the findings left above info."""
    for finding in findings:
        site = _Site(file, finding)
        for lowering in lowerings:
            if finding.rule_id not in lowering.rules or (lowering.needs_tree and file.context is None):
                continue
            answer = lowering.applies(site)
            if answer:
                reason = lowering.reason.format(answer) if isinstance(answer, str) else lowering.reason
                _lower(finding, lowering.severity, reason)
                break
    return [f for f in findings if f.severity_cap != "info"]


def apply(tree: ast.Module | None, text: str, path: str, findings: list[Finding], disk_path: str | None = None) -> None:
    """Lower, in place, the error/silent findings of one file whose shape the judges
    found mostly wrong (see docs/precision/policy.md).  ``path`` is the file as reported,
    ``disk_path`` where to find it and its package (some readings look at the package's other
    modules; without it they lower nothing)."""
    strong = [f for f in findings if is_hot(f)]
    # A check round 26 found to choose no device may still guard what fails without it. One
    # finding a line: a second finding of one rule on one line is info anyway.
    chose_nothing = list({f.line: f for f in reversed(findings) if f.rule_id == CUDA_AVAILABILITY_CHECK
                          and f.severity_cap == "info"
                          and f.cap_reason in (ADAPTS_BESIDE_A_CPU_TEST, BUILD_FACT)}.values())
    if not strong and not chose_nothing:
        return
    file = _File(tree, text, path, findings)
    file.disk_path = disk_path
    if file.context is not None:
        fails = _check_decides("error")
        for finding in chose_nothing:
            reason = fails(_Site(file, finding))
            if reason:
                _lower(finding, "error", reason)
    # a file in a GPU suite may be a test only on its path from the project's root (scanned from inside `tests/`)
    if is_test_file(path) or (file.context is not None and file.gpu_named_test):
        strong = _lower_first(file, strong, TEST_FILE_LOWERINGS)
    _repeats_in_statement(strong)
    _lower_first(file, [f for f in strong if f.severity_cap != "info"], LOWERINGS)
    if file.context is not None:
        _ddp_ids_after_cuda_tie(file, [f for f in strong if is_hot(f)])
        _kernels_for_other_devices(file, [f for f in strong if worst_of(f) == "error"])


def _kernels_for_other_devices(file: _File, strong: list[Finding]) -> None:
    """A torch.library registration for CUDA alone of an op that the file gives other kernels
    too: one every device uses (``custom_op`` without ``device_types``, ``impl(..., "default")``)
    makes it an override that changes nothing elsewhere (info); one for the CPU, MPS, XPU or XLA
    makes it fine there (Finding.fine_on), and still an error on the targets with none.  Only
    registrations the module surely runs on import count (library_ops.Registration.unconditional)."""
    registered = [f for f in strong if f.rule_id == CUDA_DEVICE_STRING and f.detail.endswith(CUDA_ONLY_KERNEL)]
    if not registered:
        return
    found = library_ops.registrations(file.whole().tree)
    for finding in registered:
        mine = next((r for r in found if r.call.lineno <= finding.line <= (r.call.end_lineno or r.call.lineno)
                     and r.devices == {"cuda"}), None)
        if mine is None:
            continue
        others = [r for r in found if r.op == mine.op and r is not mine and r.unconditional]
        every = next((r for r in others if library_ops.EVERY_DEVICE in r.devices), None)
        if every is not None:
            _lower(finding, "info", f"the op also has a kernel that every device uses (line {every.line}): this "
                                    "registration only replaces it for CUDA")
            continue
        served = {library_ops.TARGET_OF_DEVICE[device]: r.line for r in others for device in sorted(r.devices)
                  if device in library_ops.TARGET_OF_DEVICE}
        if served:
            finding.fine_on = frozenset(served)
            finding.detail += "; the op has its own kernel for " + ", ".join(
                f"{target} (line {line})" for target, line in sorted(served.items()))


_DDP_IDS = "device_ids= of DistributedDataParallel"


def _ddp_ids_after_cuda_tie(file: _File, strong: list[Finding]) -> None:
    """``DDP(model, device_ids=[local_rank])`` on a path that CUDA already ties, by a finding still at
    error after the other lowerings: the NCCL backend or ``set_device`` earlier in the same function
    or in a method of the same class (the class sets up a CUDA process group), or a CUDA device string
    that places the module DDP wraps (``model = model.to(f"cuda:{rank}")``, ``DDP(model.cuda(...))``)
    in the same function.  DDP takes ``device_ids`` for a module on any one accelerator and refuses
    them only for a module on the CPU, so the line fails only where that choice sent the module; the
    choice is the lock-in and is reported.  A default another file may replace is not such a tie."""
    wrapped = [f for f in strong if f.rule_id == CUDA_DEVICE_MANAGEMENT and f.detail == _DDP_IDS]
    if not wrapped:
        return
    ties = [f for f in file.findings if worst_of(f) == "error" and f.default_of is None and (
        f.rule_id in (NCCL_BACKEND, CUDA_DEVICE_STRING)
        or (f.rule_id == CUDA_DEVICE_MANAGEMENT and "set_device" in f.detail))]
    if not ties:
        return
    context = file.whole()

    def scopes(line: int) -> tuple[ast.AST | None, ast.AST | None]:  # the function, and its class if a method
        found = context.enclosing(line)
        index = next((i for i in range(len(found) - 1, -1, -1)
                      if isinstance(found[i], (ast.FunctionDef, ast.AsyncFunctionDef))), None)
        if index is None:
            return None, None
        owner = found[index - 1] if index > 0 and isinstance(found[index - 1], ast.ClassDef) else None
        return found[index], owner

    def tied(tie: Finding, function: ast.AST, owner: ast.AST | None, line: int, wrapped_name: str) -> bool:
        tie_function, tie_owner = scopes(tie.line)
        if tie.rule_id != CUDA_DEVICE_STRING:  # NCCL or set_device: the run's CUDA set-up
            return (tie_function is function and tie.line < line) or (owner is not None and tie_owner is owner)
        text = context.lines[tie.line - 1]
        return tie_function is function and tie.line <= line and bool(wrapped_name) and bool(
            re.search(rf"(?<![\w.]){re.escape(wrapped_name)}\s*(=[^=]|\.(to|cuda)\()", text))

    for finding in wrapped:
        function, owner = scopes(finding.line)
        if function is None:
            continue
        call = next((n for n in walk_nodes(function) if isinstance(n, ast.Call) and n.lineno <= finding.line
                     <= (n.end_lineno or n.lineno) and any(k.arg == "device_ids" for k in n.keywords)), None)
        module = context.source(call.args[0]) if call is not None and call.args else ""
        placed = re.fullmatch(r"([\w.]+?)(?:\.(?:to|cuda)\(.*\))?", module, re.DOTALL)  # `model`, `model.to(d)`
        wrapped_name = placed.group(1) if placed else ""

        lines = [t.line for t in ties if tied(t, function, owner, finding.line, wrapped_name)]
        if lines:
            line = min(lines, key=lambda tied_line: (abs(tied_line - finding.line), tied_line))
            _lower(finding, "info", "DistributedDataParallel takes device_ids for a module on any one accelerator "
                                    "and refuses them only for a module on the CPU: the choice that ties this "
                                    f"path to CUDA is reported at line {line}")
