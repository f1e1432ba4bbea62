"""``if logits.is_cuda: logits = logits.cpu()``, ``return x.cpu() if x.is_cuda else x``: a value
is moved to the host only when it is on CUDA.  On another accelerator the test is false and the
value stays on its own device with the same numbers: nothing falls back to the CPU, which is what
the check's "silent" says.  What the function does with the value next decides what the check is:

- info where it only returns it (callers are not followed), reads numbers or its shape from it
  (``.item()``, ``.tolist()``, ``.size()``, ``.shape``, ``.dtype``; not ``.device``, which carries
  the difference on) or shows it (``print``, a logger by that name);
- error where a ``.numpy()`` of it, a NumPy call that converts it (``np.asarray``,
  ``np.concatenate``...), or a ``.numpy()`` in the other branch of the choice (``x.cpu().numpy()
  if x.is_cuda else x.numpy()``) follows the move unconditionally: in its block or a block around
  it, in the same branch, perhaps in a later ``with``, with no ``return``, ``raise``, ``break`` or
  ``continue`` between, no ``try`` or ``suppress`` around it that may catch TypeError, and not
  under an ``if`` expression, an ``and``/``or``, a comprehension or a lambda.  torch raises
  TypeError for ``.numpy()`` of any tensor off the CPU;
- as it was for anything else: arithmetic, a call that may mix it with CPU tensors, collecting it
  (``append``), storing it on an object or in a container, a later binding of the name (``x +=``
  and a comprehension's own variable included), a closure, lambda or ``global`` that names it, an
  ``else`` branch, a test that ``or`` widens or ``not`` turns round, a move with anything but
  ``clone`` or ``contiguous`` beside it (``detach`` only on the CUDA path keeps the graph
  elsewhere, ``float`` changes the dtype), a dropped ``.cpu()`` of a value the test does not show
  is a tensor (a module's moves it in place)."""
from __future__ import annotations

import ast
import dataclasses
import re

from torchport.scan.detectors.syntax import last_name, names_the_cpu, string_value, walk_nodes
from torchport.scan.old_torch_branch import statements_holding

# Methods that keep a tensor's values, dtype, graph and device: what may sit beside the move.
_KEEPING = frozenset({"clone", "contiguous"})
# Reads of a tensor on any device that answer Python numbers or its shape.
_NUMBER_READS = frozenset({"item", "tolist", "size", "dim", "numel"})
_SHAPE_READS = frozenset({"shape", "dtype", "ndim"})
# Methods that answer a tensor on the same device: a `.numpy()` after them still needs the host.
_SAME_DEVICE = frozenset({"detach", "clone", "contiguous", "float", "double", "long", "int", "bool", "half",
                          "squeeze", "flatten", "view", "reshape"})
# NumPy functions that turn their argument into an array (`__array__`, which calls `.numpy()`).
_CONVERTING = frozenset({"array", "asarray", "asanyarray", "ascontiguousarray", "concatenate", "stack", "vstack",
                         "hstack", "save", "savez", "savetxt", "copy"})
_LOGGER = re.compile(r"^_*(log|logger|logging)$", re.IGNORECASE)
_LOG_LEVELS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception"})
_DEFERRED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def shown_call(call: ast.expr) -> bool:
    """``print(...)``, ``logger.info(...)``, ``logging.warning(...)``, ``self.log.debug(...)``: text for a
    person.  Not ``torch.log(x)`` nor ``x.log()``: the receiver must be named for a logger."""
    if not isinstance(call, ast.Call):
        return False
    if isinstance(call.func, ast.Name):
        return call.func.id == "print"
    return (isinstance(call.func, ast.Attribute) and call.func.attr in _LOG_LEVELS
            and _LOGGER.search(last_name(call.func.value)) is not None)


def _host_move(call: ast.expr) -> bool:
    """``x.cpu()``, ``x.to("cpu")``, ``x.to(device="cpu")``, ``x.to(torch.device("cpu"))``."""
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
        return False
    if call.func.attr == "cpu":
        return not call.args and not call.keywords
    if call.func.attr != "to" or len(call.args) + len(call.keywords) != 1:
        return False
    if call.keywords and call.keywords[0].arg != "device":
        return False
    return names_the_cpu(call.args[0] if call.args else call.keywords[0].value)


def _base(expression: ast.expr) -> tuple[ast.expr, bool]:
    """The value under a chain of moves to the host and value-keeping methods, and whether the
    chain moves it: ``x`` and True for ``x.detach().cpu()``."""
    moved = False
    while (isinstance(expression, ast.Call) and isinstance(expression.func, ast.Attribute)
           and (_host_move(expression) or expression.func.attr in _KEEPING
                and not expression.args and not expression.keywords)):
        moved = moved or _host_move(expression)
        expression = expression.func.value
    return expression, moved


class _Test:
    """What a device test says: whether it holds only for a value on CUDA, the values it tests
    (``x`` of ``x.is_cuda`` and of ``x.device.type == "cuda"``; none for a device setting such as
    ``"cuda" in self.device``) and the values it shows to be tensors (``torch.is_tensor(x)``)."""

    def __init__(self, test: ast.expr, line: int) -> None:
        parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
        self.on_cuda = False
        self.subjects: list[str] = []
        self.setting = False
        self.tensors = {ast.dump(part.args[0]) for part in parts if isinstance(part, ast.Call) and _tensor_test(part)}
        for part in parts:
            if not (part.lineno <= line <= (part.end_lineno or part.lineno)):
                continue
            subject = _on_cuda(part)
            if subject is not None:
                self.on_cuda = True
                if isinstance(subject, ast.expr):
                    self.subjects.append(ast.dump(subject))
                else:
                    self.setting = True

    def moves(self, base: ast.expr) -> bool:
        """Whether the test is of ``base`` itself (or of a device setting): a move of another value
        may be of a module or an object whose ``.cpu()`` moves it in place."""
        return self.setting or ast.dump(base) in self.subjects


def _tensor_test(part: ast.expr) -> bool:
    """``torch.is_tensor(x)``, ``isinstance(x, torch.Tensor)``."""
    if not (isinstance(part, ast.Call) and part.args):
        return False
    name = ast.unparse(part.func)
    return name == "torch.is_tensor" and len(part.args) == 1 or (
        name == "isinstance" and len(part.args) == 2 and ast.unparse(part.args[1]) == "torch.Tensor")


def _on_cuda(test: ast.expr) -> ast.expr | bool | None:
    """For a test true only on CUDA, the value it tests (``x`` of ``x.is_cuda``, of ``x.device.type ==
    "cuda"`` and of ``x.device == "cuda"``), or True for a device setting (``"cuda" in self.device``,
    ``device == "cuda"``); None for any other test."""
    if isinstance(test, ast.Attribute):
        return test.value if test.attr == "is_cuda" else None
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.In, ast.Is))):
        return None
    sides = (test.left, test.comparators[0])
    words = [string_value(side) for side in sides]
    if isinstance(test.ops[0], ast.In):
        return True if words[0] == "cuda" and words[1] is None else None
    if sum(1 for word in words if word is not None and word.startswith("cuda")) != 1 or None not in words:
        return None
    tested = sides[words.index(None)]
    if isinstance(tested, ast.Attribute) and tested.attr == "type":
        tested = tested.value
    if isinstance(tested, ast.Attribute) and tested.attr == "device":
        return tested.value
    return True


def _moved_by_if(statement: ast.If, test: _Test) -> list[str] | None:
    """The local names an ``if`` with no ``else`` only moves to the host (``x = x.cpu()``), or a
    tensor whose move it drops (``if torch.is_tensor(x) and x.is_cuda: x.cpu()``: a no-op, where a
    module's ``.cpu()`` would move it in place)."""
    if statement.orelse:
        return None
    names: list[str] = []
    for step in statement.body:
        if isinstance(step, ast.Expr):
            base, moved = _base(step.value)
            if not moved or ast.dump(base) not in test.tensors:
                return None
        elif isinstance(step, ast.Assign) and len(step.targets) == 1 and isinstance(step.targets[0], ast.Name):
            base, moved = _base(step.value)
            if not moved or not isinstance(base, ast.Name) or base.id != step.targets[0].id or not test.moves(base):
                return None
            names.append(base.id)
        else:
            return None
    return names


def _moved_by_choice(choice: ast.IfExp, holder: ast.stmt, test: _Test) -> tuple[list[str], bool] | None:
    """``y = x.cpu() if x.is_cuda else x`` (the name it binds) or ``return x.cpu() if ... else x``
    (none): the other branch is the same value, unmoved; and whether both branches end in
    ``.numpy()`` (``x.cpu().numpy() if x.is_cuda else x.numpy()``), which the unmoved one cannot."""
    body, other = choice.body, choice.orelse
    converted = all(isinstance(side, ast.Call) and isinstance(side.func, ast.Attribute) and side.func.attr == "numpy"
                    and not side.args and not side.keywords for side in (body, other))
    if converted:
        body, other = body.func.value, other.func.value  # type: ignore[attr-defined]
    base, moved = _base(body)
    unmoved, other_moved = _base(other)
    if not moved or other_moved or ast.dump(base) != ast.dump(unmoved) or not test.moves(base):
        return None
    if isinstance(holder, ast.Return) and holder.value is choice:
        return [], converted
    if (isinstance(holder, ast.Assign) and holder.value is choice and len(holder.targets) == 1
            and isinstance(holder.targets[0], ast.Name)):
        return [] if converted else [holder.targets[0].id], converted
    return None


def _needs_the_host(node: ast.Name, parents: dict[int, ast.AST]) -> bool:
    """``x.numpy()``, ``x.detach().numpy()``, ``np.asarray(x)``: a read that raises TypeError for a
    tensor off the CPU.  Not one that only a condition in its statement reaches (``x.numpy() if
    x.device.type == "cpu" else x``, an ``and``, a comprehension's filter, a lambda)."""
    parent = parents.get(id(node))
    found = False
    while isinstance(parent, ast.Attribute) and parent.value is node:
        call = parents.get(id(parent))
        if not (isinstance(call, ast.Call) and call.func is parent):
            return False
        if parent.attr == "numpy":
            found = True
            break
        if parent.attr not in _SAME_DEVICE:
            return False
        node, parent = call, parents.get(id(call))  # type: ignore[assignment]
    if not found:
        if not (isinstance(parent, ast.Call) and node in parent.args and isinstance(parent.func, ast.Attribute)):
            return False
        module = parent.func.value
        if not (isinstance(module, ast.Name) and module.id in ("np", "numpy") and parent.func.attr in _CONVERTING):
            return False
    child: ast.AST = node
    while parent is not None and not isinstance(parent, ast.stmt):
        if isinstance(parent, (ast.IfExp, ast.Lambda, ast.comprehension)) or (
                isinstance(parent, ast.BoolOp) and child is not parent.values[0]):
            return False
        child, parent = parent, parents.get(id(parent))
    return True


def _harmless_read(node: ast.Name, parents: dict[int, ast.AST]) -> bool:
    """A read of the value left on its device that needs nothing of the host."""
    parent = parents.get(id(node))
    # in a display, or a part of it (`hidden[0]`): still the value on its device
    while isinstance(parent, (ast.Tuple, ast.List)) or isinstance(parent, ast.Dict) and node not in parent.keys or (
            isinstance(parent, ast.Subscript) and parent.value is node):
        node, parent = parent, parents.get(id(parent))  # type: ignore[assignment]
    if isinstance(parent, ast.Return):
        return True
    if isinstance(parent, ast.Attribute) and parent.value is node:
        if parent.attr in _SHAPE_READS:
            return True
        call = parents.get(id(parent))
        return parent.attr in _NUMBER_READS and isinstance(call, ast.Call) and call.func is parent
    return (isinstance(parent, ast.Call) and node in parent.args and shown_call(parent)
            and isinstance(parents.get(id(parent)), ast.Expr))


def _path(function: ast.AST, line: int) -> list[tuple[list[ast.stmt], int]]:
    """From the function's body down, each block that holds ``line`` and the index of the statement
    in it that holds the line."""
    path: list[tuple[list[ast.stmt], int]] = []
    blocks: list[list[ast.stmt]] = [function.body]  # type: ignore[attr-defined]
    while blocks:
        block = blocks.pop()
        index = next((i for i, s in enumerate(block) if s.lineno <= line <= (s.end_lineno or s.lineno)), None)
        if index is None:
            continue
        path.append((block, index))
        statement = block[index]
        blocks = [getattr(statement, field) for field in ("body", "orelse", "finalbody")
                  if isinstance(getattr(statement, field, None), list)]
        blocks += [handler.body for handler in getattr(statement, "handlers", [])]
        blocks += [case.body for case in getattr(statement, "cases", [])]
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            break
    return path


def _catches(statement: ast.stmt) -> bool:
    """A ``try`` whose handlers may catch TypeError, or a ``with`` that may swallow it
    (``contextlib.suppress``, ``pytest.raises``)."""
    if isinstance(statement, (ast.Try, getattr(ast, "TryStar", ast.Try))):
        return any(handler.type is None or any(last_name(n) in ("TypeError", "Exception", "BaseException")
                                               for n in walk_nodes(handler.type))
                   for handler in statement.handlers)  # type: ignore[attr-defined]
    if isinstance(statement, (ast.With, ast.AsyncWith)):
        return any(isinstance(item.context_expr, ast.Call)
                   and last_name(item.context_expr.func) in ("suppress", "raises", "assertRaises")
                   for item in statement.items)
    return False


def _reached_after(function: ast.AST, move: ast.stmt, read_line: int) -> bool:
    """The read follows the move in its block or a block around it, in the same branch, perhaps in
    the body of a later ``with``, with no return, raise, break or continue between them and nothing
    around it that may catch its TypeError."""
    moving, reading = _path(function, move.lineno), _path(function, read_line)
    depth = 0
    while depth < min(len(moving), len(reading)) and moving[depth] == reading[depth]:
        depth += 1
    if depth >= min(len(moving), len(reading)):
        return False
    (block, index), (read_block, read_index) = moving[depth], reading[depth]
    if block is not read_block or read_index <= index or any(_catches(b[i]) for b, i in reading[:depth]):
        return False
    for (outer, at), (inner, _) in zip(reading[depth:], reading[depth + 1:]):
        holder = outer[at]
        if not (isinstance(holder, (ast.With, ast.AsyncWith)) and inner is holder.body) or _catches(holder):
            return False  # a branch, a loop or a try that may not run the read
    # every block from the move up to the read's: nothing after the move in it may leave first
    for level in range(depth, len(moving)):
        block, index = moving[level]
        end = read_index if level == depth else len(block)
        if any(isinstance(s, (ast.Return, ast.Raise, ast.Break, ast.Continue)) for s in block[index + 1:end]):
            return False
    return True


@dataclasses.dataclass(frozen=True)
class Move:
    """A move to the host that only a CUDA value takes: of ``subject``; ``needs_host`` is the line
    of a later read that needs the host copy (the line of the choice for a ``.numpy()`` in its other
    branch), None where every later read is harmless."""

    subject: str
    needs_host: int | None


def only_from_cuda(tree: ast.Module, line: int, parents: dict[int, ast.AST]) -> Move | None:
    """The move to the host that the device test at ``line`` makes only for a CUDA value, where
    what its function does next can be read; None otherwise.  ``parents``: the parent of every
    node of ``tree`` (``FileContext.parents``, built once a file)."""
    holding = statements_holding(tree, line)
    functions = [s for s in holding if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if not functions or not holding or isinstance(holding[-1], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    function, statement = functions[-1], holding[-1]
    if not isinstance(statement, ast.stmt):  # an except handler or a match case
        return None
    names: list[str] | None = None
    converted, subject = False, ""
    if isinstance(statement, ast.If) and statement.test.lineno <= line <= (statement.test.end_lineno or 0):
        test = _Test(statement.test, line)
        if test.on_cuda:
            names = _moved_by_if(statement, test)
        subject = ast.unparse(_base(statement.body[0].value)[0]) if names is not None else ""  # type: ignore[attr-defined]
    elif isinstance(statement, (ast.Assign, ast.Return)) and isinstance(statement.value, ast.IfExp):
        choice = statement.value
        test = _Test(choice.test, line)
        if choice.test.lineno <= line <= (choice.test.end_lineno or 0) and test.on_cuda:
            moved_by_choice = _moved_by_choice(choice, statement, test)
            if moved_by_choice is not None:
                names, converted = moved_by_choice
        subject = ast.unparse(_base(choice.orelse.func.value if converted else choice.orelse)[0])  # type: ignore[attr-defined]
    if names is None:
        return None
    if converted:
        return Move(subject, statement.lineno)
    moved = set(names)
    # `y = x.cpu() if x.is_cuda else x`: off CUDA `y` is `x` itself, so a later change of `x` shows in
    # `y` there only; what `x` itself needs is the same on CUDA
    aliases = ({statement.value.orelse.id} - moved if isinstance(statement, ast.Assign) and isinstance(
        statement.value, ast.IfExp) and isinstance(statement.value.orelse, ast.Name) else set())
    within = holding[holding.index(function) + 1:]
    loop = next((s for s in reversed(within) if isinstance(s, (ast.For, ast.AsyncFor, ast.While))), None)
    inside = {id(n) for n in walk_nodes(statement)}
    for node in walk_nodes(function):
        if node is not function and isinstance(node, _DEFERRED) and any(
                isinstance(n, ast.Name) and n.id in moved or isinstance(n, ast.arg) and n.arg in moved
                for n in walk_nodes(node)):
            return None  # a closure or a lambda: it runs later, or binds a name of its own
        if isinstance(node, (ast.Global, ast.Nonlocal)) and moved & set(node.names):
            return None  # read by other functions
        if isinstance(node, ast.Name) and node.id in moved and not isinstance(node.ctx, ast.Load) and (
                id(node) not in inside and (loop is not None or node.lineno > statement.lineno)) and not (
                loop is not None and isinstance(loop, (ast.For, ast.AsyncFor)) and node is loop.target):
            return None  # bound again (`x += cpu_tensor`, a comprehension's own `x`): reads may be of another value
    needs_host: list[int] = []
    unknown = False
    for node in walk_nodes(function):
        if not (isinstance(node, ast.Name) and node.id in moved | aliases and isinstance(node.ctx, ast.Load)):
            continue
        if id(node) in inside or loop is None and node.lineno < statement.lineno:
            continue
        if node.id in aliases:
            unknown = unknown or not _harmless_read(node, parents)
        elif _needs_the_host(node, parents) and node.lineno > (statement.end_lineno or statement.lineno) and (
                _reached_after(function, statement, node.lineno)):
            needs_host.append(node.lineno)
        elif not _harmless_read(node, parents):
            unknown = True
    if needs_host:
        return Move(subject, min(needs_host))
    return None if unknown else Move(subject, None)
