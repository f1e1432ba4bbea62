"""Is the function that holds a finding reached by a user without CUDA at all?

Three shapes, read per file in the workers and confirmed across the scanned files afterwards:

- **never called**: the function's name appears in its file only where it is defined, and in no
  other scanned file.  Only where a caller outside the package is unlikely: a private function
  (``_x``), a private method of a class whose bases are all defined in the same file (a base
  from elsewhere, ``nn.Module``, may call ``_load_from_state_dict`` as a hook), or a function of a script (a file whose folder holds no
  ``__init__.py``).  A public method or function is API a user may call, however little the
  package itself does; uncalled_functions.py (round 63) reads a public function where no file of
  the project names it at all.
- **called only under a CUDA test**: every mention of the name in its file (counted in the text,
  so a string such as ``getattr(self, "name")`` or ``__all__`` counts too) is a call that runs
  only where a device test, an ``is_available()``-derived flag or an opt-in holds (the readers of
  device_guard.py and default_path.py), and no other scanned file names it.
- **a flag every call fills from a CUDA query**: the finding runs only where a parameter of its
  function is true (``if use_cuda:``), and every mention of the function in its file is a call
  passing that parameter a value false wherever CUDA is absent: ``torch.cuda.is_available()`` (or
  ``device_count() > 0``, or an ``and`` with one), a name the caller binds once to one, or the
  caller's own parameter that every call of the caller fills so; and no other scanned file names
  any function followed.  The same for a flag that must be false (``if not disable_cuda:``), filled
  with a value true wherever CUDA is absent: ``not torch.cuda.is_available()``, an ``or`` with one,
  or a name the caller forced so (``disable_cuda = disable_cuda or not torch.cuda.is_available()``,
  read by ``syntax.forcing_end``).  Read on the whole file, since a binding may hold no word the scanner cuts on.

A finding stays as it is whenever the evidence is incomplete: a decorated function (a decorator
may register it), a name used as a value, a mention the AST does not account for, a file that
cannot be parsed, or any other scanned file that spells the name.  No function, option or package
is known by name.
"""
from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from torchport.scan import cross_file_guards, debug_logging, default_path, device_guard, files
from torchport.scan.files import package_root
from torchport.scan.detectors.syntax import call_argument, forced_when_read, forcing_end, parameter_defaults
from torchport.scan.policy import FileContext, is_hot
from torchport.scan.model import FileResult, Finding

# Decorators that change how a method is bound, not who calls it.
_BINDING_DECORATORS = frozenset({"staticmethod", "classmethod"})

_MAIN_TEST = re.compile(r"""^if\s+__name__\s*==\s*["']__main__["']\s*:""", re.MULTILINE)

# How many callers deep a CUDA test is looked for.
_DEPTH = 3

# A call that answers whether CUDA is present.
_CUDA_QUERY = re.compile(r"^torch\.cuda\.(?:is_available|device_count)\(\)$")

# How many local names (``ok = flag and torch.cuda.is_available()``) are followed to a CUDA query.
_HANDED_NAMES = 3

# How many mentions of a name a file may hold for its calls to be read one by one: past this
# the name is busy, and reading them costs more than it is likely to lower.
_MAX_MENTIONS = 6


@dataclass(frozen=True)
class Candidate:
    """A finding that is unreached if no other scanned file spells any of ``names`` (its function
    and the functions between it and the CUDA test)."""
    names: tuple[str, ...]
    index: int  # of the finding in its file's list
    reason: str


@dataclass
class _Unit:
    name: str
    function: ast.FunctionDef | ast.AsyncFunctionDef
    owner: ast.ClassDef | None


def _unit(scopes: list, line: int) -> _Unit | None:
    """The module-level function, or method of a module-level class, whose body holds ``line``."""
    functions = [s for s in scopes if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if len(functions) != 1:
        return None  # module level, or a nested function (its outer function decides)
    function = functions[0]
    owner = scopes[0] if len(scopes) == 2 and isinstance(scopes[0], ast.ClassDef) else None
    if len(scopes) != (1 if owner is None else 2) or function is not scopes[-1]:
        return None
    if not function.body or line < function.body[0].lineno:
        return None  # the header and its defaults run when the module is imported
    name = function.name
    if name.startswith("__") and name.endswith("__"):
        return None
    if any(not (isinstance(d, ast.Name) and d.id in _BINDING_DECORATORS) for d in function.decorator_list):
        return None
    return _Unit(name, function, owner)


def _local_class(tree: ast.Module, cls: ast.ClassDef, depth: int = 0) -> bool:
    """Every base of ``cls`` is a class of the same file with local bases (or none): nothing
    outside the file defines the protocol its methods could be hooks of."""
    if depth > 4 or cls.keywords:
        return False
    for base in cls.bases:
        if isinstance(base, ast.Name) and base.id == "object":
            continue
        if not isinstance(base, ast.Name):
            return False
        local = [s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == base.id]
        if len(local) != 1 or not _local_class(tree, local[0], depth + 1):
            return False
    return True


def _in_script(text: str, os_path: str) -> bool:
    """A file run as a program (``if __name__ == "__main__":``) outside any package; a lone module
    without that test is a library module a user imports."""
    if not _MAIN_TEST.search(text):
        return False
    folder = os.path.dirname(os.path.abspath(os_path))
    return not os.path.exists(os.path.join(folder, "__init__.py"))


@dataclass
class _Spelling:
    """Where a file spells a name as a whole word (``str.find`` rather than a ``\\b`` regex,
    which is tried at every position of a large file)."""
    lines: list[int]  # 1-based, one per mention
    defined: int  # mentions after ``def``
    called: int  # mentions followed by ``(``


def mentions_of(text: str, name: str) -> _Spelling | None:
    """None past _MAX_MENTIONS."""
    found = _Spelling([], 0, 0)
    position = text.find(name)
    while position != -1:
        end = position + len(name)
        if not (position and (text[position - 1].isalnum() or text[position - 1] == "_")) and not (
                end < len(text) and (text[end].isalnum() or text[end] == "_")):
            if len(found.lines) == _MAX_MENTIONS:
                return None
            found.lines.append(text.count("\n", 0, position) + 1)
            if re.search(r"\bdef\s+$", text[max(0, position - 12):position]):
                found.defined += 1
            if text[end:end + 40].lstrip().startswith("("):
                found.called += 1
        position = text.find(name, end)
    return found


def scopes_at(tree: ast.Module, line: int) -> list:
    """The module-level class or function holding ``line`` and, in a class, the method; enough
    for _unit, without walking every statement of the file."""
    scopes: list = []
    body = tree.body
    while True:
        holder = next((s for s in body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                       and s.lineno <= line <= (s.end_lineno or s.lineno)), None)
        if holder is None:
            return scopes
        scopes.append(holder)
        body = holder.body


def _guard(context: FileContext, line: int, column: int) -> str | None:
    test = device_guard.guarded_by_device_test(context, line, column)
    if test is not None:
        return test
    for condition, taken in default_path.conditions(context, line, column):
        if _cuda_query(context, condition, taken) or (taken and _all_on_cuda(context, condition)):
            return context.source(condition)
    # not an opt-in: a truth test of a data parameter (`if bsize:`) reads as one, and says nothing
    # about the device
    verdict = default_path.off_default_path(context, line, column)
    return verdict.option if verdict is not None and verdict.kind == default_path.CUDA_DERIVED else None


def _all_on_cuda(context: FileContext, test: ast.expr) -> bool:
    """``all(d.type == "cuda" for d in devices)``: every device is CUDA."""
    return (isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "all"
            and len(test.args) == 1 and isinstance(test.args[0], ast.GeneratorExp)
            and device_guard.is_device_test(context, test.args[0].elt, True))


def _cuda_query(context: FileContext, test: ast.expr, taken: bool) -> bool:
    """Branch ``taken`` of ``test`` runs only where CUDA is present: ``torch.cuda.is_available()``
    (or ``torch.cuda.device_count() > 0``) holds, directly or as one operand of an ``and``."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _cuda_query(context, test.operand, not taken)
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) and taken:
        return any(_cuda_query(context, v, True) for v in test.values)
    if isinstance(test, ast.Call):
        return taken and bool(_CUDA_QUERY.search(context.source(test)))
    if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Gt, ast.NotEq))
            and isinstance(test.left, ast.Call) and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value == 0):
        return taken and bool(_CUDA_QUERY.search(context.source(test.left)))
    return False


def candidates(tree: ast.Module | None, text: str, path: str, os_path: str,
               findings: list[Finding]) -> list[Candidate]:
    """The file's error/silent findings whose function looks unreached from this file alone."""
    hot = [(index, f) for index, f in enumerate(findings) if f.severity_cap != "info" and is_hot(f)]
    if not hot or tree is None:
        return []
    # marked by the detectors: in functions the file uses only in tests that run only with CUDA
    marked = [Candidate(f.only_in_cuda_tests[0], index, f.only_in_cuda_tests[1])
              for index, f in hot if f.only_in_cuda_tests is not None]
    hot = [(index, f) for index, f in hot if f.only_in_cuda_tests is None]
    context: FileContext | None = None
    cut: _FlagReader | None = None  # on the scanner's tree: is the finding under a flag at all
    flags: _FlagReader | Literal[False] | None = None  # on the whole file, parsed only for a flag's callers
    verdicts: dict[int, str | None] = {}
    names: dict[int, tuple[str, ...]] = {}
    found: list[Candidate] = []
    for index, finding in hot:
        unit = _unit(scopes_at(tree, finding.line), finding.line)
        if unit is None:
            continue
        key = id(unit.function)
        if key not in verdicts:
            verdicts[key] = None
            spelling = mentions_of(text, unit.name)
            if spelling is None:
                continue
            if len(spelling.lines) == spelling.defined:
                if ((unit.name.startswith("_") and (unit.owner is None or _local_class(tree, unit.owner)))
                        or (unit.owner is None and _in_script(text, os_path))):
                    names[key] = (unit.name,)
                    verdicts[key] = (f"`{unit.name}` is never called: no scanned file names it besides its "
                                     f"definition ({path}:{unit.function.lineno}), so a user does not reach this line")
            elif "isEnabledFor(" in text and spelling.defined == 1 and unit.owner is None:
                # a hook registered only with debug logging on: read on the whole file, since the
                # registering line holds no word the scanner cuts on
                whole = _whole_file(text)
                switched = _only_under_switch(whole, unit, spelling) if whole is not None else None
                if switched is not None and debug_logging.on_in_package(os_path):
                    switched = None
                if switched is not None:
                    line, option = switched
                    names[key] = (unit.name,)
                    verdicts[key] = (f"`{unit.name}` is named only where debug logging (`{option}`) is on ({path}:{line}) and no "
                                     "other scanned file names it: off unless the user turns it on")
            if verdicts[key] is None and spelling.called == len(spelling.lines):
                # Read on the statements the scanner parsed: a call under a device test has the
                # test's trigger word, so its statement is there; a mention that is not (or is a
                # string, an import, a keyword) leaves the finding as it is.
                context = context or FileContext(tree, text)
                guarded = _guarded_reason(context, unit, spelling, path)
                if guarded is not None:
                    verdicts[key], names[key] = guarded
        reason = verdicts[key]
        if reason is not None:
            found.append(Candidate(names[key], index, reason))
            continue
        context = context or FileContext(tree, text)
        cut = cut or _FlagReader(context, tree)
        if cut.flag_of(unit, finding) is None:
            continue
        # read again on the whole file: a statement binding the flag may hold no trigger word
        if flags is None:
            whole = _whole_file(text)
            flags = _FlagReader(whole, whole.tree) if whole is not None else False
        handed = flags.handed_down(finding, path) if flags else None
        if handed is not None:
            found.append(Candidate(handed[1], index, handed[0]))
    return marked + found


def _only_guarded_calls(context: FileContext, unit: _Unit, spelling: _Spelling, path: str,
                        depth: int = 0) -> tuple[tuple[int, str], tuple[str, ...]] | None:
    """(the reason, the names followed) when every mention of the unit's name outside its own body
    is a call under a CUDA test, or in a function of the file that is itself called only so, and
    the parsed statements account for every mention in the text."""
    body_lines = range(unit.function.lineno, (unit.function.end_lineno or 0) + 1)
    first: tuple[int, str] | None = None
    names: tuple[str, ...] = (unit.name,)
    mentions = _calls_of(context, unit, spelling)
    if mentions is None:
        return None  # or a statement not parsed
    for line, node, call in mentions:
        if line in body_lines:
            continue  # the function calling itself
        if call is None:
            return None
        test = _guard(context, node.lineno, context.column_of(node))
        if test is not None:
            first = first or (node.lineno, " ".join(test.split()))
            continue
        caller = _unit(scopes_at(context.tree, node.lineno), node.lineno) if depth < _DEPTH else None
        if caller is None or caller.name == unit.name:
            return None
        caller_spelling = mentions_of(context.text, caller.name)
        if (caller_spelling is None or caller_spelling.called != len(caller_spelling.lines)
                or caller_spelling.defined == len(caller_spelling.lines)):
            return None
        through = _only_guarded_calls(context, caller, caller_spelling, path, depth + 1)
        if through is None:
            return None
        names += through[1]
        first = first or through[0]
    if first is None:
        return None
    return first, names


def _only_under_switch(context: FileContext, unit: _Unit, spelling: _Spelling) -> tuple[int, str] | None:
    """(the first line, the switch) when every mention of the module-level function's name outside
    its own body, handed on as a value (``register_forward_hook(hook)``) or, for a private function,
    called, runs only under a switch that is off by default whoever calls (default_path's
    ``Verdict.switch``).  A public function the package calls is API a user may call too."""
    mentions = _calls_of(context, unit, spelling)
    if mentions is None:
        return None
    body_lines = range(unit.function.lineno, (unit.function.end_lineno or 0) + 1)
    first: tuple[int, str] | None = None
    for line, node, call in mentions:
        if line in body_lines:
            continue
        if call is not None and not unit.name.startswith("_"):
            return None  # a public function the package calls: API a user may call too
        verdict = default_path.off_default_path(context, node.lineno, context.column_of(node))
        if verdict is None or verdict.kind != default_path.OPT_IN or not verdict.switch:
            return None
        first = first or (node.lineno, verdict.option)
    return first


def _calls_of(context: FileContext, unit: _Unit,
              spelling: _Spelling) -> list[tuple[int, ast.Name | ast.Attribute, ast.Call | None]] | None:
    """Every mention of the unit's name in its file outside its definition, with its line and the
    call it names (None for a name read as a value or stored), or None when the parsed statements
    do not account for every mention the text spells (a string, a comment, an import, a keyword)."""
    found: list[tuple[int, ast.Name | ast.Attribute, ast.Call | None]] = []
    for line in sorted(set(spelling.lines)):
        nodes = context._expressions_at(line)
        calls = {id(n.func): n for n in nodes if isinstance(n, ast.Call)}
        spelled: list[ast.Name | ast.Attribute] = [
            n for n in nodes if (isinstance(n, ast.Name) and n.id == unit.name)
            or (isinstance(n, ast.Attribute) and n.attr == unit.name)]
        definitions = sum(1 for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                          and n.name == unit.name)
        if len(spelled) + definitions != spelling.lines.count(line):
            return None
        found += [(line, n, calls.get(id(n)) if isinstance(n.ctx, ast.Load) else None) for n in spelled]
    return found


def _guarded_reason(context: FileContext, unit: _Unit, spelling: _Spelling, path: str) -> tuple[str, tuple[str, ...]] | None:
    guarded = _only_guarded_calls(context, unit, spelling, path)
    if guarded is None:
        return None
    (line, test), names = guarded
    through = f", through `{'`, `'.join(names[1:])}`" if len(names) > 1 else ""
    return (f"`{unit.name}` is called only where `{test}` holds ({path}:{line}{through}) and no other scanned "
            "file names it: a user without CUDA does not reach this line"), names


def _whole_file(text: str) -> FileContext | None:
    """The file parsed whole: the scanner's tree keeps only the statements that can hold a finding,
    and a flag's every binding and call must be read."""
    try:
        return FileContext(ast.parse(text), text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _own_parameters(unit: _Unit) -> list[str]:
    """The parameters a caller fills by position, then the keyword-only ones; not ``self``/``cls``
    of a method, not ``*args``/``**kwargs``."""
    arguments = unit.function.args
    positional = [a.arg for a in arguments.posonlyargs + arguments.args]
    if unit.owner is not None and not _static(unit) and positional:
        positional = positional[1:]
    return positional + [a.arg for a in arguments.kwonlyargs]


def _static(unit: _Unit) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in unit.function.decorator_list)


class _FlagReader:
    """Reads, on one whole file, whether a finding runs only under a flag parameter that every
    call fills with a value false wherever CUDA is absent.  Answers are kept per function and
    flag: a file's findings share their callers."""

    def __init__(self, context: FileContext, tree: ast.Module) -> None:
        self.context = context
        self.tree = tree
        self._callers: dict[tuple[int, str, bool], tuple[tuple[int, str], tuple[str, ...], tuple[str, ...]] | None] = {}
        self._bound: dict[int, list[set[str]]] = {}

    def _bound_by(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[set[str]]:
        """The names each statement of the function's body binds, in any way (stores, ``except ...
        as``, ``match`` captures, imports, ``global``, nested parameters and definitions)."""
        if id(function) not in self._bound:
            self._bound[id(function)] = [cross_file_guards.bound_names(s) for s in function.body]
        return self._bound[id(function)]

    def rebound(self, function: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
        """The function binds ``name`` anywhere in its body: the flag read is not only what the caller passed."""
        return any(name in names for names in self._bound_by(function))

    def flag_of(self, unit: _Unit, finding: Finding) -> tuple[str, bool] | None:
        """The parameter of the finding's function that must be true for the finding to run (``if
        use_cuda:``, ``if use_cuda and x:``, ``x.cuda() if use_cuda else x``, after ``if not use_cuda:
        return``), or false (``if not disable_cuda:``, after ``if disable_cuda or x: return``), tested
        inside the function and never rebound there, with the value it must have.  Not an
        ``assert``, which fails without the flag, nor a test that holds the finding (a one-line ``if``)."""
        context, function = self.context, unit.function
        parameters = _own_parameters(unit)
        # _unit holds only module-level functions and methods of module-level classes: every test
        # found lies inside the function
        for test, taken in default_path.conditions(context, finding.line, finding.column):
            if isinstance(context.parents.get(id(test)), ast.Assert) or context.holds(test, finding.line, finding.column):
                continue
            while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                test, taken = test.operand, not taken
            # where an `and` holds, each operand does; where an `or` fails, each operand is false
            joined = ast.And if taken else ast.Or
            operands = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, joined) else [test]
            for operand in operands:
                if isinstance(operand, ast.Name) and operand.id in parameters and not self.rebound(function, operand.id):
                    return operand.id, taken
        return None

    def _bound_once_before(self, function: ast.FunctionDef | ast.AsyncFunctionDef, name: str,
                           line: int) -> ast.expr | None:
        """The value of ``name = value``, a statement of the function's own body before ``line``,
        where nothing else in the function binds the name."""
        if name in {a.arg for a in function.args.posonlyargs + function.args.args + function.args.kwonlyargs}:
            return None
        binding = [(s, names) for s, names in zip(function.body, self._bound_by(function)) if name in names]
        if len(binding) != 1:
            return None
        statement, names = binding[0]
        if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1 and names == {name}
                and isinstance(statement.targets[0], ast.Name) and (statement.end_lineno or statement.lineno) < line):
            return None
        return statement.value

    def _cuda_query_in(self, function: ast.FunctionDef | ast.AsyncFunctionDef | None, value: ast.expr, line: int,
                       present: bool = True, depth: int = 0) -> ast.expr | None:
        """The CUDA query that makes ``value`` false wherever CUDA is absent: the value itself
        (``torch.cuda.is_available()``, ``torch.cuda.device_count() > 0``), an ``and`` with one among
        its operands, or a local name bound once, before ``line``, to such a value.  With ``present``
        false, the query that makes it true there instead: ``not torch.cuda.is_available()``, an
        ``or`` with one such operand, such a name, or a flag forced on before the call (``forcing_end``)."""
        if depth > _HANDED_NAMES:
            return None
        if isinstance(value, ast.BoolOp) and isinstance(value.op, ast.And if present else ast.Or):
            return next((q for v in value.values
                         if (q := self._cuda_query_in(function, v, line, present, depth + 1)) is not None), None)
        if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not) and not present:
            return value if cross_file_guards.cuda_present(value.operand) else None
        if not present and function is not None and isinstance(value, ast.Name):
            end = forcing_end(function, value, lambda v: self._cuda_query_in(None, v, line, False, depth + 1) is not None)
            if forced_when_read(function, end, value):
                return value  # `disable_cuda = disable_cuda or not torch.cuda.is_available()` above
        if isinstance(value, ast.Name) and function is not None:
            bound = self._bound_once_before(function, value.id, line)
            return None if bound is None else self._cuda_query_in(function, bound, line, present, depth + 1)
        return value if present and cross_file_guards.cuda_present(value) else None

    def handed_down(self, finding: Finding, path: str) -> tuple[str, tuple[str, ...]] | None:
        """(the reason, the functions followed) when the finding runs only under a flag parameter of
        its function that every call fills with a value false wherever CUDA is absent."""
        unit = _unit(scopes_at(self.tree, finding.line), finding.line)
        needed = self.flag_of(unit, finding) if unit is not None else None
        if unit is None or needed is None:
            return None
        flag, wanted = needed
        handed = self.callers(unit, flag, wanted)
        if handed is None:
            return None
        (line, query), names, defaults_on = handed
        through = f", through `{'`, `'.join(names[1:])}`" if len(names) > 1 else ""
        unused = (f"; the default of the flag in `{'`, `'.join(defaults_on)}`, which {'turns it on' if wanted else 'leaves it off'}"
                  ", is never used (default only)") if defaults_on else ""
        return (f"`{unit.name}` runs this line only when its `{flag}` is {'true' if wanted else 'false'}, and every "
                f"call in the scanned files passes a value {'false' if wanted else 'true'} wherever CUDA is absent "
                f"(`{query}` at {path}:{line}{through}), so a user without CUDA does not reach it{unused}"), names

    def callers(self, unit: _Unit, flag: str, wanted: bool = True,
                depth: int = 0) -> tuple[tuple[int, str], tuple[str, ...], tuple[str, ...]] | None:
        """(the first CUDA query, the functions followed, those among them whose own default runs the
        line) when the file calls the unit, and every mention of its name outside its own body is a
        call passing ``flag`` a value that is not ``wanted`` wherever CUDA is absent: a CUDA query, a
        name the caller binds once to one, or a parameter of the caller that every call of the caller
        fills so (``_DEPTH`` callers deep)."""
        key = (id(unit.function), flag, wanted)
        if key not in self._callers:
            self._callers[key] = None  # a cycle of callers answers no
            self._callers[key] = self._read_callers(unit, flag, wanted, depth)
        return self._callers[key]

    def _read_callers(self, unit: _Unit, flag: str, wanted: bool,
                      depth: int) -> tuple[tuple[int, str], tuple[str, ...], tuple[str, ...]] | None:
        if unit.owner is not None and not _local_class(self.tree, unit.owner):
            return None  # a base from elsewhere may call the method under another name (`forward`, `train`)
        context = self.context
        spelling = mentions_of(context.text, unit.name)
        if spelling is None or spelling.called != len(spelling.lines) or spelling.defined != 1:
            return None
        parameters = _own_parameters(unit)
        keyword_only = len(parameters) - len(unit.function.args.kwonlyargs)
        position = parameters.index(flag) if parameters.index(flag) < keyword_only else None
        # a positional-only flag takes no keyword: `use_cuda=` in a call goes to `**options`
        keyword = "" if flag in {a.arg for a in unit.function.args.posonlyargs} else flag
        default = next((d for a, d in parameter_defaults(unit.function.args) if a.arg == flag), None)
        on_by_default = default is not None and (not (isinstance(default, ast.Constant) and not default.value)) == wanted
        body_lines = range(unit.function.lineno, (unit.function.end_lineno or 0) + 1)
        first: tuple[int, str] | None = None
        names: tuple[str, ...] = (unit.name,)
        defaults_on: tuple[str, ...] = (unit.name,) if on_by_default else ()
        mentions = _calls_of(context, unit, spelling)
        if mentions is None:
            return None
        for line, node, call in mentions:
            if call is None:
                return None
            if unit.owner is not None and not _static(unit) and not _bound_call(node):
                return None  # `Loader._load(self, ...)` passes `self` among the arguments
            value = call_argument(call, position, keyword)
            if value is None:
                return None  # the default is used
            if line in body_lines:
                if isinstance(value, ast.Name) and value.id == flag:
                    continue  # the function hands its own flag on to itself
                return None
            caller = _unit(scopes_at(self.tree, call.lineno), call.lineno)
            query = self._cuda_query_in(caller.function if caller else None, value, call.lineno, wanted)
            if query is not None:
                first = first or (query.lineno, " ".join(context.source(query).split()))
                continue
            if caller is None or depth >= _DEPTH or not isinstance(value, ast.Name) \
                    or value.id not in _own_parameters(caller) or self.rebound(caller.function, value.id):
                return None
            handed = self.callers(caller, value.id, wanted, depth + 1)
            if handed is None:
                return None
            names += tuple(n for n in handed[1] if n not in names)
            defaults_on += tuple(n for n in handed[2] if n not in defaults_on)
            first = first or handed[0]
        return None if first is None else (first, names, defaults_on)


def _bound_call(node: ast.Name | ast.Attribute) -> bool:
    """A method called on an instance: ``self.m(...)``, ``obj.m(...)``, ``super().m(...)``; not on
    a class (``Loader.m(obj, ...)``), whose first argument is the instance."""
    if not isinstance(node, ast.Attribute):
        return False
    owner = node.value
    return not (isinstance(owner, ast.Name) and owner.id[:1].isupper())


def _whole_package_scanned(os_path: str, roots: list[str]) -> bool:
    """Whether a scanned folder holds the file's whole package: scanning one file, or one folder
    of a package, cannot see the callers elsewhere in it."""
    package = package_root(os_path)
    return any(package == root or package.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def whole_package_in(paths: list) -> Callable[[str], bool]:
    """Whether a file's whole package is among the scanned folders ``paths`` (named as given or
    with links resolved: the files found under a linked folder carry its resolved path)."""
    roots = [r for p in paths or () if os.path.isdir(p) for r in {os.path.abspath(p), os.path.realpath(p)}]
    return lambda os_path: _whole_package_scanned(os_path, roots)


def _defines_its_own(data: bytes, needle: bytes) -> bool:
    """The file defines a module-level function of that name once and neither imports the name (nor
    ``*``), reads it as an attribute (``module.name``) nor spells it in quotes (``getattr``,
    ``__all__``): its mentions are of its own function (pyqtorch's modules each define a
    ``forward_hook``)."""
    word = re.escape(needle)
    if re.search(rb"^(?:async\s+)?def\s+" + word + rb"\s*\(", data, re.MULTILINE) is None:
        return False
    code = re.sub(rb"#[^\n]*", b"", data)  # a `)` in a comment would end an import's parentheses
    return (re.search(rb"\." + word + rb"(?![\w])", data) is None
            and re.search(rb"\bimport\b(?:[^\n]*\\\n)*[^\n]*(?<![\w])" + word + rb"(?![\w])", code) is None
            and re.search(rb"\bimport\s*\([^)]*(?<![\w])" + word + rb"(?![\w])", code) is None
            and re.search(rb"\bimport\s+\*", data) is None
            and re.search(rb"[\"']" + word + rb"[\"']", data) is None  # getattr(module, "name"), __all__
            and len(re.findall(rb"^[ \t]*(?:async\s+)?def\s+" + word + rb"\s*\(", data, re.MULTILINE)) == 1)


def lower_unreached(work, results: list[tuple[FileResult, int]], paths: list | None = None) -> None:
    """Lower the candidates whose name no other scanned file spells, in packages scanned whole."""
    pending = [(result, c) for result, _ in results for c in result.unreached]
    if not pending:
        return
    roots = [os.path.abspath(p) for p in paths or () if os.path.isdir(p)]
    by_display = {job.display: job.path for job in work}
    pending = [(result, c) for result, c in pending
               if result.path in by_display and _whole_package_scanned(by_display[result.path], roots)]
    if not pending:
        return
    names = {name for _, c in pending for name in c.names}
    # the files that spell a name, other than those holding its candidates
    spelled_in: dict[str, set[str]] = {name: set() for name in names}
    needles = {name: name.encode() for name in names}
    for job, data in files.read_bytes(work):
        if data is None:  # it may spell any of them
            for name in names:
                spelled_in[name].add(job.display)
            continue
        for name, needle in needles.items():
            if (needle in data and re.search(rb"(?<![\w])" + re.escape(needle) + rb"(?![\w])", data)
                    and not _defines_its_own(data, needle)):
                spelled_in[name].add(job.display)
    for result, candidate in pending:
        if any(spelled_in[name] - {result.path} for name in candidate.names):
            continue
        finding = result.findings[candidate.index]
        finding.lower_to_info(candidate.reason)
