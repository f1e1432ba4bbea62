"""What a CUDA availability or device-type check decides, read from the code it guards.

A check is lock-in when it decides where work runs (a device, a move), whether a timing is
synchronised or which RNG state is kept: elsewhere that is silently lost.  It is not when what it
guards exists only on CUDA and nothing is lost elsewhere (cuDNN and TF32 switches, emptying the CUDA
cache, pinned memory and non-blocking copies, CUDA seeding after ``torch.manual_seed``), and it is
not silent when the path taken without CUDA raises.

Nor is it lock-in when the check decides no device at all: the value of ``pin_memory=``, a
``synchronize()`` that no clock around it reads, the ``map_location`` of a checkpoint the function
copies into a model with ``load_state_dict`` (which keeps the model's device), or settings the class
reads only for tensors already on CUDA.

What the guarded statements do is read from the findings scan already made on them: a statement
counts as CUDA-only tuning when it holds a finding and every finding in it belongs to a tuning rule.
A flag that stores the check (``non_blocking = torch.cuda.is_available()``,
``self.use_pinned = torch.cuda.is_available() and ...``) is followed to every read in its function,
class or module.  Whatever cannot be read this way keeps the check as it was: nothing is lowered on
ignorance.  No package, option or function of an app is known by name; the CUDA-only libraries
are those packages.py lists.
"""
from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from torchport.scan import host_move, packages
from torchport.scan.detectors.distributed import DistributedDetector
from torchport.scan.detectors.syntax import byte_column, last_name, names_the_cpu
from torchport.scan.model import Finding
from torchport.scan.rules import (
    CUDA_EMPTY_CACHE,
    CUDA_MANUAL_SEED,
    CUDNN_FLAGS,
    NON_BLOCKING_COPY,
    PIN_MEMORY,
    TF32_FLAGS,
)

if TYPE_CHECKING:
    from torchport.scan.policy import FileContext

# Rules whose findings are settings that exist only on CUDA: skipping them elsewhere loses nothing.
_TUNING_RULES = frozenset({CUDNN_FLAGS, TF32_FLAGS, CUDA_EMPTY_CACHE, PIN_MEMORY, NON_BLOCKING_COPY})
# The keywords scan's own copy-tuning detectors read (`non_blocking=`, `pin_memory=`): a flag handed
# to one only decides how a copy is made, not where the data goes.
_COPY_TUNING_KEYWORDS = frozenset(DistributedDetector.KEYWORDS)

ERROR = "error"
PERF = "perf"
INFO = "info"


@dataclasses.dataclass(frozen=True)
class Consequence:
    severity: str
    reason: str


# -- the tree around a finding ------------------------------------------------------------------

def _byte_column(context: FileContext, finding: Finding) -> int:
    """The finding's column counted in bytes, as the ast counts: findings count characters."""
    return byte_column(context.line_text(finding.line), finding.column)


def _contains(node: ast.AST, line: int, column: int) -> bool:
    """Whether the 1-based byte ``column`` of ``line`` lies in ``node``'s span."""
    start = (node.lineno, node.col_offset)  # type: ignore[attr-defined]
    end = (node.end_lineno or node.lineno, node.end_col_offset or 0)  # type: ignore[attr-defined]
    return start <= (line, column - 1) < end


def _innermost_statement(context: FileContext, line: int, column: int) -> ast.stmt | None:
    around = [s for s in context.statements if isinstance(s, ast.stmt) and _contains(s, line, column)]
    return max(around, key=lambda s: (s.lineno, s.col_offset), default=None)


def _operand(test: ast.expr, line: int, column: int) -> tuple[ast.expr, bool, bool] | None:
    """The operand of ``test``'s ``and``/``or``/``not`` that holds the finding, whether the test
    holds only where it holds (``a and check``) and whether it holds wherever it fails
    (``not check or a``)."""
    node, negated, only_when, whenever_not = test, False, True, True
    while True:
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            node, negated = node.operand, not negated
            continue
        if isinstance(node, ast.BoolOp):
            inner = next((v for v in node.values if _contains(v, line, column)), None)
            if inner is None:
                return None
            # seen from the check's side: `and` keeps "only when", `or` keeps "whenever"
            if isinstance(node.op, ast.And) != negated:
                whenever_not = False
            else:
                only_when = False
            node = inner
            continue
        break
    if not isinstance(node, (ast.Call, ast.Attribute, ast.Name, ast.Compare)):
        return None  # the check sits deeper (a comprehension, a conditional expression): read no further
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.NotEq, ast.IsNot,
                                                                                          ast.NotIn)):
        negated = not negated  # `device.type != "cuda"`
    elif isinstance(node, ast.Compare) and not (len(node.ops) == 1 and isinstance(
            node.ops[0], (ast.Eq, ast.Is, ast.In, ast.Gt, ast.GtE))):
        return None  # `torch.cuda.device_count() < 2`: read no further
    if negated:
        return node, False, whenever_not
    return node, only_when, False


# -- what a block does ----------------------------------------------------------------------------

class _Reader:
    def __init__(self, context: FileContext, findings: list[Finding], whole: Callable[[], FileContext]) -> None:
        self.context = context
        self.findings = findings
        self.whole = whole
        self.guard: ast.If | None = None  # the check's own `if`, while its body is read

    def _findings_in(self, statement: ast.stmt) -> list[Finding]:
        return [f for f in self.findings if _contains(statement, f.line, _byte_column(self.context, f))]

    def _seeded_before(self, statement: ast.stmt) -> bool:
        """``torch.manual_seed(...)`` earlier in the same function (or module): it seeds every
        device, so the CUDA seeding after it adds nothing elsewhere."""
        parents = self.context.parents
        scope: ast.AST | None = statement
        while scope is not None and not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
            scope = parents.get(id(scope))
        if scope is None:
            return False
        return any(isinstance(n, ast.Call) and n.lineno < statement.lineno
                   and self.context.source(n.func) == "torch.manual_seed" for n in ast.walk(scope))

    def tuning(self, statements: list[ast.stmt], named: list[str]) -> bool:
        """Every statement only changes a CUDA-only setting (or is a no-op); ``named`` collects
        what each sets, for the reason."""
        if not statements:
            return False
        for statement in statements:
            if isinstance(statement, ast.Pass) or (isinstance(statement, ast.Expr)
                                                   and isinstance(statement.value, ast.Constant)):
                continue
            if isinstance(statement, ast.If):
                inner: list[str] = []
                if self.tuning(statement.body, inner) and (not statement.orelse or self.tuning(statement.orelse, inner)):
                    named.extend(inner)
                elif not self._local_only(statement):
                    return False
                continue
            if isinstance(statement, ast.Try):
                handlers = [s for h in statement.handlers for s in h.body]
                if not self.tuning(statement.body, named) or not all(
                        self.tuning(block, named) for block in (handlers, statement.orelse, statement.finalbody)
                        if block):
                    return False
                continue
            if isinstance(statement, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)):
                inside = self._findings_in(statement)
                if inside and all(f.rule_id in _TUNING_RULES or (f.rule_id == CUDA_MANUAL_SEED
                                                                 and self._seeded_before(statement))
                                  for f in inside):
                    named.extend(_what_it_sets(self.context, statement, inside))
                    continue
                if not inside and self._local_only(statement):
                    continue
            return False
        return True

    def _local_only(self, statement: ast.stmt) -> bool:
        """``if deterministic is None: deterministic = os.environ.get(...)`` inside the guard: it
        binds only local names that nothing after the guard reads, and calls nothing of torch."""
        stored: set[str] = set()
        for node in ast.walk(statement):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                stored.add(node.id)
            elif (isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, ast.Store)) or (
                    isinstance(node, ast.Call) and self.context.source(node.func).startswith("torch.")):
                return False
        if not stored:
            return False
        if self.guard is None:
            return False
        whole = self.whole()
        guard = next((s for s in whole.statements if isinstance(s, ast.If) and s.lineno == self.guard.lineno
                      and s.col_offset == self.guard.col_offset), None)
        if guard is None:
            return False
        parents = whole.parents
        scope: ast.AST | None = guard
        while scope is not None and not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
            scope = parents.get(id(scope))
        if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return False  # a module name may be imported elsewhere
        if any(isinstance(n, (ast.Global, ast.Nonlocal)) and stored & set(n.names) or (
                isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and n is not scope
                and any(isinstance(m, ast.Name) and m.id in stored for m in ast.walk(n))) for n in ast.walk(scope)):
            return False  # read by other functions, or by a closure that may run later
        # in a loop, a read before the guard reads it again in the next round
        loop: ast.AST | None = parents.get(id(guard))
        while loop is not None and loop is not scope and not isinstance(loop, (ast.For, ast.AsyncFor, ast.While)):
            loop = parents.get(id(loop))
        start = loop.lineno if isinstance(loop, (ast.For, ast.AsyncFor, ast.While)) else (guard.end_lineno or guard.lineno) + 1
        inside = {id(n) for n in ast.walk(guard)}
        return not any(isinstance(n, ast.Name) and n.id in stored and isinstance(n.ctx, ast.Load) and n.lineno >= start
                       and id(n) not in inside for n in ast.walk(scope))


def _what_it_sets(context: FileContext, statement: ast.stmt, inside: list[Finding]) -> list[str]:
    """``cudnn.benchmark`` for ``cudnn.benchmark = True``, ``torch.cuda.empty_cache()``; else what
    the findings in the statement matched (``.pin_memory()``)."""
    targets = statement.targets if isinstance(statement, ast.Assign) else (
        [statement.target] if isinstance(statement, (ast.AugAssign, ast.AnnAssign)) else [])
    named = [context.source(t) for t in targets if any(_contains(t, f.line, _byte_column(context, f)) for f in inside)]
    value = statement.value if isinstance(statement, ast.Expr) else None
    if isinstance(value, ast.Call) and not named:
        named.append(context.source(value.func) + "()")
    return named or [f.detail for f in inside]


def _ends_in_raise(statements: list[ast.stmt]) -> ast.Raise | None:
    return statements[-1] if statements and isinstance(statements[-1], ast.Raise) else None


def _raised_name(raised: ast.Raise) -> str:
    exception = raised.exc
    if isinstance(exception, ast.Call):
        exception = exception.func
    if isinstance(exception, ast.Name):
        return exception.id
    if isinstance(exception, ast.Attribute):
        return exception.attr
    return "an exception"


def _next_statement(context: FileContext, statement: ast.stmt) -> ast.stmt | None:
    parent = context.parents.get(id(statement))
    for field in ("body", "orelse", "finalbody"):
        block = getattr(parent, field, None)
        if isinstance(block, list) and any(s is statement for s in block):
            index = next(i for i, s in enumerate(block) if s is statement)
            following = block[index + 1] if index + 1 < len(block) else None
            # the scanner parses only some statements of a long function: the next one parsed
            # counts only when nothing but blank lines and comments lies between them
            between = context.lines[(statement.end_lineno or statement.lineno):following.lineno - 1] if following else []
            if following is not None and all(not line.strip() or line.lstrip().startswith("#") for line in between):
                return following
            return None
    return None


def _listing(names: Iterable[str]) -> str:
    unique = list(dict.fromkeys(n for n in names if n))
    shown = ", ".join(unique[:3])
    return shown + (", ..." if len(unique) > 3 else "")


# -- the check's consequence --------------------------------------------------------------------

def _reads(node: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names and isinstance(n.ctx, ast.Load) for n in ast.walk(node))


def _rebinds(statements: list[ast.stmt], names: set[str]) -> bool:
    """The first of ``statements`` binds every one of ``names`` on every path before reading any."""
    if not statements:
        return False
    first = statements[0]
    if isinstance(first, ast.Assign):
        bound = {t.id for t in first.targets if isinstance(t, ast.Name)}
        return names <= bound and not _reads(first.value, names)
    if isinstance(first, ast.If):
        return (not _reads(first.test, names) and _rebinds(first.body, names)
                and _rebinds(first.orelse, names))
    return False


def _overwritten(context: FileContext, statement: ast.If) -> tuple[str, int] | None:
    """``if torch.cuda.is_available: device = torch.device("cuda")`` followed by an if/else that sets
    ``device`` on both paths: what the branch stores is never read.  (The names, the next line.)"""
    if statement.orelse or not statement.body or not all(
            isinstance(s, ast.Assign) and all(isinstance(t, ast.Name) for t in s.targets) for s in statement.body):
        return None
    names = {t.id for s in statement.body if isinstance(s, ast.Assign) for t in s.targets if isinstance(t, ast.Name)}
    following = _next_statement(context, statement)
    if following is None or not _rebinds([following], names):
        return None
    return ", ".join(sorted(names)), following.lineno


def _of_if(reader: _Reader, statement: ast.If, finding: Finding) -> Consequence | None:
    overwritten = _overwritten(reader.context, statement)
    if overwritten is not None:
        return Consequence(INFO, f"decides nothing: what this branch sets (`{overwritten[0]}`) is set again on every "
                                 f"path by the next statement (line {overwritten[1]}) before it is read")
    read = _operand(statement.test, finding.line, finding.column)
    if read is None:
        return None
    _, only_when, _ = read
    if not only_when:
        return None
    # the body runs only where CUDA is: what runs elsewhere is the else branch, or what follows
    raised = _ends_in_raise(statement.orelse)
    if raised is None and not statement.orelse and statement.body and isinstance(
            statement.body[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break)):
        following = _next_statement(reader.context, statement)
        raised = following if isinstance(following, ast.Raise) else None
    if raised is not None:
        return Consequence(ERROR, f"not silent: where CUDA is absent the other branch raises "
                                  f"{_raised_name(raised)} (line {raised.lineno})")
    if statement.orelse:
        return None
    unbound = _unbound_without_cuda(reader, statement, finding)
    if unbound is not None:
        return unbound
    named: list[str] = []
    reader.guard = statement
    if reader.tuning(statement.body, named):
        return Consequence(INFO, f"guards CUDA-only settings ({_listing(named)}): nothing is lost elsewhere")
    return None


def _flag_reads(context: FileContext, statement: ast.Assign | ast.AnnAssign,
                target: ast.expr) -> list[ast.expr] | None:
    """Every read of the flag ``target`` stores: a local in its function, a module name in its
    file (lower-case only: an upper-case constant may be imported elsewhere), ``self.x`` in its
    class.  None when the reads cannot all be found."""
    parents = context.parents
    scope: ast.AST | None = parents.get(id(statement))
    while scope is not None and not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                                       ast.Module)):
        scope = parents.get(id(scope))
    if scope is None:
        return None
    if isinstance(target, ast.Name):
        if isinstance(scope, ast.ClassDef) or (isinstance(scope, ast.Module) and not target.id.islower()):
            return None
        if isinstance(scope, ast.Module):
            return [n for n in ast.walk(scope) if isinstance(n, ast.Name) and n.id == target.id
                    and isinstance(n.ctx, ast.Load)]
        if any(isinstance(n, (ast.Global, ast.Nonlocal)) for n in ast.walk(scope)):
            return None
        return [n for n in ast.walk(scope) if isinstance(n, ast.Name) and n.id == target.id
                and isinstance(n.ctx, ast.Load)]
    if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"
            and isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef))):
        owner = parents.get(id(scope))
        if not isinstance(owner, ast.ClassDef):
            return None
        return [n for n in ast.walk(owner) if isinstance(n, ast.Attribute) and n.attr == target.attr
                and isinstance(n.ctx, ast.Load) and isinstance(n.value, ast.Name) and n.value.id == "self"]
    return None


def _tuning_read(reader: _Reader, read: ast.expr, named: list[str]) -> bool:
    """The flag is handed to a copy-tuning keyword (``non_blocking=flag``), or is a test that,
    where it holds, only changes CUDA-only settings."""
    parents = reader.context.parents
    parent = parents.get(id(read))
    if isinstance(parent, ast.keyword) and parent.arg in _COPY_TUNING_KEYWORDS:
        named.append(f"{parent.arg}=")
        return True
    node: ast.AST = read
    while isinstance(parent, (ast.BoolOp, ast.UnaryOp)) and not (
            isinstance(parent, ast.UnaryOp) and not isinstance(parent.op, ast.Not)):
        node, parent = parent, parents.get(id(parent))
    if not (isinstance(parent, ast.If) and parent.test is node) or parent.orelse:
        return False
    operand = _operand(parent.test, read.lineno, read.col_offset + 1)
    if operand is None or not operand[1]:
        return False
    reader.guard = parent
    return reader.tuning(parent.body, named)


def _of_flag(reader: _Reader, statement: ast.Assign | ast.AnnAssign, finding: Finding) -> Consequence | None:
    targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
    if len(targets) != 1 or statement.value is None:
        return None
    target, value = targets[0], statement.value
    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
        # `non_blocking, start = torch.cuda.is_available(), -1`
        pair = next(((t, v) for t, v in zip(target.elts, value.elts) if _contains(v, finding.line, finding.column)),
                    None)
        if pair is None:
            return None
        target, value = pair
    read = _operand(value, finding.line, finding.column)
    if read is None or not read[1]:
        return None
    context = reader.whole()
    whole_statement = next((s for s in context.statements if isinstance(s, (ast.Assign, ast.AnnAssign))
                            and s.lineno == statement.lineno and s.col_offset == statement.col_offset), None)
    if whole_statement is None:
        return None
    whole_target = (whole_statement.targets[0] if isinstance(whole_statement, ast.Assign) else whole_statement.target)
    if isinstance(whole_target, ast.Tuple):
        whole_target = next((t for t in whole_target.elts if ast.dump(t) == ast.dump(target)), whole_target)
    reads = _flag_reads(context, whole_statement, whole_target)
    if not reads:
        return None
    whole_reader = _Reader(context, reader.findings, reader.whole)
    named: list[str] = []
    if all(_tuning_read(whole_reader, r, named) for r in reads):
        return Consequence(INFO, f"the flag `{context.source(whole_target)}` is read only to turn on CUDA-only "
                                 f"settings ({_listing(named)}): nothing is lost elsewhere")
    return None


def _off_the_cpu(test: ast.expr) -> str | None:
    """``x.device.type != "cpu"`` (or ``x.device != torch.device("cpu")``): the value is on a device
    other than the CPU.  The compared expression's text, else None."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.NotEq, ast.IsNot))):
        return None
    for side, other in ((test.left, test.comparators[0]), (test.comparators[0], test.left)):
        named = other
        if isinstance(named, ast.Call) and len(named.args) == 1 and not named.keywords:
            named = named.args[0]  # torch.device("cpu")
        if (isinstance(named, ast.Constant) and named.value == "cpu" and isinstance(side, ast.Attribute)
                and (side.attr == "device" or (side.attr == "type" and isinstance(side.value, ast.Attribute)
                                               and side.value.attr == "device"))):
            return ast.unparse(test)
    return None


def _names_a_device(node: ast.AST) -> bool:
    """A device string, or a call that moves a value (``.to(...)``, ``.cuda()``, ``.cpu()``)."""
    for inner in ast.walk(node):
        if isinstance(inner, ast.Constant) and isinstance(inner.value, str) and inner.value.split(":")[0] in (
                "cpu", "cuda", "mps", "xpu", "xla", "meta"):
            return True
        if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and inner.func.attr in (
                "to", "cuda", "cpu"):
            return True
    return False


def _repairs_value_off_the_cpu(test: ast.expr, branch: list[ast.AST], finding: Finding) -> str | None:
    """``if not torch.cuda.is_available() and metric.device.type != "cpu": metric = rebuild(metric)``:
    the branch runs where CUDA is absent only for a value already on another device (one saved on a
    CUDA machine), and names no device itself.  The device test, else None."""
    conjunction = None
    for node in ast.walk(test):  # the innermost `and` holding the check, under `or`s at most
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And) and _contains(node, finding.line,
                                                                                       finding.column):
            conjunction = node
    if conjunction is None or not any(
            isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.Not) and isinstance(v.operand, (ast.Call, ast.Attribute))
            and _contains(v.operand, finding.line, finding.column) for v in conjunction.values):
        return None
    if any(isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not) and _contains(n, finding.line, finding.column)
           and n.operand is not None and conjunction in list(ast.walk(n.operand)) for n in ast.walk(test)):
        return None  # `not (not cuda and ...)`
    test = conjunction
    on_device = next((t for v in test.values if (t := _off_the_cpu(v))), None)
    if on_device is None or any(_names_a_device(n) for n in branch):
        return None
    return on_device


def _enclosing_test(context: FileContext, statement: ast.stmt,
                    finding: Finding) -> tuple[ast.expr, list[ast.AST]] | None:
    """The innermost ``if`` or conditional expression whose test holds the check, below or at
    ``statement``: (its test, the branch its test takes)."""
    best: tuple[ast.expr, list[ast.AST]] | None = None
    for node in ast.walk(statement):
        if isinstance(node, (ast.If, ast.IfExp)) and _contains(node.test, finding.line, finding.column):
            branch: list[ast.AST] = list(node.body) if isinstance(node, ast.If) else [node.body]
            if best is None or (node.test.lineno, node.test.col_offset) >= (best[0].lineno, best[0].col_offset):
                best = (node.test, branch)
    return best


def consequence(context: FileContext, findings: list[Finding], finding: Finding,
                whole: Callable[[], FileContext]) -> Consequence | None:
    """What the CUDA check ``finding`` decides, when the code says so plainly: info (it guards only
    CUDA-only settings), error (the path without CUDA raises); None when it cannot be read, or when
    it decides where work runs."""
    # the readers below compare the finding's column with ast offsets, which count bytes
    finding = dataclasses.replace(finding, column=_byte_column(context, finding))
    statement = _innermost_statement(context, finding.line, finding.column)
    if statement is None:
        return None
    reader = _Reader(context, findings, whole)
    tested = _enclosing_test(context, statement, finding)
    if tested is not None:
        on_device = _repairs_value_off_the_cpu(*tested, finding)
        if on_device is not None:
            return Consequence(INFO, f"where CUDA is absent this branch runs only for a value already off the CPU "
                                     f"(`{on_device}`) and names no device: a repair that is "
                                     f"the safe path on every device, nothing is lost")
    keyword = _copy_tuning_keyword(statement, finding)
    if keyword is not None:
        return Consequence(INFO, f"decides no device: it is the value of `{keyword}=`, which decides only how a "
                                 f"copy is made")
    same = _same_either_way(statement, finding)
    if same is not None:
        return same
    moved = _moved_to_the_host(context, statement, finding, whole)
    if moved is not None:
        return moved
    if isinstance(statement, ast.If) and _contains(statement.test, finding.line, finding.column):
        return (_never_taken(statement, finding) or _of_if(reader, statement, finding)
                or _untimed_sync(reader, statement, finding) or _cuda_library_branch(reader, statement, finding)
                or _settings_for_cuda_tensors(reader, statement, finding)
                or _profiler_activity_only(statement, finding) or _shown_branch(reader, statement, finding)
                or _only_logged_or_refused(reader, statement, finding)
                or _staging_only(reader, statement, finding))
    if isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value is not None and _contains(
            statement.value, finding.line, finding.column):
        return (_of_flag(reader, statement, finding) or _shown_flag(reader, statement, finding)
                or _staging_only(reader, statement, finding)
                or _shown_choice(reader, statement, finding) or _loader_processes_choice(reader, statement, finding))
    return (_staging_only(reader, statement, finding) or _shown_choice(reader, statement, finding)
            or _loader_processes_choice(reader, statement, finding))


def _moved_to_the_host(context: FileContext, statement: ast.stmt, finding: Finding,
                       whole: Callable[[], FileContext]) -> Consequence | None:
    """``if x.is_cuda: x = x.cpu()``: a move to the host that only a CUDA value takes
    (host_move.py)."""
    if not (finding.detail == ".is_cuda" or finding.detail.startswith("comparison with")) or (
            "cpu" not in context.source(statement)):
        return None
    file = whole()  # its parent map is built once a file, for every reader that looks up
    move = host_move.only_from_cuda(file.tree, finding.line, file.parents)
    if move is None:
        return None
    if move.needs_host is None:
        return Consequence(INFO, f"moves `{move.subject}` to the host only when it is on CUDA: on another "
                                 "accelerator it stays on its own device with the same values (nothing falls back "
                                 "to the CPU), and the function then only returns it, shows it or reads numbers or its "
                                 "shape from it")
    return Consequence(ERROR, f"not silent: `{move.subject}` is moved to the host only when it is on CUDA, so on "
                              f"another accelerator it stays on its device and line {move.needs_host} then needs "
                              "it on the host (`.numpy()` of a tensor off the CPU raises TypeError); move it with "
                              "`.cpu()` whatever its device")


# -- what a check decides when it decides no device ----------------------------------------------

# Calls that read a clock: a synchronisation in a scope that makes one is part of a timing.
_CLOCK_CALLS = frozenset({"time", "time_ns", "perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns",
                          "process_time", "process_time_ns", "default_timer", "elapsed_time", "timeit"})
# A function or class named for timing (`timeit`, `Benchmark`, `profile_step`) times whatever it syncs.
_TIMING_NAMES = ("time", "bench", "profil")


def _outermost_definition(context: FileContext, node: ast.AST) -> ast.AST | None:
    """The top-level function or class around ``node``; the module when there is none."""
    parents = context.parents
    found: ast.AST | None = None
    scope: ast.AST | None = node
    while scope is not None:
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found = scope
        elif isinstance(scope, ast.Module):
            return found or scope
        scope = parents.get(id(scope))
    return found


def _times_something(scope: ast.AST) -> bool:
    for node in ast.walk(scope):
        if isinstance(node, ast.Call):
            if last_name(node.func) in _CLOCK_CALLS or any(k.arg == "enable_timing" for k in node.keywords):
                return True
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and any(
                word in node.name.lower() for word in _TIMING_NAMES):
            return True
    return False


# Collectives run on a stream of their own: a wait before one may be what makes earlier work finish
# before the collective reads it, and another device's backend may need it too.
_COLLECTIVES = frozenset({"broadcast", "all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
                          "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "send", "recv", "isend",
                          "irecv", "barrier", "reduce", "gather", "scatter", "broadcast_object_list"})


def _orders_async_work(scope: ast.AST) -> bool:
    """A stream or a collective in the scope: the wait may order work across streams."""
    for node in ast.walk(scope):
        name = last_name(node)
        if "stream" in name.lower() or name in _COLLECTIVES:
            return True
    return False


def _same_statement(context: FileContext, statement: ast.stmt) -> ast.stmt | None:
    """``statement`` (parsed from part of the file) in the whole file's tree."""
    return next((s for s in context.statements if type(s) is type(statement) and s.lineno == statement.lineno
                 and s.col_offset == statement.col_offset), None)


_Function = ast.FunctionDef | ast.AsyncFunctionDef


def _in_whole_file(reader: _Reader, statement: ast.stmt) -> tuple[FileContext, ast.stmt, _Function | None] | None:
    """The whole file's tree, ``statement`` in it and the function around it: the readers below
    need the code around a check, which the partial parse leaves out."""
    context = reader.whole()
    whole_statement = _same_statement(context, statement)
    if whole_statement is None:
        return None
    return context, whole_statement, _enclosing_function(context, whole_statement)


def _untimed_sync(reader: _Reader, statement: ast.If, finding: Finding) -> Consequence | None:
    """``if torch.cuda.is_available(): torch.cuda.synchronize()`` followed by more of its function,
    where nothing around it reads a clock, uses a stream or a collective: the wait orders nothing another device would get wrong
    (a log line, an evaluation step); in a timing it would be lock-in, and that stays.  A wait that
    ends its function stays too: its caller may be timing it."""
    read = _operand(statement.test, finding.line, finding.column)
    if read is None or not read[1] or statement.orelse or not statement.body:
        return None
    if not all(isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
               and reader.context.source(s.value.func).endswith(".synchronize") for s in statement.body):
        return None
    found = _in_whole_file(reader, statement)
    if found is None:
        return None
    context, whole_statement, function = found
    scope = _outermost_definition(context, whole_statement)
    if scope is None or _times_something(scope) or _orders_async_work(scope):
        return None
    end = whole_statement.end_lineno or whole_statement.lineno
    if function is not None and not any(isinstance(s, ast.stmt) and s.lineno > end for s in ast.walk(function)):
        return None  # the last thing the function does: the wait serves its caller, which may be timing it
    return Consequence(INFO, "decides no device: it only waits for CUDA work, and nothing in the enclosing "
                             "definition reads a clock, so no timing depends on the wait")


def _copy_tuning_keyword(statement: ast.stmt, finding: Finding) -> str | None:
    """``torch.zeros(..., pin_memory=torch.cuda.is_available())``: the check is the value of a
    copy-tuning keyword, which decides only how a copy is made."""
    for node in ast.walk(statement):
        if isinstance(node, ast.keyword) and node.arg in _COPY_TUNING_KEYWORDS and _contains(
                node.value, finding.line, finding.column):
            return node.arg
    if (isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Subscript)
            and isinstance(key := statement.targets[0].slice, ast.Constant) and key.value in _COPY_TUNING_KEYWORDS
            and _contains(statement.value, finding.line, finding.column)):
        return str(key.value)  # `loader_kwargs["pin_memory"] = torch.cuda.is_available()`
    return None


def _enclosing_function(context: FileContext, node: ast.AST) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    parents = context.parents
    scope: ast.AST | None = parents.get(id(node))
    while scope is not None and not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                                       ast.Module)):
        scope = parents.get(id(scope))
    return scope if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def _as_map_location(context: FileContext, node: ast.AST) -> ast.Call | None:
    """The loading call when ``node`` is its ``map_location=`` (bare or in ``torch.device(...)``)."""
    parents = context.parents
    parent = parents.get(id(node))
    if isinstance(parent, ast.Call) and parent.func is not node and len(parent.args) == 1 and not parent.keywords \
            and context.source(parent.func).split(".")[-1] == "device":
        node, parent = parent, parents.get(id(parent))
    if isinstance(parent, ast.keyword) and parent.arg == "map_location":
        call = parents.get(id(parent))
        return call if isinstance(call, ast.Call) else None
    if (isinstance(parent, ast.Call) and len(parent.args) > 1 and parent.args[1] is node
            and context.source(parent.func) == "torch.load"):
        return parent  # `torch.load(path, map_location)`
    return None


def _loads_of(function: ast.AST, name: str) -> list[ast.Name]:
    return [n for n in ast.walk(function) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]


def _staged_loads(context: FileContext, function: ast.FunctionDef | ast.AsyncFunctionDef, name: str,
                  follow: bool) -> list[ast.Call] | None:
    """The loading calls ``name`` is the ``map_location`` of, when that is all it is read for
    (followed once into a function of the same file it is handed to by keyword); else None."""
    if any(isinstance(n, (ast.Global, ast.Nonlocal)) for n in ast.walk(function)):
        return None
    loads = _loads_of(function, name)
    if not loads:
        return None
    calls: list[ast.Call] = []
    parents = context.parents
    for read in loads:
        call = _as_map_location(context, read)
        if call is not None:
            calls.append(call)
            continue
        keyword = parents.get(id(read))
        handed_to = parents.get(id(keyword))
        if not (follow and isinstance(keyword, ast.keyword) and keyword.arg and isinstance(handed_to, ast.Call)
                and isinstance(handed_to.func, ast.Name)):
            return None
        callee = next((s for s in getattr(context.tree, "body", []) if isinstance(s, (ast.FunctionDef,
                                                                                        ast.AsyncFunctionDef))
                       and s.name == handed_to.func.id), None)
        if callee is None or keyword.arg not in {a.arg for a in callee.args.args + callee.args.kwonlyargs}:
            return None
        inner = _staged_loads(context, callee, keyword.arg, follow=False)
        if inner is None:
            return None
        calls.append(handed_to)
    return calls


# Loads that take a map location: torch.load, torch.hub's and model_zoo's loaders.
_CHECKPOINT_LOADS = ("torch.load", "load_state_dict_from_url", "load_url")


def _is_checkpoint_load(context: FileContext, node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and context.source(node.func).endswith(_CHECKPOINT_LOADS)


def _stages_on_the_cpu(node: ast.AST | None) -> bool:
    """``"cpu"``, ``torch.device("cpu")``, or ``lambda storage, loc: storage`` (each storage as
    deserialized, on the CPU): a map location that puts what is loaded on the CPU."""
    if isinstance(node, ast.Lambda) and node.args.args and isinstance(node.body, ast.Name):
        return node.body.id == node.args.args[0].arg
    return names_the_cpu(node)


def _taken_without_cuda(context: FileContext, test: ast.expr) -> bool | None:
    """Whether the true side of ``test`` is what runs without CUDA (``not torch.cuda.is_available()``),
    False where its false side is (``torch.cuda.is_available() and self.use_gpu``), None where
    the test says neither."""
    def is_check(node: ast.AST) -> bool:
        return isinstance(node, ast.Call) and context.source(node.func).endswith("cuda.is_available")
    if is_check(test):
        return False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and is_check(test.operand):
        return True
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) and any(map(is_check, test.values)):
        return False
    return None


def _choice_stages_on_the_cpu(context: FileContext, value: ast.AST, finding: Finding) -> bool:
    """The conditional that holds the check, in ``value``, gives a CPU map location without CUDA
    (``"cuda" if torch.cuda.is_available() else "cpu"``)."""
    choices = [(n, without) for n in ast.walk(value) if isinstance(n, ast.IfExp)
               and _contains(n, finding.line, finding.column)
               and (without := _taken_without_cuda(context, n.test)) is not None]
    if not choices:
        return False
    choice, without = choices[-1]  # the innermost: ast.walk goes outside in
    return _stages_on_the_cpu(choice.body if without else choice.orelse)


def _map_location_of(call: ast.Call) -> ast.expr | None:
    given = next((k.value for k in call.keywords if k.arg == "map_location"), None)
    return given if given is not None or len(call.args) < 2 else call.args[1]


def _branches_stage(context: FileContext, function: _Function, statement: ast.If) -> list[ast.Call] | None:
    """``if torch.cuda.is_available(): map_location = "cuda"`` ``else: map_location = "cpu"``: the
    loads whose map location is the one name the branches bind; or, where the two branches bind
    the loads themselves (``state = torch.load(path)`` / ``state = torch.load(path,
    map_location="cpu")``), those loads.  Either way what runs without CUDA stages on the CPU."""
    without = _taken_without_cuda(context, statement.test)
    if without is None:
        return None
    names = set()
    bound: list[list[ast.expr]] = []  # the values each branch binds
    for branch in (statement.body, statement.orelse):
        bound.append([])
        for step in branch:
            if not (isinstance(step, ast.Assign) and len(step.targets) == 1 and isinstance(step.targets[0], ast.Name)):
                return None
            names.add(step.targets[0].id)
            bound[-1].append(step.value)
    without_cuda = bound[0 if without else 1]
    if len(names) != 1 or not without_cuda:
        return None  # `if torch.cuda.is_available(): loc = "cuda:0"` over a default that may be "cuda"
    values = [*bound[0], *bound[1]]
    if any(_is_checkpoint_load(context, v) for v in values):
        if not all(_is_checkpoint_load(context, v) for v in values) or not all(bound):
            return None
        if not all(isinstance(v, ast.Call) and _stages_on_the_cpu(_map_location_of(v)) for v in without_cuda):
            return None
        return [v for v in values if isinstance(v, ast.Call)]
    if not all(map(_stages_on_the_cpu, without_cuda)):
        return None
    return _staged_loads(context, function, names.pop(), follow=True)


# Reads of a loaded state dict that only look at it as a mapping: `"model" in ckpt`, `ckpt.keys()`,
# `ckpt.pop(name)` as a statement, `ckpt[name].shape`.
def _only_looked_at(read: ast.Name, parents: dict[int, ast.AST]) -> bool:
    parent = parents.get(id(read))
    if isinstance(parent, ast.Compare) and read in parent.comparators and all(
            isinstance(op, (ast.In, ast.NotIn)) for op in parent.ops):
        return True
    if isinstance(parent, ast.Attribute) and parent.attr in ("keys", "pop"):
        call = parents.get(id(parent))
        if isinstance(call, ast.Call) and call.func is parent:
            return parent.attr == "keys" or isinstance(parents.get(id(call)), ast.Expr)
    if isinstance(parent, ast.Subscript) and parent.value is read:
        above = parents.get(id(parent))
        return isinstance(above, ast.Attribute) and above.attr in ("shape", "dtype")
    return False


def _copied_in_only(context: FileContext, function: _Function, calls: list[ast.Call]) -> ast.Call | None:
    """The ``load_state_dict`` call that copies what ``calls`` load into a module, where that is all
    that is done with it: every read of the name it is bound to is inside such a copy or only looks
    at the mapping.  A copy with ``assign=True`` keeps the loaded tensors, so it does not count."""
    copies = [n for n in ast.walk(function) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
              and n.func.attr == "load_state_dict" and not any(k.arg == "assign" for k in n.keywords)]
    if not copies:
        return None
    parents = context.parents
    copied_in = {id(n) for c in copies for argument in c.args + [k.value for k in c.keywords]
                 for n in ast.walk(argument)}
    for call in calls:
        if id(call) in copied_in:
            continue
        loaded_into = parents.get(id(call))
        if not (isinstance(loaded_into, ast.Assign) and all(isinstance(t, ast.Name) for t in loaded_into.targets)):
            return None
        names = {t.id for t in loaded_into.targets if isinstance(t, ast.Name)}
        reads = [n for n in ast.walk(function) if isinstance(n, ast.Name) and n.id in names
                 and isinstance(n.ctx, ast.Load)]
        # `state = {k.replace("module.", ""): v for k, v in state.items()}`: what is bound again to
        # the same name is held to the same reads
        rebound = {id(n) for a in ast.walk(function) if isinstance(a, ast.Assign) and a.targets and all(
            isinstance(t, ast.Name) and t.id in names for t in a.targets) for n in ast.walk(a.value)}
        if not any(id(n) in copied_in for n in reads) or not all(
                id(n) in copied_in or id(n) in rebound or _only_looked_at(n, parents) for n in reads):
            return None  # a checkpoint used as tensors, returned or stored keeps the staging device
    return copies[0]


def _staging_only(reader: _Reader, statement: ast.stmt, finding: Finding) -> Consequence | None:
    """``device = "cuda" if torch.cuda.is_available() else "cpu"`` read only as the ``map_location``
    of a checkpoint that this function then copies into a model with ``load_state_dict``: the copy
    lands wherever the model is, so the check decides only where the file is staged.  Without CUDA
    the map location must be the CPU: a default or ``None`` may stage on a CUDA device there."""
    if "load_state_dict" not in reader.context.text or "map_location" not in reader.context.text:
        return None  # before the whole file is parsed: most checks are nowhere near a checkpoint
    found = _in_whole_file(reader, statement)
    if found is None:
        return None
    context, whole_statement, function = found
    if function is None:
        return None
    calls: list[ast.Call] | None = None
    if isinstance(whole_statement, ast.Assign) and len(whole_statement.targets) == 1 and isinstance(
            whole_statement.targets[0], ast.Name) and _contains(whole_statement.value, finding.line, finding.column):
        if _choice_stages_on_the_cpu(context, whole_statement.value, finding):
            calls = _staged_loads(context, function, whole_statement.targets[0].id, follow=True)
    elif isinstance(whole_statement, ast.If):
        calls = _branches_stage(context, function, whole_statement)
    else:
        holder = next((n for n in ast.walk(whole_statement) if isinstance(n, ast.keyword)
                       and n.arg == "map_location" and _contains(n.value, finding.line, finding.column)), None)
        parent = context.parents.get(id(holder)) if holder is not None else None
        if isinstance(parent, ast.Call) and holder is not None and _choice_stages_on_the_cpu(context, holder.value,
                                                                                          finding):
            calls = [parent]
    if not calls:
        return None
    copied = _copied_in_only(context, function, calls)
    if copied is None:
        return None
    return Consequence(INFO, f"the check decides only a map_location: the checkpoint is copied into a model by "
                             f"load_state_dict (line {copied.lineno}), which keeps the model's own device")


def _on_cuda_test(function: ast.AST, test: ast.expr) -> bool:
    """``x.is_cuda``, or a name its function binds in a statement that reads ``.is_cuda``
    (``..., is_cuda = *q.shape, q.is_cuda``)."""
    if isinstance(test, ast.Attribute) and test.attr == "is_cuda":
        return True
    if not isinstance(test, ast.Name):
        return False
    bindings = [s for s in ast.walk(function) if isinstance(s, ast.Assign) and any(
        isinstance(n, ast.Name) and n.id == test.id and isinstance(n.ctx, ast.Store) for t in s.targets
        for n in ast.walk(t))]
    return bool(bindings) and all(any(isinstance(n, ast.Attribute) and n.attr == "is_cuda"
                                      for n in ast.walk(s.value)) for s in bindings)


def _sets_only(statements: list[ast.stmt], stored: set[str]) -> bool:
    """Every statement binds ``self.x`` or local names, or calls something outside torch's own
    state (a print, a warning), reading what it likes; ``stored`` collects the ``self`` attributes."""
    for statement in statements:
        if isinstance(statement, ast.If):
            if not (_sets_only(statement.body, stored) and _sets_only(statement.orelse, stored)):
                return False
            continue
        if isinstance(statement, ast.Assign):
            for target in statement.targets:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                        and target.value.id == "self":
                    stored.add(target.attr)
                elif not isinstance(target, ast.Name):
                    return False
            continue
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call) and not ast.unparse(
                statement.value.func).startswith("torch."):
            continue
        return False
    return True


def _settings_for_cuda_tensors(reader: _Reader, statement: ast.If, finding: Finding) -> Consequence | None:
    """``if not torch.cuda.is_available() or not flash: return`` in ``__init__``, after which the
    method only sets attributes its class reads as ``self.cuda_config if q.is_cuda else ...``: what
    the check withholds is used only for tensors already on CUDA, so nothing is lost elsewhere."""
    read = _operand(statement.test, finding.line, finding.column)
    if read is None or not read[2] or statement.orelse or not (
            len(statement.body) == 1 and isinstance(statement.body[0], ast.Return) and statement.body[0].value is None):
        return None
    found = _in_whole_file(reader, statement)
    if found is None:
        return None
    context, whole_statement, function = found
    owner = context.parents.get(id(function)) if function is not None else None
    if function is None or not isinstance(owner, ast.ClassDef) or not any(s is whole_statement
                                                                             for s in function.body):
        return None
    after = function.body[next(i for i, s in enumerate(function.body) if s is whole_statement) + 1:]
    stored: set[str] = set()
    if not after or not _sets_only(after, stored) or not stored:
        return None
    parents = context.parents
    for node in ast.walk(owner):
        if not (isinstance(node, ast.Attribute) and node.attr in stored and isinstance(node.ctx, ast.Load)
                and isinstance(node.value, ast.Name) and node.value.id == "self"):
            continue
        choice = parents.get(id(node))
        method = _enclosing_function(context, node)
        if not (isinstance(choice, ast.IfExp) and choice.body is node and method is not None
                and _on_cuda_test(method, choice.test)):
            return None
    return Consequence(INFO, f"decides no device: without CUDA it only leaves "
                             f"{_listing('self.' + a for a in sorted(stored))} unset, which the class reads only "
                             f"for tensors already on CUDA (`... if is_cuda else ...`)")


def _cuda_library_aliases(tree: ast.AST) -> dict[str, str]:
    """The names a file binds to a CUDA-only library (``import cupy as cp`` -> ``{"cp": "cupy"}``)."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if (known := packages.classify_import(alias.name)) is not None:
                    aliases[alias.asname or alias.name.split(".")[0]] = known[0]
        elif (isinstance(node, ast.ImportFrom) and node.module and not node.level
              and (known := packages.classify_import(node.module)) is not None):
            aliases.update({alias.asname or alias.name: known[0] for alias in node.names})
    return aliases


def _uses(statements: Iterable[ast.AST], names: Iterable[str]) -> set[str]:
    wanted = set(names)
    return {n.id for s in statements for n in ast.walk(s) if isinstance(n, ast.Name) and n.id in wanted}


def _hands_over_only(statements: list[ast.stmt], aliases: dict[str, str]) -> set[str] | None:
    """The names bound when every statement binds a name to a value made by the library
    (``data = cp.asarray(out.detach())``), inside ``with`` blocks of the library
    (``with cp.cuda.Device(i):``) or not, and moves or names no device otherwise; None if not."""
    bound: set[str] = set()
    for statement in statements:
        if isinstance(statement, ast.With):
            inner = _hands_over_only(statement.body, aliases)
            if inner is None or not all(_uses([item.context_expr], aliases) for item in statement.items):
                return None
            bound |= inner
        elif (isinstance(statement, ast.Assign) and len(statement.targets) == 1
              and isinstance(statement.targets[0], ast.Name) and _uses([statement.value], aliases)
              and not _names_a_device(statement.value)):
            bound.add(statement.targets[0].id)
        else:
            return None
    return bound


def _binds_each(statements: list[ast.stmt], names: set[str]) -> bool:
    """Every name in ``names`` is bound by the statements to a value that is not just a name
    (``data = out.cpu().numpy()``, not ``batch = batch``)."""
    made = {t.id for s in statements if isinstance(s, ast.Assign) and not isinstance(s.value, ast.Name)
            for t in s.targets if isinstance(t, ast.Name)}
    return names <= made


def _cuda_library_branch(reader: _Reader, statement: ast.If, finding: Finding) -> Consequence | None:
    """``if device.type == "cuda" and cp is not None: data = cp.asarray(x) else: data = x.cpu().numpy()``:
    the branch taken on CUDA only binds names to what a CUDA-only library (CuPy) makes of the data,
    which no other device can use; the other branch binds the same names another way (not to
    themselves), and every other device takes it on purpose.  A branch that also picks or moves
    to a device, or calls anything for its effect, keeps the check.  The library itself is
    reported at its import."""
    read = _operand(statement.test, finding.line, finding.column)
    if read is None or not read[1] or not statement.orelse:
        return None
    found = _in_whole_file(reader, statement)
    if found is None:
        return None
    context, whole_statement, _ = found
    assert isinstance(whole_statement, ast.If)
    aliases = _cuda_library_aliases(context.tree)
    bound = _hands_over_only(whole_statement.body, aliases)
    if not bound or _uses(whole_statement.orelse, aliases) or not _binds_each(whole_statement.orelse, bound):
        return None
    libraries = _listing(sorted({aliases[name] for name in _uses(whole_statement.body, aliases)}))
    return Consequence(INFO, f"the branch taken on CUDA only hands the data to {libraries}, a CUDA-only "
                             f"library, and the other branch makes the same {_listing(sorted(bound))} the "
                             f"portable way: every other device takes it on purpose")


def _never_taken(statement: ast.If, finding: Finding) -> Consequence | None:
    """``if x.is_cuda and False:``: a branch switched off in the code runs on no device."""
    test = statement.test
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) and any(
            isinstance(v, ast.Constant) and not v.value for v in test.values):
        return Consequence(INFO, "the test has a constant false operand (`and False`): the branch runs on no "
                                 "device")
    return None


def _module_bindings(tree: ast.Module) -> set[str]:
    """The names a module's own statements bind (not those of its functions' bodies)."""
    bound: set[str] = set()
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        statement = pending.pop()
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(statement.name)
            continue
        for node in ast.iter_child_nodes(statement):
            if isinstance(node, ast.stmt):
                pending.append(node)
            elif isinstance(node, ast.ExceptHandler):
                bound.update([node.name] if node.name else [])
                pending.extend(node.body)
            else:
                bound.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            bound.update(a.asname or a.name.split(".")[0] for a in statement.names)
    return bound


def _unbound_without_cuda(reader: _Reader, statement: ast.If, finding: Finding) -> Consequence | None:
    """``if torch.cuda.is_available(): batch_size = ...`` then ``return batch_size``: the name is
    bound nowhere else in the function, so where CUDA is absent the read raises UnboundLocalError."""
    read = _operand(statement.test, finding.line, finding.column)
    if read is None or not read[1] or statement.orelse or not statement.body or isinstance(
            statement.body[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break)):
        return None
    found = _in_whole_file(reader, statement)
    if found is None:
        return None
    _, whole_statement, function = found
    if function is None or not any(s is whole_statement for s in function.body) or any(
            isinstance(n, (ast.Global, ast.Nonlocal, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                           ast.ClassDef)) for n in ast.walk(whole_statement)):
        return None
    inside = {id(n) for n in ast.walk(whole_statement)}
    bound_inside = {n.id for n in ast.walk(whole_statement) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    parameters = {a.arg for a in function.args.posonlyargs + function.args.args + function.args.kwonlyargs}
    parameters |= {a.arg for a in (function.args.vararg, function.args.kwarg) if a is not None}
    bound_elsewhere = {n.id for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
                       and id(n) not in inside}
    bound_elsewhere |= {a.asname or a.name for n in ast.walk(function) if isinstance(n, (ast.Import, ast.ImportFrom))
                        for a in n.names}
    # a `nonlocal` name is bound by the enclosing function, a `global` one where the module binds it
    bound_elsewhere |= {name for n in ast.walk(function) if isinstance(n, ast.Nonlocal) for name in n.names}
    declared = {name for n in ast.walk(function) if isinstance(n, ast.Global) for name in n.names}
    if declared:
        bound_elsewhere |= declared & _module_bindings(reader.whole().tree)
    index = next(i for i, s in enumerate(function.body) if s is whole_statement)
    for following in function.body[index + 1:]:
        if not isinstance(following, (ast.Return, ast.Assign, ast.Expr, ast.AugAssign, ast.AnnAssign)):
            return None  # a branch or loop may not run the read: read no further
        for name in sorted(bound_inside - bound_elsewhere - parameters):
            if _reads(following, {name}):
                return Consequence(ERROR, f"not silent: where CUDA is absent `{name}` is never bound, and line "
                                          f"{following.lineno} reads it (UnboundLocalError)")
    return None


# -- a check whose outcome only reaches text for a person -----------------------------------------

# Calls made for a person to read: logs, prints, progress-bar captions.  A value that reaches only
# these changes what is shown, never where work runs.
_DISPLAY_CALL_NAME = frozenset({"print", "log", "warn", "info", "debug", "warning", "error"})
_DISPLAY_CALL_PREFIX = ("set_postfix", "set_description")
# How many names a shown value may pass through (`x = ...; d = f(gpu=x); bar.set_postfix(**d)`).
_DISPLAY_HOPS = 3


def _display_call(call: ast.Call) -> bool:
    name = last_name(call.func)
    return name in _DISPLAY_CALL_NAME or name.startswith(_DISPLAY_CALL_PREFIX)


def _moves_or_names_a_device(node: ast.AST) -> bool:
    return _names_a_device(node) or any(isinstance(n, ast.Call) and n.func is not None and ast.unparse(
        n.func).split(".")[-1] in ("set_device", "device") for n in ast.walk(node))


def _name_only_shown(context: FileContext, function: ast.AST, name: str, after: int, hops: int) -> bool:
    """Every read of the local ``name`` in ``function`` (after line ``after``) only reaches text for
    a person; ``lines.append(...)`` on it adds to what is shown.  False when there is no such read."""
    reads = [n for n in _loads_of(function, name) if n.lineno > after]
    if not reads:
        return False
    parents = context.parents
    for read in reads:
        parent = parents.get(id(read))
        if isinstance(parent, ast.Attribute) and parent.attr in ("append", "extend") and isinstance(
                parents.get(id(parent)), ast.Call) and isinstance(parents.get(id(parents.get(id(parent)))), ast.Expr):
            continue  # adding to the list is not a read of what it holds
        if not _only_shown(context, function, read, hops):
            return False
    return True


def _only_shown(context: FileContext, function: ast.AST, node: ast.AST, hops: int) -> bool:
    """The value of ``node`` only reaches a log, print or progress-bar call, through f-strings,
    formatting, local names, a list it is appended to, or a call whose result is itself only shown."""
    parents = context.parents
    child: ast.AST = node
    parent = parents.get(id(node))
    while parent is not None:
        if isinstance(parent, ast.Call) and child is not parent.func:
            if _display_call(parent):
                return isinstance(parents.get(id(parent)), ast.Expr)
            func = parent.func
            if isinstance(func, ast.Attribute) and func.attr in ("append", "extend") and isinstance(
                    func.value, ast.Name) and isinstance(parents.get(id(parent)), ast.Expr):
                return hops > 0 and _name_only_shown(context, function, func.value.id, parent.lineno, hops - 1)
            called = last_name(parent.func)
            if context.source(func).startswith("torch.") or called in ("to", "cuda", "cpu") or "device" in called:
                return False  # a move, or a device built from the value
        if isinstance(parent, ast.Assign):
            if hops <= 0 or len(parent.targets) != 1 or not isinstance(parent.targets[0], ast.Name):
                return False
            return _name_only_shown(context, function, parent.targets[0].id, parent.lineno - 1, hops - 1)
        if isinstance(parent, ast.AugAssign) and isinstance(parent.target, ast.Name) and child is parent.value:
            return hops > 0 and _name_only_shown(context, function, parent.target.id, parent.lineno - 1, hops - 1)
        if isinstance(parent, (ast.stmt, ast.Lambda, ast.comprehension)):
            return False
        child, parent = parent, parents.get(id(parent))
    return False


def _innermost_choice(statement: ast.stmt, finding: Finding) -> ast.IfExp | None:
    choices = [n for n in ast.walk(statement) if isinstance(n, ast.IfExp) and _contains(n.test, finding.line,
                                                                                          finding.column)]
    return max(choices, key=lambda n: (n.lineno, n.col_offset), default=None)


def _shown_choice(reader: _Reader, statement: ast.stmt, finding: Finding) -> Consequence | None:
    """``gpu_mem = memory_used() / 1e9 if torch.cuda.is_available() else 0`` whose value only reaches
    a log line or a progress bar: the check decides what a person reads, not where work runs."""
    choice = _innermost_choice(statement, finding)
    if choice is None or all(isinstance(b, ast.Constant) and _names_a_device(b) for b in (choice.body, choice.orelse)):
        return None  # `"cuda" if ... else "cpu"` chooses a device wherever it goes
    if _operand(choice.test, finding.line, finding.column) is None or any(
            _moves_or_names_a_device(branch) and not isinstance(branch, ast.Constant)
            for branch in (choice.body, choice.orelse)):
        return None
    found = _in_whole_file(reader, statement)
    if found is None:
        return None
    context, whole_statement, function = found
    whole_choice = _innermost_choice(whole_statement, finding)
    if function is None or whole_choice is None or not _only_shown(context, function, whole_choice, _DISPLAY_HOPS):
        return None
    return Consequence(INFO, "decides no device: the value it chooses only feeds a log line, a print or a "
                             "progress bar")


def _shown_flag(reader: _Reader, statement: ast.Assign | ast.AnnAssign, finding: Finding) -> Consequence | None:
    """``cuda_available = torch.cuda.is_available()`` whose every read only reaches a log line, a
    print or a progress bar (through f-strings, formatting, local names): the check decides what is
    shown, not where work runs."""
    targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
    if (len(targets) != 1 or not isinstance(targets[0], ast.Name) or statement.value is None
            or _operand(statement.value, finding.line, finding.column) is None):
        return None
    found = _in_whole_file(reader, statement)
    if found is None:
        return None
    context, whole_statement, function = found
    if function is None or not isinstance(whole_statement, (ast.Assign, ast.AnnAssign)):
        return None
    reads = _flag_reads(context, whole_statement, targets[0])
    if not reads or not all(_only_shown(context, function, read, _DISPLAY_HOPS) for read in reads):
        return None
    return Consequence(INFO, f"decides no device: `{targets[0].id}` only reaches a log line, a print or a "
                             f"progress bar")


def _logs_or_refuses(statements: list[ast.stmt]) -> bool:
    """Every statement is a log or print call, or an ``if ...:`` whose body only raises."""
    for statement in statements:
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call) and _display_call(
                statement.value):
            continue
        if (isinstance(statement, ast.If) and not statement.orelse
                and all(isinstance(s, ast.Raise) for s in statement.body)):
            continue
        return False
    return True


def _only_logged_or_refused(reader: _Reader, statement: ast.If, finding: Finding) -> Consequence | None:
    """``if torch.cuda.is_available(): logging.info("GPU is available.") else: logging.info(...);
    if self.device_type == "gpu": raise ValueError(...)``: each branch only writes a line for a
    person or refuses a request with an explicit error; the device is chosen elsewhere."""
    read = _operand(statement.test, finding.line, finding.column)
    if read is None or not (read[1] or read[2]):
        return None
    found = _in_whole_file(reader, statement)
    if found is None or not isinstance(whole := found[1], ast.If) or not whole.body:
        return None
    if not (_logs_or_refuses(whole.body) and _logs_or_refuses(whole.orelse)):
        return None
    return Consequence(INFO, "decides no device: its branches only log, or refuse a request with an explicit "
                             "error")


def _shown_branch(reader: _Reader, statement: ast.If, finding: Finding) -> Consequence | None:
    """``if torch.cuda.is_available(): lines.append(f"grouped_mm: {supported}")`` where the branch only
    binds names and adds to lists that are read only by a log, print or progress-bar call: what it
    decides is a line of text."""
    read = _operand(statement.test, finding.line, finding.column)
    if read is None or not read[1] or statement.orelse or not statement.body or any(
            _moves_or_names_a_device(s) for s in statement.body):
        return None
    found = _in_whole_file(reader, statement)
    if found is None:
        return None
    context, whole_statement, function = found
    if function is None or not isinstance(whole_statement, ast.If):
        return None
    end = whole_statement.end_lineno or whole_statement.lineno
    for inner in whole_statement.body:
        if any(isinstance(n, ast.Call) and context.source(n.func).startswith("torch.")
               and not context.source(n.func).startswith("torch.cuda.") for n in ast.walk(inner)):
            return None  # torch work inside the branch: it may do more than describe
        if isinstance(inner, ast.Assign) and all(isinstance(t, ast.Name) for t in inner.targets):
            # a name bound here is read inside the branch, or only shown after it
            if not all(not _loads_of_after(function, t.id, end) or _name_only_shown(context, function, t.id, end,
                                                                                   _DISPLAY_HOPS)
                       for t in inner.targets if isinstance(t, ast.Name)):
                return None
            continue
        if isinstance(inner, ast.Expr) and isinstance(inner.value, ast.Call) and inner.value.args and (
                _display_call(inner.value) or _only_shown(context, function, inner.value.args[0], _DISPLAY_HOPS)):
            continue
        return None
    return Consequence(INFO, "decides no device: the branch only builds text that a log line, a print or a "
                             "progress bar shows")


def _loads_of_after(function: ast.AST, name: str, after: int) -> bool:
    return any(n.lineno > after for n in _loads_of(function, name))


def _profiler_activity_only(statement: ast.If, finding: Finding) -> Consequence | None:
    """``if torch.cuda.is_available(): activities.append(ProfilerActivity.CUDA)``: the check decides
    whether a profiler also records CUDA kernels, which exist only on CUDA; no work moves."""
    read = _operand(statement.test, finding.line, finding.column)
    if read is None or not read[1] or statement.orelse or not statement.body:
        return None
    for inner in statement.body:
        call = inner.value if isinstance(inner, ast.Expr) else None
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and call.func.attr in ("append", "add", "extend") and len(call.args) == 1):
            return None
        added = call.args[0].elts if isinstance(call.args[0], (ast.List, ast.Tuple, ast.Set)) else [call.args[0]]
        if not added or not all(isinstance(a, ast.Attribute) and a.attr == "CUDA" and isinstance(a.value, (
                ast.Name, ast.Attribute)) and ast.unparse(a.value).split(".")[-1] == "ProfilerActivity" for a in added):
            return None
    return Consequence(INFO, "decides no device: it only adds ProfilerActivity.CUDA to what a profiler records; "
                             "where CUDA is absent there are no CUDA kernels to record and the work runs the same")


# -- choices that change nothing the run computes -------------------------------------------------

def _same_either_way(statement: ast.stmt, finding: Finding) -> Consequence | None:
    """``num_workers = 0 if torch.cuda.is_available() else 0``: both branches are the same code, so
    the check changes nothing where CUDA is absent (unless the test stores it: ``(ok := ...)``)."""
    choice = _innermost_choice(statement, finding)
    if choice is not None:
        if ast.dump(choice.body) == ast.dump(choice.orelse) and not _stores(choice.test) \
                and not _moves_or_names_a_device(choice.body):  # `"cuda" if ... else "cuda"` is the lock-in
            return Consequence(INFO, f"changes nothing: both branches of the choice are "
                                     f"`{ast.unparse(choice.body)[:60]}`")
        return None
    if (isinstance(statement, ast.If) and _contains(statement.test, finding.line, finding.column)
            and statement.orelse and not _stores(statement.test) and not any(
                _moves_or_names_a_device(s) for s in statement.body)
            and [ast.dump(s) for s in statement.body] == [ast.dump(s) for s in statement.orelse]):
        return Consequence(INFO, "changes nothing: both branches of the check run the same statements")
    return None


def _stores(test: ast.expr) -> bool:
    return any(isinstance(n, ast.NamedExpr) for n in ast.walk(test))


# Calls a worker count may pass through on its way to `num_workers=`.
_COUNT_CALLS = frozenset({"min", "max", "int", "round", "abs"})
# DataLoader keywords that raise when num_workers is 0: beside them a count that may be 0 decides
# more than speed.
_NEEDS_WORKERS = frozenset({"prefetch_factor", "persistent_workers", "multiprocessing_context"})


def _worker_count_of(context: FileContext, node: ast.AST) -> ast.Call | None:
    """The ``DataLoader(...)`` call whose ``num_workers=`` value ``node`` is or is part of (through
    arithmetic, ``min``/``max``/``int`` and conditional values), else None."""
    parents = context.parents
    child, parent = node, parents.get(id(node))
    while isinstance(parent, (ast.BinOp, ast.UnaryOp, ast.IfExp)) or (
            isinstance(parent, ast.Call) and child is not parent.func and last_name(parent.func) in _COUNT_CALLS
            and isinstance(parent.func, ast.Name)):
        child, parent = parent, parents.get(id(parent))
    if not (isinstance(parent, ast.keyword) and parent.arg == "num_workers"):
        return None
    call = parents.get(id(parent))
    return call if isinstance(call, ast.Call) and last_name(call.func) == "DataLoader" else None


def _some_workers(test: ast.expr, count: str) -> bool:
    """``count > 0``, ``count >= 1``, ``count != 0``: true only when there are workers."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name)
            and test.left.id == count and isinstance(test.comparators[0], ast.Constant)):
        return False
    op, bound = test.ops[0], test.comparators[0].value
    return (isinstance(op, (ast.Gt, ast.NotEq)) and bound == 0) or (isinstance(op, ast.GtE) and bound == 1)


def _keyword_on_count(context: FileContext, node: ast.Name) -> ast.Call | None:
    """``DataLoader(..., persistent_workers=workers > 0)``: the DataLoader call one of whose
    keywords that need workers is true only when the count ``node`` has workers, else None."""
    parents = context.parents
    compare = parents.get(id(node))
    keyword = parents.get(id(compare))
    if not (isinstance(compare, ast.Compare) and _some_workers(compare, node.id)
            and isinstance(keyword, ast.keyword) and keyword.arg in _NEEDS_WORKERS):
        return None
    call = parents.get(id(keyword))
    return call if isinstance(call, ast.Call) and last_name(call.func) == "DataLoader" else None


def _nothing_needs_workers(call: ast.Call, count: str | None) -> bool:
    """torch's DataLoader call sets nothing that raises with no workers: no ``*args`` or
    ``**kwargs`` (``multiprocessing_context`` is positional too), no ``device=`` (another library's
    loader); the keywords that need workers absent, None or False, or true only with workers."""
    if any(isinstance(a, ast.Starred) for a in call.args):
        return False
    for keyword in call.keywords:
        if keyword.arg is None or keyword.arg == "device":
            return False
        if keyword.arg in _NEEDS_WORKERS and not (
                (isinstance(keyword.value, ast.Constant) and keyword.value.value in (None, False))
                or (count is not None and _some_workers(keyword.value, count))):
            return False
    return True


def _fewer_without_cuda(choice: ast.IfExp, finding: Finding) -> bool:
    """Both branches are counts (int constants, at least 0) and the one taken where CUDA is absent
    is the smaller: ``4 if torch.cuda.is_available() else 0``, not ``0 if ... else 4`` (fewer
    workers on CUDA is how code keeps forked workers away from an initialised device)."""
    read = _operand(choice.test, finding.line, finding.column)
    if read is None or read[1] == read[2]:
        return False
    with_cuda, without = (choice.body, choice.orelse) if read[1] else (choice.orelse, choice.body)
    counts = [b.value for b in (with_cuda, without) if isinstance(b, ast.Constant) and type(b.value) is int]
    return len(counts) == 2 and min(counts) >= 0 and counts[1] <= counts[0]


def _loader_processes_choice(reader: _Reader, statement: ast.stmt, finding: Finding) -> Consequence | None:
    """``DataLoader(ds, num_workers=4 if torch.cuda.is_available() else 0)``, directly or through a
    local name read only as the count: where CUDA is absent fewer processes load the data, a matter
    of speed; the batches are the same.  Not when the call also sets what needs workers
    (``prefetch_factor=``, ``persistent_workers=True``), which raises with none."""
    choice = _innermost_choice(statement, finding)
    if choice is None or _stores(choice.test) or not _fewer_without_cuda(choice, finding):
        return None
    found = _in_whole_file(reader, statement)
    if found is None:
        return None
    context, whole_statement, function = found
    whole_choice = _innermost_choice(whole_statement, finding)
    if whole_choice is None:
        return None
    loader = _worker_count_of(context, whole_choice)
    if loader is not None:
        calls, count = [loader], None
    else:
        if not isinstance(whole_statement, (ast.Assign, ast.AnnAssign)) or whole_statement.value is not whole_choice:
            return None
        targets = whole_statement.targets if isinstance(whole_statement, ast.Assign) else [whole_statement.target]
        target = targets[0]
        if function is None or len(targets) != 1 or not isinstance(target, ast.Name) or any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("locals", "vars")
                for n in ast.walk(function)):
            return None  # only a local, and one no `locals()` hands on: others may read it anywhere
        reads = _flag_reads(context, whole_statement, target)
        found_calls = [_worker_count_of(context, r) or (_keyword_on_count(context, r) if isinstance(r, ast.Name)
                                                        else None) for r in reads or ()]
        if not reads or None in found_calls:
            return None
        calls, count = [c for c in found_calls if c is not None], target.id
    if not all(_nothing_needs_workers(call, count) for call in calls):
        return None
    return Consequence(PERF, "decides no device: it sets only how many processes the data loader starts "
                             "(`num_workers=`); elsewhere fewer load the data, and the batches are the same")
