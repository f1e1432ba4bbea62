"""What every detector works with: one file's names, bindings and findings.

``AnalyzerState`` resolves names through imports and simple assignments, records
findings, and builds the text that rewrites insert.  The core walk
(``core.AnalyzerCore``) and every rule family's detector derive from it; the
families are composed with the core into one visitor in ``analyzer.py``.
"""
from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from torchport.scan.detectors.shared import ANY_VERSION, DEVICE_NAME, HELPER_NAME
from torchport.scan.detectors.syntax import (
    CallSite,
    character_column,
    closing_paren,
    import_aliases,
    insert_at,
    node_start,
    parameter_defaults,
    string_value,
    walk_nodes,
)
from torchport.scan.model import Edit, Finding, Fix, Related


class AnalyzerState(ast.NodeVisitor):
    # Set by the core from names.py, which imports the families (so this module cannot).
    cuda_renames: dict[str, tuple[str, str, str]]
    reference_rule: Callable[[str], str | None]

    def __init__(self, tree: ast.Module, text: str, path: str):
        self.path = path
        self.lines = text.splitlines()
        self.findings: list[Finding] = []
        self.claimed: set[int] = set()  # ids of nodes already reported
        self.by_node: dict[int, Finding] = {}  # id(node) -> its finding
        self.aliases = import_aliases(tree.body)
        # scope (id of the module, class or function node) -> name -> assigned values;
        # None stands for a binding whose value is unknown (a parameter, a loop variable).
        self.bindings: dict[int, dict[str, list]] = {}
        self.parents: dict[int, ast.stmt] = {}  # id(Expr call) -> its statement, for seeding
        self.blocks: dict[int, list] = {}  # id(statement) -> the statement list holding it
        self.own_is_cuda = False  # the file defines an attribute or function called is_cuda
        self.module_scope = id(tree)
        self.class_names: list[str] = []  # enclosing classes; "" for a function (its defs are no methods)
        # names of the enclosing classes (with their bases) and functions, outermost first
        self.context_names: list[str] = []
        self._calls: dict[str, list[ast.Call]] | None = None  # by callee name, from the whole file
        self._definitions: dict[str, ast.stmt] | None = None  # module-level defs and classes, by name
        self._whole_imports: dict[str, str] = {}  # import_aliases of the whole file, filled with _calls
        self._functions: dict[int, ast.FunctionDef | ast.AsyncFunctionDef] = {}  # every def of the whole file, by line
        self._whole_tree: ast.Module | None = None  # the whole file, parsed with _calls
        self._call_site: CallSite | None = None  # for passes_a_value, read when first needed
        self._narrowing_names: set[str] | None = None  # names rebound as `x = x and ...` in the file
        self._property_returns: dict[str, str] | None = None  # `@property def NAME(self): return X`: X by NAME
        self._open_queries: set[int] = set()  # `or` tests being asked about, against self-reference
        self._forcing: set[str] | None = None  # names a statement may force on without CUDA (`x = x or not ...`)
        self._forcing_ends: dict[tuple[int, str], int | None] = {}  # (id of a def, flag) -> syntax.forcing_end
        self._self_flags: dict[str, list[ast.expr]] = {}  # `self.NAME = value` in the whole file, by NAME
        self._text: str | None = None  # the lines joined, made when first searched
        self._collect(tree.body, id(tree))
        self.scopes: list[int] = [id(tree)]
        self.host: set[int] = set()  # nodes inside an explicitly host-side (CPU) expression
        self.empty_safe: set[int] = set()  # comprehensions whose empty result is fine: `any(...)`, `sum(...)`
        self._cast_inputs_named: bool | None = None  # the file's text names cast_inputs (devices.py)
        self._autocast_registrars: dict[str, bool] = {}  # function name -> registers an autocast kernel only
        self._calls_by_block: dict[int, list[tuple[ast.Call, str, list[str]]]] = {}  # (call, name, its arguments)
        # scope -> loop variables over a state dict's items (checkpoint conversion, on the host)
        self.host_names: dict[int, set[str]] = {}
        self.moved: set[int] = set()  # factory calls whose result is moved to a device
        self.table_entries: set[int] = set()  # lists and tuples that are values of a dict literal
        self.in_message = 0
        self.chain_portable: dict[int, bool] = {}
        # id of the last `if` of an accelerator dispatch -> whether the chain has a CPU branch
        self.dispatch_defaults: dict[int, bool] = {}
        self.torch = next((name for name, q in self.aliases.items() if q == "torch"), None)
        self.T = self.torch or "torch"

    # -- traversal: ast.NodeVisitor's, with the visit_ method looked up once per node
    # class (visiting is about a third of the time spent on a file that is analysed).

    _visitors: dict[type, Any] = {}  # node class -> the unbound visit_ method

    def visit(self, node):
        visitor: Any = self._visitors.get(node.__class__)
        if visitor is None:
            visitor = getattr(type(self), "visit_" + node.__class__.__name__, AnalyzerState.generic_visit)
            self._visitors[node.__class__] = visitor
        return visitor(self, node)

    def generic_visit(self, node):
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        self.visit(item)
            elif isinstance(value, ast.AST):
                self.visit(value)

    # -- name resolution -----------------------------------------------------------------

    def _bind(self, scope: int, name: str, value) -> None:
        self.bindings.setdefault(scope, {}).setdefault(name, []).append(value)

    def _bind_targets(self, scope: int, target) -> None:
        for node in walk_nodes(target):
            if isinstance(node, ast.Name):
                self._bind(scope, node.id, None)
            elif isinstance(node, ast.Attribute) and node.attr == "is_cuda" and isinstance(node.ctx, ast.Store):
                self.own_is_cuda = True

    def _collect(self, body, scope: int) -> None:
        """Bindings per scope, module-level torch.cuda aliases, and statement blocks."""
        for node in body:
            self.blocks[id(node)] = body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.name == "is_cuda":
                    self.own_is_cuda = True
                self._bind(scope, node.name, None)
                arguments = node.args
                inner = id(node)
                for argument, default in parameter_defaults(arguments):
                    self._bind(inner, argument.arg, default)
                for argument in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                                 arguments.vararg, arguments.kwarg):
                    if argument is not None:
                        if argument.arg == "is_cuda":
                            self.own_is_cuda = True
                        self.bindings.setdefault(inner, {}).setdefault(argument.arg, [None])
                self._collect(node.body, inner)
                continue
            if isinstance(node, ast.ClassDef):
                self._bind(scope, node.name, None)
                self._collect(node.body, id(node))
                continue
            if isinstance(node, ast.Assign):
                if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    name = node.targets[0].id
                    self._bind(scope, name, node.value)
                    if (scope == self.module_scope and isinstance(node.value, (ast.Attribute, ast.Name))
                            and name not in self.aliases):
                        qualname = self.qualname(node.value)
                        if qualname and qualname.startswith(("torch.cuda", "torch.backends")):
                            self.aliases[name] = qualname
                elif (len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple)
                      and isinstance(node.value, ast.Tuple) and len(node.targets[0].elts) == len(node.value.elts)
                      and not any(isinstance(e, ast.Starred) for e in node.targets[0].elts)):
                    # `non_blocking, start = torch.cuda.is_available(), -1`
                    for target, value in zip(node.targets[0].elts, node.value.elts):
                        if isinstance(target, ast.Name):
                            self._bind(scope, target.id, value)
                        else:
                            self._bind_targets(scope, target)
                else:
                    for target in node.targets:
                        self._bind_targets(scope, target)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                self._bind(scope, node.target.id, node.value)
            elif isinstance(node, (ast.AugAssign, ast.For, ast.AsyncFor)):
                self._bind_targets(scope, node.target)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    if item.optional_vars is not None:
                        self._bind_targets(scope, item.optional_vars)
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
                self.parents[id(node.value)] = node
            for name in ("body", "orelse", "finalbody", "cases"):
                inner_body = getattr(node, name, None)
                if inner_body:
                    self._collect(inner_body, scope)
            for handler in getattr(node, "handlers", ()) or ():
                if handler.name:
                    self._bind(scope, handler.name, None)
                self._collect(handler.body, scope)

    def resolve(self, node):
        """The expression a plain name was assigned, when exactly one assignment (or
        several of the same string) in the nearest scope that binds it is known."""
        if not isinstance(node, ast.Name):
            return None
        for scope in reversed(self.scopes):
            values = self.bindings.get(scope, {}).get(node.id)
            if values is None:
                continue
            if any(v is None for v in values):
                return None
            if len(values) == 1:
                return values[0]
            strings = {string_value(v) for v in values}
            return values[0] if len(strings) == 1 and None not in strings else None
        return None

    def bound_values(self, name: str) -> list:
        """Every expression ``name`` is assigned in the nearest scope that binds it
        (``None`` for a binding whose value is unknown)."""
        for scope in reversed(self.scopes):
            values = self.bindings.get(scope, {}).get(name)
            if values is not None:
                return list(values)
        return []

    def qualname(self, node) -> str | None:
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                return self.aliases[node.id]
            return "torch" if node.id == "torch" else None
        if isinstance(node, ast.Attribute):
            base = self.qualname(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def constant_value(self, node) -> str | None:
        """A string literal, or the one string constant a plain name was assigned."""
        value = string_value(node)
        if value is None:
            value = string_value(self.resolve(node))
        return value

    def calls_named(self, name: str) -> list[ast.Call]:
        """Every call of ``name(...)`` or ``x.name(...)`` in the whole file (the tree
        being visited may hold only the statements with trigger words)."""
        if self._calls is None:
            self._index_whole_file()
        assert self._calls is not None
        return self._calls.get(name, [])

    def definition(self, name: str):
        """The module-level ``def name`` or ``class name`` of the whole file, if one."""
        if self._definitions is None:
            if not any(f"{word} {name}" in line for line in self.lines for word in ("class", "def")):
                return None  # no need to parse the whole file to know
            self._index_whole_file()
        assert self._definitions is not None
        return self._definitions.get(name)

    def dtype_collection(self, node) -> None:
        """A tuple, list or set literal seen by the device family; the dtype family
        (dtypes.py) overrides this to tell a list of dtypes from float64 tensors."""

    def self_assignments(self, name: str) -> list[ast.expr]:
        """Every value assigned to ``self.NAME`` in the whole file (empty when the file
        does not assign it on a line that mentions CUDA: the only ones asked about)."""
        if name not in self._self_flags:
            pattern = f"self.{name} ="
            values: list[ast.expr] = []
            if self._assigned_on_cuda_line(pattern):
                try:
                    whole = ast.parse("\n".join(self.lines))
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    whole = None
                for node in walk_nodes(whole) if whole is not None else ():
                    if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                        if any(isinstance(t, ast.Attribute) and t.attr == name and getattr(t.value, "id", "") == "self"
                               for t in targets):
                            values.append(node.value)
            self._self_flags[name] = values
        return self._self_flags[name]

    def _joined_text(self) -> str:
        if self._text is None:
            self._text = "\n".join(self.lines)
        return self._text

    def _assigned_on_cuda_line(self, pattern: str) -> bool:
        """Whether a line holding ``pattern`` also mentions CUDA (one search of the text
        per pattern, not a test of every line)."""
        text = self._joined_text()
        position = text.find(pattern)
        while position != -1:
            start, end = text.rfind("\n", 0, position) + 1, text.find("\n", position)
            if "cuda" in text[start:end if end != -1 else len(text)]:
                return True
            position = text.find(pattern, position + len(pattern))
        return False

    def whole_function(self, node):
        """The full definition of a function the visited tree may hold only in part (it
        keeps the statements with trigger words): the same ``def`` in the whole file."""
        if self._calls is None:
            self._index_whole_file()
        return self._functions.get(node.lineno)

    def whole_file_imports(self) -> dict[str, str]:
        """``import_aliases`` of the whole file's imports (nested ones included): the tree visited
        may hold only the statements with trigger words."""
        if self._calls is None:
            self._index_whole_file()
        return self._whole_imports

    def _index_whole_file(self) -> None:
        self._calls, self._definitions, self._whole_imports = {}, {}, {}
        try:
            whole = ast.parse("\n".join(self.lines))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return
        self._whole_tree = whole
        self._whole_imports = import_aliases(whole.body)
        for statement in whole.body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self._definitions[statement.name] = statement
        for node in walk_nodes(whole):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._functions[node.lineno] = node
            elif isinstance(node, ast.Call):
                func = node.func
                callee = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                if callee:
                    self._calls.setdefault(callee, []).append(node)

    # -- reporting ---------------------------------------------------------------------------

    def _column(self, line: int, byte_column: int) -> int:
        return character_column(self.lines[line - 1] if 0 < line <= len(self.lines) else "", byte_column)

    def report(self, rule_id: str, node, detail: str, edits=None, min_torch: str = ANY_VERSION,
               uses_device: bool = False, at: tuple[int, int, int, int] | None = None,
               bare_edits=None, uses_helper: bool = False) -> Finding:
        """Record a finding at ``node`` (or at the token ``at`` = (line, byte column,
        end line, end byte column), e.g. the ``cuda`` of ``.cuda()``).  ``bare_edits``:
        the rewrite where the code runs only where CUDA is present, when ``edits`` (the
        rewrite safe everywhere, or None) adds a guard."""
        self.claimed.add(id(node))
        fix = None
        if edits is not None or bare_edits is not None:
            every = [*(edits or ()), *(bare_edits or ())]
            uses_torch = self.torch is None and any("torch." in e.text for e in every)
            fix = Fix(tuple(edits or ()), min_torch, uses_device or uses_helper, uses_torch, uses_helper,
                      None if bare_edits is None else tuple(bare_edits))
        line, column, end_line, end_column = at or (
            node.lineno, node.col_offset, node.end_lineno or node.lineno, node.end_col_offset or 0)
        finding = Finding(
            rule_id, self.path, line, self._column(line, column),
            end_line, self._column(end_line, end_column),
            detail, self.lines[line - 1] if 0 < line <= len(self.lines) else "", fix)
        self.findings.append(finding)
        self.by_node[id(node)] = finding
        return finding

    def _relate(self, finding: Finding, node, message: str) -> None:
        line, end_line = node.lineno, node.end_lineno or node.lineno
        finding.related.append(Related(line, self._column(line, node.col_offset), end_line,
                                       self._column(end_line, node.end_col_offset or 0), message))

    @staticmethod
    def _cap(findings, reason: str) -> None:
        for finding in findings:
            if finding.severity_cap != "info":  # a silent cap (device_count) still drops to info
                finding.severity_cap, finding.cap_reason = "info", reason

    # -- what rewrites insert ---------------------------------------------------------------

    def device(self, index: str | None = None, as_string: bool = False) -> str:
        if as_string:
            return f"{DEVICE_NAME}.type"
        if index is None:
            return DEVICE_NAME
        # Not torch.device(ACCELERATOR_DEVICE.type, N): on the CPU that is "cpu:N",
        # which torch.load's map_location refuses; the helper gives the plain CPU there.
        return f"{HELPER_NAME}({index})"

    def _bound_before(self, name: str, line: int) -> bool:
        """Whether ``name`` is bound in scope before ``line`` (a later assignment in the
        same function would make the rewritten code read it before it exists)."""
        for index, scope in enumerate(reversed(self.scopes)):
            values = self.bindings.get(scope, {}).get(name)
            if values is None:
                continue
            if index > 0:  # an enclosing scope: bound by the time this code runs
                return True
            return any(v is None or getattr(v, "lineno", line) < line for v in values)
        return False

    def device_type_expression(self, node=None) -> tuple[str, bool]:
        """(expression for the device type, whether it needs ACCELERATOR_DEVICE): the
        script's own ``device_type`` or ``device`` variable when it has one in scope."""
        line = getattr(node, "lineno", 1 << 30)
        if self._bound_before("device_type", line):
            return "device_type", False
        if self._bound_before("device", line):
            value = self.resolve(ast.Name("device"))
            if isinstance(value, ast.Call) and (self.qualname(value.func) or "").startswith(
                    ("torch.device", "torch.accelerator.current_accelerator")) and value.lineno < line:
                return "device.type", False
        return f"{DEVICE_NAME}.type", True

    def _first_argument(self, node: ast.Call, text: str) -> Edit:
        """Insert ``text`` as the new first positional argument."""
        items = node.args + node.keywords
        if not items:
            return insert_at(closing_paren(node), text)
        return insert_at(min(node_start(i) for i in items), text + ", ")


    # -- provided by one family, called from another ----------------------------------------
    # (declared here so that each family module type-checks on its own)

    def _device_use(self, node: ast.Name, what: str) -> None:  # devices
        raise NotImplementedError

    def _unfixed_device(self, argument: ast.Name) -> bool:  # devices
        raise NotImplementedError

    def _device_choice(self, expression: ast.IfExp, replaced: ast.expr) -> bool:  # devices
        raise NotImplementedError

    def _cuda_is_available_call(self, node: ast.Call, qualname: str) -> bool:  # devices
        raise NotImplementedError

    def _cuda_amp_autocast(self, node: ast.Call, qualname: str) -> bool:  # mixed_precision
        raise NotImplementedError

    def _cuda_amp_grad_scaler(self, node: ast.Call, qualname: str) -> bool:  # mixed_precision
        raise NotImplementedError

    def _keeps_float64(self, node: ast.IfExp) -> bool:  # dtypes
        raise NotImplementedError

    def _cap_host_dtype_defaults(self, function, findings) -> None:  # dtypes
        raise NotImplementedError
