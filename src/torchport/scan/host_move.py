"""``if logits.is_cuda: logits = logits.cpu()``, ``return x.cpu() if x.is_cuda else x``: a value
is moved to the host only when it is on CUDA.  On another accelerator the test is false and the
value stays on its own device with the same numbers: nothing falls back to the CPU, which is what
the check's "silent" says.  What follows decides what the check is instead:

- info where the function then only returns the value, collects it (``append``), keeps it in a
  mapping or on an object, reads it as Python numbers (``.item()``, ``.tolist()``) or shows it;
- error where it then needs the host copy: ``.numpy()`` of it, a NumPy call on it, or a
  ``.numpy()`` in the other branch (``x.cpu().numpy() if x.is_cuda else x.numpy()``).  torch
  raises TypeError for ``.numpy()`` of any tensor off the CPU;
- as it was for anything else: arithmetic or a call that may mix it with CPU tensors, an ``else``
  branch, a test that ``or`` widens or ``not`` turns round, a value held on an object, a move with
  anything beside it."""
from __future__ import annotations

import ast
import dataclasses

from torchport.scan.detectors.syntax import names_the_cpu, string_value, walk_nodes
from torchport.scan.old_torch_branch import statements_holding

# Methods that keep a tensor's values and device: what may sit beside the move in the chain.
_KEEPING = frozenset({"detach", "clone", "contiguous", "float"})
# What a later statement may do with the value left on its device: nothing that needs the host.
_NUMBER_READS = frozenset({"item", "tolist", "size", "dim"})
_LOGGING = frozenset({"info", "debug", "warning", "warn", "log"})  # `logger.info(...)`


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


def _positive_device_test(test: ast.expr, line: int) -> bool:
    """``x.is_cuda``, ``"cuda" in self.device``, ``x.device.type == "cuda"``, alone or and-ed with
    other tests, holding ``line``: true only for a value on CUDA."""
    parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    for part in parts:
        if not part.lineno <= line <= (part.end_lineno or part.lineno):
            continue
        if isinstance(part, ast.Attribute):
            return part.attr == "is_cuda"
        if isinstance(part, ast.Compare) and len(part.ops) == 1 and isinstance(part.ops[0], (ast.Eq, ast.In, ast.Is)):
            left, right = part.left, part.comparators[0]
            words = [string_value(side) for side in (left, right)]
            if isinstance(part.ops[0], ast.In):
                return words[0] == "cuda" and words[1] is None
            return sum(1 for word in words if word is not None and word.startswith("cuda")) == 1 and None in words
        return False
    return False


def _moved_by_if(statement: ast.If) -> list[str] | None:
    """The local names an ``if`` with no ``else`` only moves to the host (``x = x.cpu()``, or a
    bare ``x.cpu()`` whose result is dropped)."""
    if statement.orelse:
        return None
    names: list[str] = []
    for step in statement.body:
        if isinstance(step, ast.Expr):
            base, moved = _base(step.value)
            if not moved or not isinstance(base, ast.Name):
                return None
        elif isinstance(step, ast.Assign) and len(step.targets) == 1 and isinstance(step.targets[0], ast.Name):
            base, moved = _base(step.value)
            if not moved or not isinstance(base, ast.Name) or base.id != step.targets[0].id:
                return None
            names.append(base.id)
        else:
            return None
    return names


def _moved_by_choice(choice: ast.IfExp, holder: ast.stmt) -> tuple[list[str], bool] | None:
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
    if not moved or other_moved or ast.dump(base) != ast.dump(unmoved):
        return None
    if isinstance(holder, ast.Return) and holder.value is choice:
        return [], converted
    if (isinstance(holder, ast.Assign) and holder.value is choice and len(holder.targets) == 1
            and isinstance(holder.targets[0], ast.Name)):
        return [] if converted else [holder.targets[0].id], converted
    return None


def _needs_the_host(node: ast.Name, parents: dict[int, ast.AST]) -> bool:
    """``x.numpy()``, ``x.detach().numpy()``, ``np.asarray(x)``: a read that raises TypeError for a
    tensor off the CPU."""
    parent = parents.get(id(node))
    while isinstance(parent, ast.Attribute) and parent.value is node:
        call = parents.get(id(parent))
        if not (isinstance(call, ast.Call) and call.func is parent):
            return False
        if parent.attr == "numpy":
            return True
        if parent.attr not in _KEEPING:
            return False
        node, parent = call, parents.get(id(call))  # type: ignore[assignment]
    if isinstance(parent, ast.Call) and node in parent.args:
        root = parent.func
        while isinstance(root, ast.Attribute):
            root = root.value
        return isinstance(root, ast.Name) and root.id in ("np", "numpy")
    return False


def _harmless_read(node: ast.Name, parents: dict[int, ast.AST]) -> bool:
    """A read of the value left on its device that needs nothing of the host."""
    parent = parents.get(id(node))
    # in a display, or a part of it (`hidden[0]`): still the value on its device
    while isinstance(parent, (ast.Tuple, ast.List)) or isinstance(parent, ast.Dict) and node not in parent.keys or (
            isinstance(parent, ast.Subscript) and parent.value is node):
        node, parent = parent, parents.get(id(parent))  # type: ignore[assignment]
    if isinstance(parent, ast.Return) or isinstance(parent, ast.Assign) and parent.value is node and all(
            isinstance(target, (ast.Attribute, ast.Subscript)) for target in parent.targets):
        return True
    if isinstance(parent, ast.Attribute) and parent.value is node and parent.attr in _NUMBER_READS:
        call = parents.get(id(parent))
        return isinstance(call, ast.Call) and call.func is parent
    if isinstance(parent, ast.Call) and node in parent.args:
        function = parent.func
        return (isinstance(function, ast.Name) and function.id == "print"
                or isinstance(function, ast.Attribute) and function.attr in _LOGGING | {"append"})
    return False


@dataclasses.dataclass(frozen=True)
class Move:
    """A move to the host that only a CUDA value takes: of ``subject``; ``needs_host`` is the line
    of a later read that needs the host copy (the line of the choice for a ``.numpy()`` in its other
    branch), None where every later read is harmless."""

    subject: str
    needs_host: int | None


def only_from_cuda(tree: ast.Module, line: int) -> Move | None:
    """The move to the host that the device test at ``line`` makes only for a CUDA value, where
    what its function does next can be read; None otherwise."""
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
        if _positive_device_test(statement.test, line):
            names = _moved_by_if(statement)
        subject = ast.unparse(_base(statement.body[0].value)[0]) if names is not None else ""  # type: ignore[attr-defined]
    elif isinstance(statement, (ast.Assign, ast.Return)) and isinstance(statement.value, ast.IfExp):
        choice = statement.value
        if choice.test.lineno <= line <= (choice.test.end_lineno or 0) and _positive_device_test(choice.test, line):
            moved_by_choice = _moved_by_choice(choice, statement)
            if moved_by_choice is not None:
                names, converted = moved_by_choice
        subject = ast.unparse(_base(choice.orelse.func.value if converted else choice.orelse)[0])  # type: ignore[attr-defined]
    if names is None:
        return None
    if converted:
        return Move(subject, statement.lineno)
    moved = set(names)
    in_loop = any(isinstance(s, (ast.For, ast.AsyncFor, ast.While)) for s in holding[holding.index(function) + 1:])
    inside = {id(n) for n in walk_nodes(statement)}
    parents: dict[int, ast.AST] = {}
    for node in walk_nodes(function):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    needs_host: list[int] = []
    unknown = False
    for node in walk_nodes(function):
        if not (isinstance(node, ast.Name) and node.id in moved and isinstance(node.ctx, ast.Load)):
            continue
        if id(node) in inside or not in_loop and node.lineno < statement.lineno:
            continue
        if _needs_the_host(node, parents):
            needs_host.append(node.lineno)
        elif not _harmless_read(node, parents):
            unknown = True
    if needs_host:
        return Move(subject, min(needs_host))
    return None if unknown else Move(subject, None)
