"""Is a line on the default path of a user without CUDA?  The burden of proof is on the finding:
a line that runs only when a user option is set (``if args.fp16:``, ``if self.use_amp and ...``,
``if not use_ddp: return`` before it) is opt-in unless the file shows the option on by default,
and a line that runs only when a flag the file derives from CUDA is set (``use_gpu =
torch.cuda.device_count() > 0``) is guarded.  Data conditions (``x is None``, ``isinstance``,
``len``, comparisons, loops) leave the line on the default path.

Everything here reads the AST of one file; no option or package is known by name.
"""
from __future__ import annotations

import ast
import collections
from torchport.scan import debug_logging
from torchport.scan.detectors.syntax import COMPARE, bound_names, keyword_value, walk_nodes
import dataclasses
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchport.scan.policy import FileContext

# A value computed from the CUDA runtime or a GPU count: `torch.cuda.is_available()`,
# `config.total_visible_gpus > 0`, `n_gpu > 1`.
_CUDA_DERIVED = re.compile(r"\btorch\.cuda\.|\bis_available\(|\bdevice_count\(|\bn_?gpus?\b|\w*_gpus\b",
                           re.IGNORECASE)

# A value (an availability query, a tensor test) that also asks for another accelerator
# (`... or torch.backends.mps.is_available()`): it may be on where CUDA is absent, so it is not
# derived from CUDA.  policy.py reads it too.
OTHER_ACCELERATOR = re.compile(r"\b(mps|xpu|npu|hpu|mlu|xla|tpu|is_mps|is_xpu|is_xla)\b")

# `Trainer(model, amp=True)`: a keyword argument, which may pass an option's value.
_KEYWORD_ARGUMENT = re.compile(r"[(,]\s*\w+\s*=[^=]")

# How deep one option is followed through the names it is copied from.
_DEPTH = 4

Function = ast.FunctionDef | ast.AsyncFunctionDef


# What a verdict says: the line runs only when the user opts in, or only under a flag
# computed from CUDA.
OPT_IN = "opt-in"
CUDA_DERIVED = "cuda-derived"


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Why a line is off the default path: ``kind`` (OPT_IN or CUDA_DERIVED) and ``option``,
    the source of the test that decides."""

    kind: str
    option: str
    # an opt-in that reads no value a caller passes (debug logging): off by default whoever calls
    switch: bool = False
    # the verdict leans on debug logging being off, which another file of the package may turn on
    # (debug_logging.on_in_package): for `if debug or profile:` too, which is no switch
    debug: bool = False


def _key(atom: ast.expr) -> str | None:
    """The name an option is stored under: ``fp16`` of ``args.fp16``, ``self.args.fp16``,
    ``cfg["fp16"]`` and ``fp16``."""
    if isinstance(atom, ast.Name):
        return atom.id
    if isinstance(atom, ast.Attribute):
        return atom.attr
    if isinstance(atom, ast.Subscript) and isinstance(atom.slice, ast.Constant) and isinstance(atom.slice.value, str):
        return atom.slice.value
    return None


def _truthy_constant(value: ast.expr | None) -> bool:
    return isinstance(value, ast.Constant) and bool(value.value)


def _off_constant(value: ast.expr | None) -> bool:
    return isinstance(value, ast.Constant) and not value.value


class _Stores:
    """Every value the file stores under a name: assignments to a name or an attribute, class
    fields, dict entries, argparse options (their default) and parameters (their default)."""

    def __init__(self, context: FileContext) -> None:
        from torchport.scan import device_guard  # it imports this module

        self.values: dict[str, list[ast.expr | None]] = {}
        self.parameters: dict[str, list[ast.expr | None]] = {}
        # the names of command-line options (`parser.add_argument("--gpu")` stores `gpu`)
        self.command_line: set[str] = set()
        # `if t > length and x.is_cuda: self.cpu_cache = True`: the True values stored only where
        # a device test holds (by id)
        self.true_on_device: set[int] = set()
        # the parameters of each function of the file by its name, and of each class's __init__ by the
        # class's name: which keyword arguments of a call pass one of this file's options
        self.callables: dict[str, set[str]] = {}
        self._rebound: dict[int, set[str]] = {}
        for statement in context.statements:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for argument, default in _own_parameters(statement):
                    self.parameters.setdefault(argument, []).append(default)
                    self.callables.setdefault(statement.name, set()).add(argument)
            elif isinstance(statement, ast.ClassDef):
                for member in statement.body:
                    if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)) and member.name == "__init__":
                        self.callables.setdefault(statement.name, set()).update(n for n, _ in _own_parameters(member))
        for statement in context.statements:
            if isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                self._assignment(statement, context)
            elif isinstance(statement, ast.If):
                truths = [s.value for s in statement.body if isinstance(s, ast.Assign)
                          and isinstance(s.value, ast.Constant) and s.value.value is True]
                # the device test is read only for an `if` that stores True (it may read the whole file)
                if truths and device_guard.is_device_test(context, statement.test, True):
                    self.true_on_device.update(map(id, truths))
            if isinstance(statement, ast.stmt) and not any(hasattr(statement, f) for f in ("body", "orelse")):
                # dict entries and argparse options sit inside expressions: walk only the statements
                # whose text can hold them
                text = "".join(context.lines[statement.lineno - 1:statement.end_lineno or statement.lineno])
                if "{" in text or "add_argument" in text or _KEYWORD_ARGUMENT.search(text):
                    self._expressions(statement)
        # `setattr(self, "cpu_cache", True)`, `self.__dict__.update(...)`: stores this reading does not see
        self.hidden_stores = "setattr(" in context.text or "__dict__" in context.text

    def _assignment(self, node: ast.Assign | ast.AnnAssign | ast.AugAssign, context: FileContext) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            for item in (target.elts if isinstance(target, ast.Tuple) else [target]):
                name = _key(item)
                if name is not None:
                    unpacked = isinstance(target, ast.Tuple) or isinstance(node, ast.AugAssign)
                    value = None if unpacked else node.value
                    if isinstance(item, ast.Attribute) and isinstance(value, ast.Name) and value.id == name:
                        value = self._parameter_copied(context, node, name, value)
                    self.values.setdefault(name, []).append(value)

    def _expressions(self, statement: ast.stmt) -> None:
        for node in walk_nodes(statement):
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values):
                    if isinstance(key, ast.Constant) and isinstance(key.value, str):
                        self.values.setdefault(key.value, []).append(value)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
                self._option(node)
            elif isinstance(node, ast.Call):
                # `Trainer(model, amp=torch.cuda.is_available())`, `super().__init__(amp=True)`: the
                # value passed where a function or class of this file is called (positional arguments
                # are not matched to parameters)
                callee = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
                for keyword in node.keywords:
                    if keyword.arg and keyword.arg in self.callables.get(callee, ()):
                        self.values.setdefault(keyword.arg, []).append(keyword.value)

    def _parameter_copied(self, context: FileContext, store: ast.stmt, name: str, value: ast.expr) -> ast.expr | None:
        """``self.amp = amp`` in a function whose parameter ``amp`` it never rebinds: the parameter's
        default (None when it has none: every caller passes it).  Any other name stays as it is."""
        function = context.innermost_function(store.lineno)
        if function is None:
            return value
        own = dict(_own_parameters(function))
        return own[name] if name in own and name not in self.rebound_in(function) else value

    def rebound_in(self, function: Function) -> set[str]:
        """The names ``function`` assigns anywhere in its body, read once per function."""
        if id(function) not in self._rebound:
            self._rebound[id(function)] = {n.id for n in walk_nodes(function)
                                           if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        return self._rebound[id(function)]

    def _option(self, call: ast.Call) -> None:
        flags = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        keywords = {k.arg: k.value for k in call.keywords if k.arg}
        dest = keywords.get("dest")
        long = next((f for f in flags if f.startswith("--")), None)
        if isinstance(dest, ast.Constant) and isinstance(dest.value, str):
            name = dest.value
        elif long is not None:
            name = long[2:].replace("-", "_")
        else:
            return
        action = keywords.get("action")
        if "default" in keywords:
            value: ast.expr = keywords["default"]
        elif isinstance(action, ast.Constant) and action.value == "store_false":
            value = ast.Constant(True)
        else:  # store_true, or an option that is None unless given
            value = ast.Constant(False if isinstance(action, ast.Constant) and action.value == "store_true" else None)
        self.values.setdefault(name, []).append(value)
        self.command_line.add(name)


def _stores(context: FileContext) -> _Stores:
    found = getattr(context, "_default_path_stores", None)
    if found is None:
        found = _Stores(context)
        context._default_path_stores = found  # type: ignore[attr-defined]
    return found


def _option(context: FileContext, atom: ast.expr, function: Function | None, depth: int = 0) -> str | None:
    """The kind of a value tested for truth: OPT_IN when nothing in the file shows it true by
    default, CUDA_DERIVED when the file computes it from CUDA, None when it is on by default
    or computed from data."""
    name = _key(atom)
    if name is None or depth > _DEPTH:
        return None
    root = atom
    while isinstance(root, ast.Attribute):
        root = root.value
    if atom is not root and isinstance(root, ast.Name) and root.id == "torch":
        # torch's own, not an option: a CUDA build's flags (`torch.has_cuda`, `torch.version.cuda`), or
        # anything else (`torch.cuda.is_available` uncalled is a function, always true)
        return CUDA_DERIVED if ast.unparse(atom) in ("torch.has_cuda", "torch.version.cuda") else None
    stores = _stores(context)
    own = dict(_own_parameters(function)) if function is not None and isinstance(atom, ast.Name) else {}
    if name in own and name not in stores.rebound_in(function):  # type: ignore[arg-type]  # own is empty without one
        default = own[name]
        # `compiled=False` here, but the class that calls it takes `compiled: bool = True`
        on_elsewhere = any(_truthy_constant(v) for v in stores.parameters.get(name, []) + stores.values.get(name, []))
        return OPT_IN if _off_constant(default) and not on_elsewhere else None
    values = list(stores.values.get(name, []))
    if not values and isinstance(atom, ast.Attribute) and isinstance(atom.value, ast.Name) and atom.value.id == "self":
        return None  # an attribute the class inherits (`self.training`): its default is elsewhere
    if isinstance(atom, ast.Name) and not values:
        values = list(stores.parameters.get(name, []))
        if not values or not all(_off_constant(v) for v in values):
            return None  # a parameter every call must pass, or a name from elsewhere
    kinds = [_value_kind(context, value, function, depth) for value in values]
    if "device-true" in kinds:
        # true only under a device test counts as computed from CUDA when every other store is off
        if set(kinds) <= {"device-true", "off"} and not stores.hidden_stores:
            return CUDA_DERIVED
        kinds = ["true" if k == "device-true" else k for k in kinds]
    if "cuda" in kinds:
        return CUDA_DERIVED
    if any(k in ("true", "data") for k in kinds):
        return None
    return OPT_IN


def _own_parameters(function: Function) -> list[tuple[str, ast.expr | None]]:
    arguments = function.args
    positional = arguments.posonlyargs + arguments.args
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(arguments.defaults))
    return list(zip([a.arg for a in positional + arguments.kwonlyargs],
                    defaults + list(arguments.defaults) + list(arguments.kw_defaults)))


def _value_kind(context: FileContext, value: ast.expr | None, function: Function | None, depth: int) -> str:
    """"true", "off", "cuda", "data", "option" (a copy of another option, off by default) or
    "device-true" (a True stored only where a device test holds)."""
    if value is None:
        return "data"
    if isinstance(value, ast.Constant):
        if id(value) in _stores(context).true_on_device:
            return "device-true"
        return "true" if value.value else "off"
    if OTHER_ACCELERATOR.search(context.source(value)):
        return "data"
    if isinstance(value, ast.IfExp):
        if all(isinstance(v, ast.Constant) for v in (value.body, value.orelse)):
            # `True if torch.cuda.is_available() else False`, `True if t > length else False`
            return "cuda" if _CUDA_DERIVED.search(context.source(value.test)) else "data"
        # `torch.cuda.is_available() if gpu is None else gpu`: the caller's value may decide
        kinds = {_value_kind(context, v, function, depth + 1) for v in (value.body, value.orelse)}
        return "cuda" if kinds <= {"cuda", "off"} and "cuda" in kinds else "data"
    if _holds_without_devices(context, value):
        return "true"  # `torch.cuda.device_count() >= 0`: true where CUDA is absent too
    if _CUDA_DERIVED.search(context.source(value)):
        return "cuda"
    if isinstance(value, (ast.Name, ast.Attribute, ast.Subscript)):
        kind = _option(context, value, None, depth + 1)
        return "cuda" if kind == CUDA_DERIVED else "option" if kind == OPT_IN else "data"
    if isinstance(value, ast.BoolOp):
        operands = [_value_kind(context, v, function, depth + 1) for v in value.values]
        if "cuda" in operands:
            return "cuda"
        if isinstance(value.op, ast.And) and any(k in ("off", "option") for k in operands):
            return "option"
        return "data"
    if isinstance(value, ast.Call):
        # `getattr(args, "fp16", False)`, `options.get("fp16")`: the stated default decides.
        if isinstance(value.func, ast.Name) and value.func.id == "getattr" and len(value.args) == 3:
            return "off" if _off_constant(value.args[2]) else "data"
        if isinstance(value.func, ast.Attribute) and value.func.attr == "get" and 1 <= len(value.args) <= 2:
            return "off" if len(value.args) == 1 or _off_constant(value.args[1]) else "data"
    return "data"


def _cuda_count(context: FileContext, value: ast.expr | None) -> bool:
    """``torch.cuda.device_count()`` spelled so: the count the readings below follow."""
    return isinstance(value, ast.Call) and context.source(value) == "torch.cuda.device_count()"


def _holds_without_devices(context: FileContext, value: ast.expr) -> bool:
    """``torch.cuda.device_count() >= 0`` (or ``> -1``, ``!= 1``): a comparison a count of 0 passes."""
    if not (isinstance(value, ast.Compare) and len(value.ops) == 1 and type(value.ops[0]) in COMPARE
            and _cuda_count(context, value.left)):
        return False
    bound = _int_constant(value.comparators[0])
    return bound is not None and COMPARE[type(value.ops[0])](0, bound)


def _truth_test(context: FileContext, test: ast.expr, taken: bool, function: Function | None) -> Verdict | None:
    """Whether the branch ``taken`` of ``test`` runs only when an option is set."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _truth_test(context, test.operand, not taken, function)
    if isinstance(test, ast.BoolOp):
        verdicts = [_truth_test(context, v, taken, function) for v in test.values]
        # `a and b` taken, or `a or b` not taken: every operand holds, so one option is enough.
        if isinstance(test.op, ast.And) == taken:
            return next((v for v in verdicts if v is not None), None)
        found = [v for v in verdicts if v is not None]
        if len(found) < len(verdicts):
            return None
        # `debug or profile`: off by default whoever calls only when every operand is a switch
        return dataclasses.replace(found[0], switch=all(v.switch for v in found), debug=any(v.debug for v in found))
    if isinstance(test, ast.Compare):
        return _unset_comparison(context, test, taken, function) or _count_comparison(context, test, taken, function)
    if isinstance(test, ast.Call):
        return _debug_logging(context, test) if taken else None
    if not taken or not isinstance(test, (ast.Name, ast.Attribute, ast.Subscript)):
        return None
    kind = _option(context, test, function)
    return Verdict(kind, context.source(test)) if kind else None


def _is_none(value: ast.expr | None) -> bool:
    return isinstance(value, ast.Constant) and value.value is None


def _is_minus_one(value: ast.expr | None) -> bool:
    return (isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub)
            and isinstance(value.operand, ast.Constant) and value.operand.value == 1)


# A comparison that holds only once a user gives an option whose default means "unset":
# `args.gpu is not None` (default None), `args.gpu >= 0` (default -1), and their negations
# on the other branch.
_SET_WHEN_TAKEN: dict[type, tuple[Callable[[ast.expr | None], bool], bool]] = {
    ast.IsNot: (_is_none, True), ast.NotEq: (_is_none, True), ast.Is: (_is_none, False), ast.Eq: (_is_none, False),
}


def _unset_operator(test: ast.Compare) -> tuple[Callable[[ast.expr | None], bool], bool] | None:
    """For ``args.gpu is not None`` or ``args.gpu >= 0``: how the unset default looks, and on
    which branch the option is set."""
    if len(test.ops) != 1 or not isinstance(test.left, ast.Attribute):
        return None
    operator, right = type(test.ops[0]), test.comparators[0]
    if operator in _SET_WHEN_TAKEN and _is_none(right):
        return _SET_WHEN_TAKEN[operator]
    if ((operator is ast.GtE and isinstance(right, ast.Constant) and right.value == 0)
            or (operator in (ast.Gt, ast.NotEq) and _is_minus_one(right))):
        return _is_minus_one, True
    if ((operator is ast.Lt and isinstance(right, ast.Constant) and right.value == 0)
            or (operator in (ast.LtE, ast.Eq) and _is_minus_one(right))):
        return _is_minus_one, False  # `if args.local_rank == -1: ... else:`, the else is the option's
    return None


def _unset_comparison(context: FileContext, test: ast.Compare, taken: bool, function: Function | None) -> Verdict | None:
    """``if args.gpu is not None:`` (or ``>= 0`` against a default of -1) on the branch that
    runs only when the user gave the command-line option: opt-in when every value the file
    stores under it is the "unset" default."""
    shape = _unset_operator(test)
    if shape is None or taken != shape[1] or "set_defaults(" in context.text:
        return None  # `parser.set_defaults(gpu=0)` changes a default the options' stores do not show
    unset = shape[0]
    name = _key(test.left)
    stores = _stores(context)
    # only a command-line option: a parameter that defaults to None is as often data (`mask=None`)
    if name is None or name not in stores.command_line:
        return None
    values = stores.values.get(name, [])
    if not values or not all(unset(v) for v in values):
        return None
    return Verdict(OPT_IN, context.source(test.left))


def _int_constant(node: ast.expr) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return -node.operand.value if _is_minus_one(node) else None  # type: ignore[attr-defined]


def _count_shape(test: ast.Compare, taken: bool) -> Callable[[int], bool] | None:
    """For ``n_gpu > 1`` (or ``>= 2``, ``!= 0``; ``<= 1`` on its other branch): whether a count lets
    the branch ``taken`` run, when a count of 0 does not; else None."""
    if (len(test.ops) != 1 or not isinstance(test.left, (ast.Name, ast.Attribute))
            or type(test.ops[0]) not in COMPARE):
        return None
    bound = _int_constant(test.comparators[0])
    if bound is None:
        return None
    compare = COMPARE[type(test.ops[0])]

    def runs(count: int) -> bool:
        return compare(count, bound) == taken
    # `n_gpu == -1` or `< 0` is a sentinel no count takes: the value comes from elsewhere
    return None if runs(0) or not any(map(runs, range(1, 65))) else runs


def _count_comparison(context: FileContext, test: ast.Compare, taken: bool, function: Function | None) -> Verdict | None:
    """``if args.n_gpu > 1:`` where every value the file stores under ``n_gpu`` is
    ``torch.cuda.device_count()`` or a number the branch refuses (``args.n_gpu = 1`` on the
    distributed path): the branch runs only where CUDA counts devices.  Not for a command-line
    option, a parameter named so anywhere in the file, or a name or attribute bound any other way
    (``+=``, a loop, a tuple, ``setattr``, a dict key or keyword argument of that name).  Stores in
    other files are not seen: one that sets ``args.n_gpu`` there is a hole this reading shares
    with the truth tests above."""
    runs = _count_shape(test, taken)
    name = _key(test.left)
    if runs is None or name is None or "torch.cuda.device_count()" not in context.text:
        return None  # the text test spares the walks below in the files that count nothing
    stores = _stores(context)
    values = stores.values.get(name, [])
    # a command-line option's default is a value without a store, a parameter a binding without one;
    # `vars(args).update(...)` stores where no reading sees
    if (stores.hidden_stores or not values or "vars(" in context.text
            or _bound_otherwise(context, name, len(values))
            or not _counted_as(context, ast.unparse(test.left))):
        return None
    for value in values:
        number = _int_constant(value) if value is not None else None
        if number is not None:
            if runs(number):
                return None
        elif not _cuda_count(context, value):
            return None
    if _read_before_counted(context, name):
        return None
    return Verdict(CUDA_DERIVED, context.source(test))


def _sentinel(operator: ast.cmpop, right: ast.expr) -> bool:
    """``== -1``, ``< 0``, ``is None``: a comparison no count tells apart from another, which only
    asks whether the value is a count at all."""
    if isinstance(operator, (ast.Is, ast.IsNot)):
        return True
    bound = _int_constant(right)
    compare = COMPARE.get(type(operator))
    return bound is not None and compare is not None and len({compare(count, bound) for count in range(65)}) == 1


def _counted_as(context: FileContext, target: str) -> bool:
    """The file stores ``torch.cuda.device_count()`` in exactly what the test reads (``args.n_gpu``,
    not ``self.n_gpu`` nor a local ``n_gpu``): a count stored on another object says nothing of this
    one, and constants alone say nothing of CUDA.  Read once a file."""
    counted = context.__dict__.get("_default_path_counted")
    if counted is None:
        counted = {ast.unparse(t) for node in walk_nodes(context.tree)
                   if isinstance(node, ast.Assign) and _cuda_count(context, node.value) for t in node.targets}
        context.__dict__["_default_path_counted"] = counted
    return target in counted


def _read_before_counted(context: FileContext, name: str) -> bool:
    """``if cfg.n_gpu == -1: cfg.n_gpu = torch.cuda.device_count()``: a scope that reads the name
    before (or, in a loop, around) the statement storing the count, so the value it replaces came
    from somewhere the file does not show (a config, another module's option).  Read once a name."""
    cache: dict[str, bool] = context.__dict__.setdefault("_default_path_read_first", {})
    if name not in cache:
        cache[name] = _reads_first(context, name)
    return cache[name]


def _reads_first(context: FileContext, name: str) -> bool:
    # `hasattr(args, "n_gpu")`, `getattr(args, "n_gpu", None)`: a read the tree shows as a string
    if re.search(r"[\"']" + re.escape(name) + r"[\"']", context.text):
        return True
    for node in walk_nodes(context.tree):
        if (isinstance(node, ast.Compare) and len(node.ops) == 1 and _key(node.left) == name
                and _sentinel(node.ops[0], node.comparators[0])):
            return True  # `if cfg.n_gpu == -1: detect_devices(cfg)`, wherever the count is then stored
    for node in walk_nodes(context.tree):
        if not (isinstance(node, ast.Assign) and any(_key(t) == name for t in node.targets)
                and _cuda_count(context, node.value)):
            continue
        function = context.innermost_function(node.lineno)
        scope: ast.AST = function if function is not None else context.tree
        for inner in walk_nodes(scope):
            if isinstance(inner, (ast.For, ast.AsyncFor, ast.While)) and inner.lineno <= node.lineno <= (
                    inner.end_lineno or inner.lineno):
                return True
            if (isinstance(inner, (ast.Name, ast.Attribute)) and isinstance(inner.ctx, ast.Load)
                    and _key(inner) == name and inner.lineno <= (node.end_lineno or node.lineno)):
                return True
    return False


def _bound_otherwise(context: FileContext, name: str, stored: int) -> bool:
    """Whether the file binds ``name`` (a name, or an attribute of that name) more times than the
    plain assignments ``_Stores`` read, or in a way they do not: a loop or ``with`` target, a
    walrus, an import, a parameter, a ``global``, a dict key, a keyword argument
    (``Namespace(n_gpu=8)``)."""
    found = getattr(context, "_default_path_bindings", None)
    if found is None:
        counts: collections.Counter[str] = collections.Counter()
        keys: set[object] = set()
        for node in walk_nodes(context.tree):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                counts[node.id] += 1
            elif isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
                counts[node.attr] += 1
            elif isinstance(node, ast.Dict):
                keys.update(k.value for k in node.keys if isinstance(k, ast.Constant))
            elif isinstance(node, ast.keyword):
                keys.add(node.arg)
        found = (counts, keys, bound_names(context.tree, stores=False))
        context._default_path_bindings = found  # type: ignore[attr-defined]
    counts, keys, other = found
    return counts[name] != stored or name in keys or name in other


def _debug_logging(context: FileContext, test: ast.Call) -> Verdict | None:
    """``if logger.isEnabledFor(logging.DEBUG):``: debug logging, which is off unless the user turns
    it on, and which this file does not turn on (debug_logging.py; the package's other files are
    the caller's to read, with ``Verdict.switch``)."""
    if not debug_logging.is_debug_test(test) or debug_logging.turns_debug_on(context.text):
        return None
    return Verdict(OPT_IN, context.source(test), switch=True, debug=True)


def could_be_opt_in(test: ast.expr, taken: bool) -> bool:
    """Whether ``_truth_test`` might answer yes, from the test's shape alone: some option is
    tested for truth on the branch taken.  Lets a caller skip the whole file's parse."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return could_be_opt_in(test.operand, not taken)
    if isinstance(test, ast.BoolOp):
        return any(could_be_opt_in(v, taken) for v in test.values)
    if isinstance(test, ast.Compare):
        shape = _unset_operator(test)
        return (shape is not None and shape[1] == taken) or _count_shape(test, taken) is not None
    if isinstance(test, ast.Call):
        return taken and isinstance(test.func, ast.Attribute) and test.func.attr == "isEnabledFor"
    return taken and isinstance(test, (ast.Name, ast.Attribute, ast.Subscript))


def _exits(body: list[ast.stmt]) -> bool:
    """``if not use_ddp: return``: the rest runs only with the option.  Not a raise: ``if not
    args.source: raise SystemExit(1)`` checks a value every run must give."""
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Continue))


def conditions(context: FileContext, line: int, column: int, gates: bool = True) -> Iterator[tuple[ast.expr, bool]]:
    """Every (test, branch) that must hold for ``line`` to run, innermost function only for
    the early exits and asserts before it.  ``gates``: whether an ``and`` before the column
    counts (not for a device choice, `"cuda" if args.cuda and torch.cuda.is_available() else
    "cpu"`, whose fallback is what runs by default)."""
    for statement in context.ifs:
        if statement.body[0].lineno <= line <= (statement.body[-1].end_lineno or 0):
            yield statement.test, True
        elif statement.orelse and statement.orelse[0].lineno <= line <= (statement.orelse[-1].end_lineno or 0):
            yield statement.test, False
    for node in context._expressions_at(line):
        if isinstance(node, ast.IfExp):
            if context.holds(node.body, line, column):
                yield node.test, True
            elif context.holds(node.orelse, line, column):
                yield node.test, False
        elif gates and isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
            for index, value in enumerate(node.values[1:], 1):
                if context.holds(value, line, column):
                    for before in node.values[:index]:
                        yield before, True
    function = context.innermost_function(line)
    if function is None:
        return
    for step in function.body:
        if step.lineno >= line:
            break
        if (step.end_lineno or step.lineno) >= line:
            continue
        if isinstance(step, ast.If) and not step.orelse and _exits(step.body):
            yield step.test, False
        elif isinstance(step, ast.Assert):
            yield step.test, True


def off_default_path(context: FileContext, line: int, column: int, gates: bool = True) -> Verdict | None:
    """Why the line runs only off the default path of a user without CUDA, or None when
    nothing shows that."""
    function = context.innermost_function(line)
    cuda_derived = None
    for test, taken in conditions(context, line, column, gates):
        verdict = _truth_test(context, test, taken, function)
        if verdict is not None and verdict.kind == OPT_IN:
            return verdict
        cuda_derived = cuda_derived or verdict
    return cuda_derived


def enabling_option(context: FileContext, line: int, column: int) -> str | None:
    """``GradScaler(enabled=amp)``, ``autocast(enabled=self.fp16)``: the option, off by default, that
    the ``enabled=`` of the call named at the position holds, read as ``if amp:`` is; with it off the
    call does nothing.  Only a call named by a plain dotted name: in ``Trainer(m.cuda()).fit(
    enabled=x)`` the ``.cuda()`` runs either way, as do the call's arguments.  An ``enabled=``
    computed from CUDA is no option: AMP then silently stays off on the other accelerators."""
    for node in context.calls_at(line):
        if context.holds(node.func, line, column) and not any(isinstance(n, ast.Call) for n in walk_nodes(node.func)):
            enabled = keyword_value(node, "enabled")
            source = "" if enabled is None else context.source(enabled)
            if enabled is None or (_CUDA_DERIVED.search(source) and not OTHER_ACCELERATOR.search(source)):
                continue  # `enabled=self.amp and torch.cuda.is_available()`: off elsewhere whatever the option
            verdict = _truth_test(context, enabled, True, context.innermost_function(line))
            if verdict is not None and verdict.kind == OPT_IN:
                return verdict.option
    return None
