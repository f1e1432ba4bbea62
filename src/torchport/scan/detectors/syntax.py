"""Small ``ast`` helpers shared by the scan detectors and the fast path: positions,
edits, literal values, call arguments, import aliases.  No rule knowledge here."""
from __future__ import annotations

import ast
import re
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from torchport.scan.model import Edit, Fallback


def walk_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk``, the same nodes in the same order, about four times faster: it reads
    ``_fields`` directly instead of chaining the ``iter_fields`` and ``iter_child_nodes``
    generators, and the analysis walks subtrees hundreds of thousands of times a scan."""
    pending = deque([node])
    take, add = pending.popleft, pending.append
    while pending:
        node = take()
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        add(item)
            elif isinstance(value, ast.AST):
                add(value)
        yield node


def character_column(line_text: str, byte_column: int) -> int:
    """The 1-based character column of an ast byte offset in ``line_text``: findings count
    characters, the ast counts UTF-8 bytes."""
    if line_text.isascii():
        return byte_column + 1
    return len(line_text.encode("utf-8")[:byte_column].decode("utf-8", "replace")) + 1


def byte_column(line_text: str, column: int) -> int:
    """The 1-based column counted in UTF-8 bytes of the 1-based character ``column`` of
    ``line_text``: the inverse of ``character_column``."""
    if line_text.isascii():
        return column
    return len(line_text[:column - 1].encode("utf-8")) + 1


def node_start(node) -> tuple[int, int]:
    return (node.lineno, node.col_offset)


def node_end(node) -> tuple[int, int]:
    line, column = node.end_lineno, node.end_col_offset
    assert line is not None and column is not None, "ast.parse sets every node's end"
    return (line, column)


def replace_node(node, text: str) -> Edit:
    return Edit(node_start(node), node_end(node), text)


def insert_at(position: tuple[int, int], text: str) -> Edit:
    return Edit(position, position, text)


def closing_paren(call: ast.Call) -> tuple[int, int]:
    line, column = node_end(call)
    return (line, column - 1)


def dotted_name(node) -> str:
    """``torch.cuda.is_available`` for that chain of attributes on a name; "" for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    return ".".join([node.id, *reversed(parts)])


def last_name(node: ast.AST | None) -> str:
    """``synchronize`` of ``torch.cuda.synchronize`` and of ``synchronize``: what a call or a
    reference is known by in the code; "" for anything else (a call's result, a subscript)."""
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


def catches_a_missing_module(handler_type: ast.expr | None) -> bool:
    """``except ImportError:`` (or ``ModuleNotFoundError``, ``Exception``, ``BaseException``, bare,
    or a tuple naming one): the handler runs where an import fails."""
    names = handler_type.elts if isinstance(handler_type, ast.Tuple) else [handler_type]
    return any(n is None or last_name(n) in ("ImportError", "ModuleNotFoundError", "Exception", "BaseException")
               for n in names)


def string_value(node) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def names_the_cpu(node: ast.AST | None) -> bool:
    """``"cpu"`` or ``torch.device("cpu")``."""
    if isinstance(node, ast.Call) and node.args and getattr(node.func, "attr", getattr(node.func, "id", "")) == "device":
        node = node.args[0]
    return string_value(node) == "cpu"


def call_argument(call: ast.Call, position: int | None, keyword: str):
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    if position is not None and len(call.args) > position and not any(
            isinstance(a, ast.Starred) for a in call.args[:position + 1]):
        return call.args[position]
    return None


def plain_call(call: ast.Call) -> bool:
    """No *args / **kwargs, so arguments can be moved around safely."""
    return not any(isinstance(a, ast.Starred) for a in call.args) and all(
        kw.arg is not None for kw in call.keywords)


def passes_argument(call: ast.Call, parameter: str, position: int | None, unpacking_counts: bool = True) -> bool:
    """Whether ``call`` passes ``parameter`` (by keyword, at ``position``, or possibly
    through ``*args`` / ``**kwargs`` where ``unpacking_counts``), so the parameter's default
    is not used there."""
    if any(kw.arg == parameter or (kw.arg is None and unpacking_counts) for kw in call.keywords):
        return True
    if position is None:
        return False
    return len([a for a in call.args if not isinstance(a, ast.Starred)]) > position or (
        unpacking_counts and any(isinstance(a, ast.Starred) for a in call.args))


@dataclass
class CallSite:
    """What a file shows around its calls, for ``passes_a_value``: its functions and lambdas, the
    module's names bound once to a constant, and its command-line options' defaults (``--device``
    -> ``"auto"``; a store_true flag -> False; no default -> None)."""
    functions: list[ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda] = field(default_factory=list)
    constants: dict[str, object] = field(default_factory=dict)
    options: dict[str, object] = field(default_factory=dict)


_NO_CONSTANT = object()


def call_site(tree: ast.Module) -> CallSite:
    site = CallSite()
    bound: dict[str, int] = {}
    for statement in tree.body:
        if isinstance(statement, (ast.Assign, ast.AnnAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    bound[target.id] = bound.get(target.id, 0) + 1
                    value = statement.value
                    site.constants[target.id] = value.value if isinstance(value, ast.Constant) else _NO_CONSTANT
    site.constants = {name: value for name, value in site.constants.items()
                      if bound[name] == 1 and value is not _NO_CONSTANT}
    for node in walk_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            site.functions.append(node)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            flags = [string_value(a) for a in node.args]
            long = next((f for f in flags if f and f.startswith("--")), None)
            if long is None:
                continue
            name = keyword_value(node, "dest")
            key = string_value(name) if name is not None else long[2:].replace("-", "_")
            default = keyword_value(node, "default")
            action = string_value(keyword_value(node, "action"))
            if default is None:
                site.options[key or ""] = {"store_true": False, "store_false": True}.get(action or "")
            elif isinstance(default, ast.Constant):
                site.options[key or ""] = default.value
            else:
                site.options[key or ""] = _NO_CONSTANT
    return site


def passes_a_value(call: ast.Call, parameter: str, position: int | None, site: CallSite, fallback: Fallback) -> bool:
    """Whether ``call`` keeps away from the fallback of a parameter whose ``fallback`` value makes
    the function fall back to CUDA, as far as its file (``site``) shows: it passes another value, not
    through ``*args`` / ``**kwargs``; not a module name bound to the fallback value, nor an option
    (``args.device``) whose default is it, nor a parameter of a function or lambda around the call
    that defaults to it (a wrapper handing it on); or it leaves the parameter out where the default
    does not reach the fallback."""
    if not passes_argument(call, parameter, position, unpacking_counts=False):
        unpacked = any(isinstance(a, ast.Starred) for a in call.args) or any(kw.arg is None for kw in call.keywords)
        return not fallback.omitted and not unpacked

    def reaches(node: ast.expr | None) -> bool:
        if isinstance(node, ast.Constant):
            return fallback.reached_by(node.value)
        return isinstance(node, ast.Name) and node.id in site.constants and fallback.reached_by(site.constants[node.id])

    value = call_argument(call, position, parameter)
    if value is None or reaches(value):
        return False
    if (isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id not in ("self", "cls")
            and value.attr in site.options):
        option = site.options[value.attr]
        return option is not _NO_CONSTANT and not fallback.reached_by(option)
    if not isinstance(value, ast.Name):
        return True
    around = [f for f in site.functions if f.lineno <= call.lineno <= (f.end_lineno or f.lineno)]
    return not any(argument.arg == value.id and reaches(default)
                   for function in around for argument, default in parameter_defaults(function.args))


def wraps_in_place(decorator: ast.expr) -> bool:
    """A decorator that wraps the function where it is defined and registers it nowhere:
    ``staticmethod``, ``classmethod``, ``property``, ``functools.*`` (``@functools.lru_cache``),
    ``torch.*`` (``@torch.no_grad()``)."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    root = target
    while isinstance(root, ast.Attribute):
        root = root.value
    return (isinstance(target, ast.Name) and target.id in ("staticmethod", "classmethod", "property")) or (
        isinstance(root, ast.Name) and root.id in ("functools", "torch") and root is not target)


def alias_binds(alias: ast.alias) -> str:
    """The name an import binds: ``import a.b`` binds ``a``, ``import a.b as c`` binds ``c``."""
    return alias.asname or alias.name.split(".")[0]


def import_binds(statement: ast.AST) -> list[str]:
    """The names an ``import`` or ``from ... import`` binds; none for any other node."""
    return [alias_binds(a) for a in statement.names] if isinstance(statement, (ast.Import, ast.ImportFrom)) else []


def bound_names(scope: ast.AST, stores: bool = True) -> set[str]:
    """Every name a node binds anywhere inside it, in any position: stores (unless ``stores`` is
    False), parameters, imports, definitions, ``except ... as``, pattern captures, ``global`` and
    ``nonlocal``."""
    found: set[str] = set()
    for node in walk_nodes(scope):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            if stores:
                found.add(node.id)
        elif isinstance(node, ast.arg):
            found.add(node.arg)
        elif isinstance(node, ast.alias):
            found.add(alias_binds(node))
        elif (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not scope) or (
                isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name):
            found.add(node.name)  # type: ignore[arg-type]
        elif isinstance(node, ast.MatchMapping) and node.rest:
            found.add(node.rest)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            found.update(node.names)
    return found


def forcing_end(function: ast.FunctionDef | ast.AsyncFunctionDef, flag: ast.expr,
                true_without_cuda: Callable[[ast.expr], bool]) -> int | None:
    """The last line of the statement that forces the name ``flag`` on wherever CUDA is absent, where
    the function leaves it so; None where none does.  That statement is one of the function's own
    body, ``flag = <...> or <a value true without CUDA>`` (``disable_cuda = disable_cuda or not
    torch.cuda.is_available()``; the ``or`` is true there whatever its other terms) or ``flag = <a
    value true without CUDA>``; no statement after it binds the name in any way (``bound_names``: a
    store, a walrus, a parameter of a lambda or nested function, an import, a ``match`` capture,
    ``global`` or ``nonlocal``), nor does a nested function, lambda or class before it, which runs
    when called.  Only a name: a dict's key (``args["disable_cuda"]``) may change through any other
    reference to the dict.  Whether a read sees it: ``forced_when_read``."""
    if not isinstance(flag, ast.Name):
        return None
    name = flag.id
    forcing = next((s for s in function.body if isinstance(s, ast.Assign) and len(s.targets) == 1
                    and isinstance(s.targets[0], ast.Name) and s.targets[0].id == name and (
                        isinstance(s.value, ast.BoolOp) and isinstance(s.value.op, ast.Or)
                        and any(map(true_without_cuda, s.value.values)) or true_without_cuda(s.value))), None)
    if forcing is None or name in bound_names(forcing.value):
        return None
    index = function.body.index(forcing)
    if any(name in bound_names(statement) for statement in function.body[index + 1:]):
        return None
    if any(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.Global, ast.Nonlocal))
           and name in bound_names(node) for statement in function.body[:index] for node in walk_nodes(statement)):
        return None
    return forcing.end_lineno or forcing.lineno


def forced_when_read(function: ast.FunctionDef | ast.AsyncFunctionDef, end: int | None, read: ast.Name) -> bool:
    """Whether ``read`` sees the flag that ``forcing_end`` found forced up to line ``end``: it comes
    after that statement and lies in no lambda of the function (a lambda may run after the flag changed)."""
    return end is not None and end < read.lineno and not any(
        isinstance(n, ast.Lambda) and (n.lineno, n.col_offset) <= (read.lineno, read.col_offset)
        <= (n.end_lineno or n.lineno, n.end_col_offset or 0) for n in walk_nodes(function))


def keyword_value(call: ast.Call, name: str):
    return next((kw.value for kw in call.keywords if kw.arg == name), None)


def parameter_defaults(arguments: ast.arguments):
    """(parameter, default) pairs of a function signature."""
    positional = arguments.posonlyargs + arguments.args
    pairs = list(zip(positional[len(positional) - len(arguments.defaults):], arguments.defaults))
    pairs += [(a, d) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults) if d is not None]
    return pairs


def attribute_token(node: ast.Attribute) -> tuple[int, int, int, int]:
    """Position of the attribute name itself (``cuda`` in ``model.cuda``), which is
    where a reader looks and where a suppression comment goes."""
    line, column = node_end(node)
    return (line, column - len(node.attr), line, column)


def method_token(call: ast.Call) -> tuple[int, int, int, int]:
    """From the method name to the end of the call when that is on the same line."""
    assert isinstance(call.func, ast.Attribute), "a method call"
    line, column, _, end = attribute_token(call.func)
    if node_end(call)[0] == line:
        end = node_end(call)[1]
    return (line, column, line, end)


def nested_statements(body):
    """Every statement, nested ones included, without descending into expressions."""
    for statement in body:
        yield statement
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            inner = getattr(statement, name, None)
            if inner:
                yield from nested_statements(inner)


def import_aliases(statements) -> dict[str, str]:
    aliases: dict[str, str] = {}
    for node in nested_statements(statements):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    top = alias.name.split(".", 1)[0]
                    aliases[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if alias.name != "*":
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version)[:3]) or (0,)


def fails_with(test: ast.expr, is_query: Callable[[ast.expr], bool], answer: int | bool,
               ranks: frozenset[str] = frozenset()) -> bool:
    """Does the assert test ``test`` certainly fail where each node ``is_query`` accepts holds
    ``answer``?  ``n_gpus >= 2``, ``2 <= n``, ``1 <= n <= 8``, ``not n < 2``, ``n != 0``, ``n and
    rank < n``, ``n > LOCAL_RANK`` where ``LOCAL_RANK`` is in ``ranks`` (known to be at least 0); any
    other expression leaves it unknown (no)."""
    value = _value_with(test, is_query, answer, ranks)
    return value is not None and not value


# What each comparison operator computes, for reading a test on known numbers.
COMPARE: dict[type, Callable[[int, int], bool]] = {
    ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b, ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b}


def _value_with(node: ast.expr, is_query: Callable[[ast.expr], bool], answer: int | bool,
                ranks: frozenset[str] = frozenset()) -> int | bool | None:
    """The value of ``node`` (an int or a bool) where the queries hold ``answer``; None if unknown.
    A name in ``ranks`` is known to be at least 0, nothing more."""
    if is_query(node):
        return answer
    if isinstance(node, ast.Constant) and isinstance(node.value, int):  # bool is an int
        return node.value
    if isinstance(node, ast.NamedExpr):
        return _value_with(node.value, is_query, answer, ranks)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _value_with(node.operand, is_query, answer, ranks)
        return None if inner is None else not inner
    if isinstance(node, ast.BoolOp):
        values = [_value_with(v, is_query, answer, ranks) for v in node.values]
        if isinstance(node.op, ast.And):
            if any(v is not None and not v for v in values):
                return False
            return True if all(v is not None for v in values) else None
        if any(v is not None and v for v in values):
            return True
        return False if all(v is not None for v in values) else None
    if isinstance(node, ast.Compare):
        left = _value_with(node.left, is_query, answer, ranks)
        previous: ast.expr | None = node.left
        unknown = False
        for op, right_node in zip(node.ops, node.comparators):
            right = _value_with(right_node, is_query, answer, ranks)
            compare = COMPARE.get(type(op))
            left_rank = left is None and previous is not None and _is_rank(previous, ranks)
            right_rank = right is None and _is_rank(right_node, ranks)
            if (left == 0 and right_rank and isinstance(op, ast.Gt)) or (right == 0 and left_rank and isinstance(op, ast.Lt)):
                return False  # `count > LOCAL_RANK` under `if LOCAL_RANK != -1:`: 0 > a rank never holds
            if left is None or right is None or compare is None:
                unknown = True
            elif not compare(left, right):
                return False  # a chain fails at its first false link
            left, previous = right, right_node
        return None if unknown else True
    return None


def _is_rank(node: ast.expr, ranks: frozenset[str]) -> bool:
    return isinstance(node, ast.Name) and node.id in ranks


# torch.library's calls that register a function as an op's kernel for some devices.
_KERNEL_REGISTRATIONS = frozenset({"custom_op", "register_kernel", "impl"})


def kernel_device_arguments(call: ast.expr) -> list[ast.expr] | None:
    """The arguments naming the devices (or dispatch keys) a torch.library registration is for:
    ``custom_op(name, device_types=...)``; ``register_kernel(op, device_types)`` or
    ``op.register_kernel(device_types)``; ``impl("lib::op", types)`` or ``impl(lib, "op",
    dispatch_key)``.  None for any other call (``self.impl(...)``, a ``custom_op`` of another
    module's spelling ``x.custom_op``)."""
    if not isinstance(call, ast.Call):
        return None
    func, args = call.func, call.args
    name = last_name(func)
    if name not in _KERNEL_REGISTRATIONS:
        return None
    on_library = not isinstance(func, ast.Attribute) or bool(re.fullmatch(r"(?:torch\.)?library",
                                                                           ast.unparse(func.value)))
    if name == "custom_op":
        if not on_library:
            return None
        values: list[ast.expr] = []
    elif name == "register_kernel":
        values = args[1:2] if on_library else args[:1]
    elif not on_library:
        return None
    else:
        by_name = bool(args) and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str)
        values = args[1:2] if by_name else args[2:3]
    return [*values, *(k.value for k in call.keywords if k.arg in ("device_types", "types", "dispatch_key"))]


def kernel_device_values(call: ast.expr) -> list[str | None] | None:
    """The devices a torch.library registration is for, as written (see kernel_device_arguments),
    None standing for a ``None`` constant; None for another call or a device chosen at run time."""
    values = kernel_device_arguments(call)
    if values is None:
        return None
    found: list[str | None] = []
    for value in values:
        for item in value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]:
            if not (isinstance(item, ast.Constant) and (item.value is None or isinstance(item.value, str))):
                return None
            found.append(item.value)
    return found


def kernel_devices(call: ast.expr) -> list[str] | None:
    """The devices a torch.library registration is for, lowercased (see kernel_device_arguments);
    None for another call or a device chosen at run time (which, the scan cannot tell)."""
    values = kernel_device_values(call)
    if values is None or None in values:
        return None
    return [value.lower() for value in values if value is not None]
