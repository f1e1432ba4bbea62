"""Findings in a public function that nothing in its project calls or names.

Judges read a public helper no file calls as code no user runs: ``torch_gpu_mem_info`` in cvvdp's
``utils.py``, alphapose's vendored ``build_targets_thres``, hiera-optim's ``get_smem_per_sm_kb``.
Of the judged rows in public, undecorated functions whose names appear nowhere else in their
package, 29 of 30 were called wrong (docs/precision/round63.md).  A function its package exports,
documents, registers or names in a config is API or a plugin, and keeps its findings.

An error or silent finding is lowered to info where all of these hold:

- it lies in the body of a function defined at the top of a module of a regular package (not
  ``__init__.py``, ``__main__.py``, ``setup.py``, ``conftest.py`` or a test), past the last line of
  the function's header (defaults, annotations and decorators run on import);
- the function has no decorator (one may register it) and a public name that no tool calls by
  convention (pytest's ``pytest_*`` hooks and ``test*``, asv's ``time_*`` and ``peakmem_*``,
  ``setup``, ``main``, IPython's extension hooks, serving handlers such as ``handle`` and
  SageMaker's ``model_fn``, gunicorn's server hooks, Flask's ``create_app``);
- its module spells the name only where it defines it (no call, no ``__all__``, no string), does
  not look itself up (``globals()``, ``sys.modules``, ``import_module(__name__)``, ``eval``, a
  module ``__getattr__``), builds no command line from itself (``fire.Fire(...)``, jsonargparse's
  ``CLI(...)`` or ``auto_cli(...)``, which may expose every function of the module), and no string
  or comment in it names the module (a program run by its name, ``uvicorn serve:app``);
- the project is scanned from its root (the folder above the package, the nearest root marker
  above it and the repository's root), and no file below the scanned folders, scanned or not,
  spells the function's name as a word (round 62's reading, linked folders followed: tests,
  examples, documents, configs, notebooks, entry points, a wheel's ``METADATA``);
- no scanned Python file takes the module whole: ``from .mod import *``, the module bound by a
  name in a string (``import_module("pkg.mod")``, ``sys.modules["pkg.mod"]``), re-exported under
  another name from an ``__init__.py``, or used as a value rather than through one of its
  attributes (``getattr(mod, name)``, ``fire.Fire(mod)``, ``mod.__dict__``), imports matched on the
  module's dotted tail (``from src.pkg import mod``); no other file or ``setup.py`` names the module
  by a dotted tail of two parts or more or by its path (``.. automodule:: pkg.mod``, ``:::
  pkg.mod``, an entry point, ``FLASK_APP=pkg/mod.py``), or mentions or is named for a tool that
  documents every module (sphinx-autoapi, apidoc, autosummary, mkdocstrings, pdoc, pydoctor,
  autodoc2, pydoc-markdown, lazydocs); and no Python code left out of the scan (excluded, beyond a
  link, a shebang script, ``.pyx``, a notebook) that fetches attributes by a name not written out
  names it;
- no Python file reaches a function by a name it does not write out: it lists a module's members
  (``getmembers``), resolves a dotted name not written in the call (``locate(path)``,
  ``import_string``, ``attrgetter``, ``reduce(getattr, ...)``), evaluates a string not written out
  (``eval``), names Hydra's ``_target_`` in code, builds an ``EntryPoint``, or imports or loads a
  module by a name not written out and fetches or lists its members
  (``getattr(import_module(path), name)``, ``vars(module)``).  A module imported by a computed
  name whose functions are then called by written-out names names them, and a config that names
  a function (Hydra's ``_target_``) is read as a file below the scanned folders.

A finding stays as it is whenever the reading is incomplete: a file that cannot be read or parsed,
too many files or bytes below the scanned folders, more than 200 files that spell the module's
name.  Binary files are not read: a compiled extension that calls the function by its name, like
a user's own code, is not seen; the reason says so.
"""
from __future__ import annotations

import ast
import bisect
import os
import re
from collections.abc import Callable

from torchport.scan.cross_file_guards import ScannedFiles, dotted_module, from_module, imports_a_built_name
from torchport.scan.model import FileResult, Finding
from torchport.scan.policy import still_hot
from torchport.scan.unimported_modules import (FEW_NAMES, WORD, named_on_disk, names_itself,
                                               package_modules_with_hot_findings, spelled)
from torchport.scan.unused_classes import looks_itself_up

# Functions tools call by their name alone, with no line of the project naming them: pytest's
# hooks and tests, asv's benchmarks, IPython's and Sphinx's extension hooks, nose's fixtures,
# serving frameworks' handlers (SageMaker, TorchServe, AWS Lambda, Azure Functions) and gunicorn's
# server hooks, Flask's app factories.  No such list is complete; the reason says what was read.
_CALLED_BY_PREFIX = ("pytest_", "test", "time_", "timeraw_", "mem_", "peakmem_", "track_")
_CALLED_BY_CONVENTION = frozenset({
    "setup", "teardown", "setup_module", "teardown_module", "load_ipython_extension", "unload_ipython_extension",
    "load_jupyter_server_extension", "main", "handle", "handler", "lambda_handler", "model_fn", "input_fn",
    "predict_fn", "output_fn", "transform_fn", "on_starting", "on_reload", "when_ready", "pre_fork", "post_fork",
    "post_worker_init", "worker_int", "worker_abort", "pre_exec", "pre_request", "post_request", "child_exit",
    "worker_exit", "nworkers_changed", "on_exit", "create_app", "make_app"})
# Command-line builders that may expose every function of the module that calls them, and
# lookups of the module by its own name.
_EXPOSES_NEEDLES = (b"Fire(", b"CLI(", b"auto_cli(", b"import_module(", b"__import__(")
_EXPOSES_ITS_MODULE = re.compile(rb"\b(?:Fire|CLI|auto_cli)\(|\b(?:import_module|__import__)\(\s*__name__")
# Documentation tools that document every module of a package without naming each.
_DOCUMENTS_EVERY_MODULE = re.compile(rb"\b(?:autoapi|apidoc|automodapi|automodsumm|autosummary|mkdocstrings|pdoc"
                                     rb"|pydoctor|autodoc2|pydoc[-_]markdown|lazydocs|quartodoc|handsdown|portray)")
# A line at the left margin that is not blank, a comment or the end of a header (`) -> int:`).
_LEFT_MARGIN_LINE = re.compile(rb"^([^\s#)].*)$", re.MULTILINE)
_FUNCTION_HEADER = re.compile(rb"(?:async[ \t]+)?def[ \t]+(\w+)")
# Ways to reach a function by a name the project does not write out.
_LISTS_MEMBERS = re.compile(rb"(?<![\w.])getmembers\(|\binspect\.getmembers\(")
_FETCHES_BY_NAME = re.compile(rb"\b(?:getattr|hasattr)\(\s*[^,\n]+?,\s*(?![\s'\"])|\b(?:vars|dir)\(\s*\w|\.__dict__\b")
_LOADS_A_FILE = re.compile(rb"\b(?:spec_from_file_location|SourceFileLoader|run_path|load_source|module_from_spec)\b")
# Their literal pieces, looked for first (a regex tried at every position of a large file costs more).
_RESOLVER_NEEDLES = (b"locate(", b"get_obj_from_str(", b"import_string(", b"resolve_name(", b"get_method(",
                     b"get_class(", b"load_entry_point(", b"eval(", b"_target_", b"EntryPoint(", b"getattr,",
                     b"attrgetter(")
_FETCH_NEEDLES = (b"getattr(", b"hasattr(", b"vars(", b"dir(", b"__dict__")
_LOADER_NEEDLES = (b"import_module", b"__import__", b"run_module", b"sys.modules", b"spec_from_file_location",
                   b"SourceFileLoader", b"run_path", b"load_source", b"module_from_spec")
# A dotted name resolved where it is not written out in the call (a variable, an f-string),
# code evaluated from a string, Hydra targets in code, entry points built at run time.
_RESOLVES_A_BUILT_NAME = re.compile(rb"\b(?:locate|get_obj_from_str|import_string|resolve_name|get_method|get_class"
                                    rb"|load_entry_point|attrgetter)\(\s*(?![\s'\"])|(?<![\w.])eval\(\s*(?![\s'\"])"
                                    rb"|\b_target_\b|\bEntryPoint\(|\breduce\(\s*getattr\b")
# How many files that spell the module's name are parsed for it, at most.
_MAX_IMPORTERS_READ = 200
_REASON = ("no file read below the scanned folders calls or names function {name} of module {module}, nor takes "
           "the module whole: it runs only for a user who calls it by its name, or for code the scan does not read "
           "(a compiled extension, another project)")


def lower_uncalled_functions(work: list, results: list[tuple[FileResult, int]],
                             whole_package: Callable[[str], bool], roots: list[str]) -> None:
    """Lower the findings of public package functions that nothing calls or names."""
    files, scanned, modules = package_modules_with_hot_findings(work, results, whole_package, roots)
    hopeful: list[tuple[list[Finding], set[str], tuple[str, ...], str]] = []
    for result, os_path in modules:
        hot = [f for f in result.findings if still_hot(f)]
        module, package = dotted_module(os_path)
        names = _hopeful(os_path, hot, files) if package else set()
        if names:
            hopeful.append((hot, names, module, os_path))
    if not hopeful or any(_finds_functions(files.data(job.path)) for job in files.jobs):
        return
    # (findings, function name, module, file) of each uncalled function that holds a hot finding
    candidates = [(found, name, module, os_path) for hot, names, module, os_path in hopeful
                  for name, found in _in_uncalled_functions(os_path, hot, names, files)]
    if not candidates:
        return
    taken = _modules_taken_whole({module for _, _, module, _ in candidates}, files)
    survivors = [candidate for candidate in candidates if candidate[2] not in taken]
    if not survivors:
        return
    # the files that define the functions are read here, each for the other functions' names
    defining = {os.path.realpath(os_path): os_path for *_, os_path in survivors}
    named = named_on_disk({name for _, name, _, _ in survivors}, set(defining), scanned).named
    spelled_in = _spelled_in(defining, {name for _, name, _, _ in survivors}, files)
    survivors = [(found, name, module, os_path) for found, name, module, os_path in survivors
                 if name not in named and not spelled_in.get(name, set()) - {os.path.realpath(os_path)}]
    if not survivors:
        return
    # a second walk, for what other files say of the modules still standing (the first most often ends it)
    others = _OtherFiles({module for _, _, module, _ in survivors}, {os.path.realpath(job.path) for job in files.jobs})
    if not named_on_disk(set(), set(defining), scanned, others.visit).complete or others.keeps_all:
        return  # the walk was cut short (too many files or bytes), or a document covers every module
    programs: dict[str, bool] = {}
    for found, name, module, os_path in survivors:
        if os_path not in programs:  # a program run by its name (`uvicorn serve:app`) may have its tool call functions
            programs[os_path] = names_itself(files.data(os_path) or b"", module[-1])
        if module in others.kept or programs[os_path]:
            continue
        for finding in found:
            finding.lower_to_info(_REASON.format(name=name, module=".".join(module)))


class _OtherFiles:
    """What the files below the scanned folders say of the candidate modules beyond the functions'
    names: a document, config or ``setup.py`` that names a module by any dotted tail of two parts or
    more, or by its path (``.. automodule:: pkg.utils``, an entry point ``"pkg.utils"``,
    ``FLASK_APP=pkg/server.py``), or mentions a tool that documents every module (sphinx-autoapi,
    apidoc, mkdocstrings, pdoc); and Python code left out of the scan (excluded, beyond a link, a
    script with a Python shebang, ``.pyx``, a notebook) that reaches functions by a name it does not
    write out, or fetches attributes by a computed name and names the module."""

    def __init__(self, modules: set[tuple[str, ...]], scanned: set[str]) -> None:
        self.kept: set[tuple[str, ...]] = set()
        self.keeps_all = False
        self._scanned = scanned
        self._spellings: dict[tuple[str, ...], list[tuple[bytes, re.Pattern[bytes]]]] = {}
        for module in modules:
            spellings = [".".join(module[start:]) for start in range(len(module) - 1)]
            spellings += ["/".join(module[start:]) for start in range(len(module) - 1)]
            self._spellings[module] = [(text.encode(), re.compile(rb"(?<![\w])" + re.escape(text.encode()) + rb"(?![\w])"))
                                       for text in spellings]
        self._stems = {module: module[-1].encode() for module in modules}

    def visit(self, path: str, data: bytes) -> None:
        name = os.path.basename(path)
        if _DOCUMENTS_EVERY_MODULE.search(data) or _DOCUMENTS_EVERY_MODULE.search(name.encode()):
            self.keeps_all = True  # a Sphinx conf.py, a pydoc-markdown.yml
        if name.endswith((".py", ".pyx", ".ipynb")) or (data.startswith(b"#!") and b"python" in data[:120]):
            if os.path.realpath(path) not in self._scanned:
                if _finds_functions(data):
                    self.keeps_all = True
                elif any(needle in data for needle in _FETCH_NEEDLES + (b"import *",)):
                    self.kept |= self._naming(data, lambda module: [(self._stems[module], None)])
                return
            if name != "setup.py":  # its entry points may name a module
                return
        self.kept |= self._naming(data, lambda module: self._spellings[module])

    def _naming(self, data: bytes, spellings: Callable[[tuple[str, ...]], list]) -> set[tuple[str, ...]]:
        """The modules not yet kept that ``data`` spells as a word in one of their spellings: each
        looked for by its bytes first (a search that starts with a look-behind is slow)."""
        words = set(WORD.findall(data)) if len(self._stems) > FEW_NAMES else None
        found = set()
        for module, stem in self._stems.items():
            if module in self.kept or (words is not None and stem.isascii() and stem not in words):
                continue
            for text, needle in spellings(module):
                if text in data and (needle is None and re.search(rb"(?<![\w])" + re.escape(text) + rb"(?![\w])", data)
                                     or needle is not None and needle.search(data)):
                    found.add(module)
                    break
        return found


def _spelled_in(defining: dict[str, str], names: set[str], files: ScannedFiles) -> dict[str, set[str]]:
    """For each name, the defining files (by real path) that spell it as a word; a file that cannot
    be read spells every name."""
    found: dict[str, set[str]] = {}
    for real, os_path in defining.items():
        data = files.data(os_path)
        for name in (names if data is None else spelled(names, data)):
            found.setdefault(name, set()).add(real)
    return found


def _hopeful(os_path: str, hot: list[Finding], files: ScannedFiles) -> set[str]:
    """The public functions whose bodies may hold the file's hot findings and that the file names
    only where it defines them, read from the text alone (only a hopeful file is parsed): the
    nearest line at the left margin above a finding is that function's header."""
    data = files.data(os_path)
    if data is None or (any(needle in data for needle in _EXPOSES_NEEDLES) and _EXPOSES_ITS_MODULE.search(data)):
        return set()
    margins: list[tuple[int, bytes]] = []
    line, counted = 1, 0
    for match in _LEFT_MARGIN_LINE.finditer(data):
        line += data.count(b"\n", counted, match.start())
        counted = match.start()
        margins.append((line, match.group(1)))
    lines = [line for line, _ in margins]
    verdicts: dict[bytes, bool] = {}
    for finding in hot:
        at = bisect.bisect_left(lines, finding.line) - 1
        header = _FUNCTION_HEADER.match(margins[at][1]) if at >= 0 else None
        if header and header.group(1) not in verdicts:
            verdicts[header.group(1)] = _once(header.group(1), data)
    return {name.decode() for name, once in verdicts.items() if once}


def _in_uncalled_functions(os_path: str, hot: list[Finding], hopeful: set[str],
                           files: ScannedFiles) -> list[tuple[str, list[Finding]]]:
    """The file's hot findings grouped by the hopeful function whose body holds them, past its
    header, for undecorated functions of a file that does not look itself up."""
    data = files.data(os_path)
    tree = files.tree(os_path)
    if data is None or tree is None or looks_itself_up(data.decode("utf-8", errors="replace")):
        return []
    functions = [s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and s.name in hopeful and not s.decorator_list]
    grouped: dict[str, list[Finding]] = {}
    for finding in hot:
        holder = next((f for f in functions if _header_end(f) < finding.line <= (f.end_lineno or 0)), None)
        if holder is not None:
            grouped.setdefault(holder.name, []).append(finding)
    return list(grouped.items())


def _header_end(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The last line of the function's header: its defaults and annotations run where it is
    defined, even on the line its body starts (``scale=torch.ones(1).cuda()): return x``)."""
    header = [*function.args.defaults, *(d for d in function.args.kw_defaults if d is not None),
              *(a.annotation for a in (*function.args.args, *function.args.kwonlyargs) if a.annotation is not None)]
    if function.returns is not None:
        header.append(function.returns)
    return max([function.lineno, *((node.end_lineno or node.lineno) for node in header)])


def _once(name: bytes, data: bytes) -> bool:
    """A public name no tool calls by convention, spelled once in the file."""
    text = name.decode()
    return (not text.startswith(("_", *_CALLED_BY_PREFIX)) and text not in _CALLED_BY_CONVENTION
            and len(re.findall(rb"(?<![\w])" + re.escape(name) + rb"(?![\w])", data)) == 1)


def _finds_functions(data: bytes | None) -> bool:
    """The file (None: unreadable) may reach a function by a name it does not write out: it lists a
    module's members (``getmembers``), resolves a dotted name it builds (``locate(f"pkg.{name}")``),
    or imports or loads a module by a name not written out and then fetches or lists what it
    holds (``getattr(module, name)``, ``vars(module)``)."""
    if data is None:
        return True
    if (b"getmembers(" in data and _LISTS_MEMBERS.search(data)) or (
            any(needle in data for needle in _RESOLVER_NEEDLES) and _RESOLVES_A_BUILT_NAME.search(data)):
        return True
    loads = any(needle in data for needle in _LOADER_NEEDLES)
    return (loads and any(needle in data for needle in _FETCH_NEEDLES) and bool(_FETCHES_BY_NAME.search(data))
            and (imports_a_built_name(data) or bool(_LOADS_A_FILE.search(data))))


def _modules_taken_whole(modules: set[tuple[str, ...]], files: ScannedFiles) -> set[tuple[str, ...]]:
    """The modules a scanned file imports everything of (``import *``), binds by a name written in
    a string (``import_module("pkg.utils")``, ``sys.modules["pkg.utils"]``), re-exports under
    another name from an ``__init__.py``, or uses as a value rather than through an attribute
    (``getattr(mod, name)``, ``fire.Fire(mod)``, ``mod.__dict__``); and those a file that spells
    their name cannot be read or parsed for, or too many files spell.  Imports are matched on the
    module's dotted tail, so ``from src.pkg import utils`` and a namespace folder above count."""
    mentioning = _files_mentioning({module[-1] for module in modules}, files)
    uses: dict[str, _ModuleUses | None] = {}
    taken = set()
    for module in modules:
        stem = module[-1]
        paths = mentioning.get(stem) if mentioning is not None else None
        if paths is None or len(paths) > _MAX_IMPORTERS_READ:
            taken.add(module)
            continue
        by_string = re.compile(rb"(?:import_module|__import__|find_spec|sys\.modules(?:\.get)?)\s*[(\[]\s*[rbuf]*['\"]"
                               rb"[^'\"\n]*(?<![\w])" + re.escape(stem.encode()) + rb"(?![\w])")
        for path in paths:
            if path not in uses:
                uses[path] = _ModuleUses.read(path, files)
            found = uses[path]
            if found is None or (found.binds_by_string and by_string.search(files.data(path) or b"")) or found.takes_whole(module):
                taken.add(module)
                break
    return taken


def _files_mentioning(stems: set[str], files: ScannedFiles) -> dict[str, list[str]] | None:
    """The scanned files that spell each stem as a word (None where one cannot be read)."""
    if not all(stem.isascii() for stem in stems):
        # with a stem beyond ASCII, every stem is looked for alone: among many, spelled() would read
        # the ASCII ones off the words, which hold no `my-utils`
        found = {stem: files.mentioning(stem.encode()) for stem in stems}
        return None if any(paths is None for paths in found.values()) else {s: p or [] for s, p in found.items()}
    listed: dict[str, list[str]] = {stem: [] for stem in stems}
    for job in files.jobs:
        data = files.data(job.path)
        if data is None:
            return None
        for stem in spelled(stems, data):
            listed[stem].append(job.path)
    return listed


class _ModuleUses:
    """One file's imports (by the last part of the name they bind) and the names and attributes it
    uses as values, read once."""

    def __init__(self, imports: list[tuple[tuple[str, ...], str | None, bool]], names: set[str], attributes: set[str],
                 in_init: bool, binds_by_string: bool) -> None:
        self.imports: dict[str, list[tuple[tuple[str, ...], str | None, bool]]] = {}
        for entry in imports:  # (dotted name imported, name bound or None, a star import)
            if entry[0]:
                self.imports.setdefault(entry[0][-1], []).append(entry)
        self.names = names
        self.attributes = attributes
        self.in_init = in_init
        self.binds_by_string = binds_by_string

    @classmethod
    def read(cls, path: str, files: ScannedFiles) -> _ModuleUses | None:
        tree = files.tree(path)
        data = files.data(path)
        if tree is None or data is None:
            return None
        package = dotted_module(path)[1]
        imports: list[tuple[tuple[str, ...], str | None, bool]] = []
        parents: dict[int, ast.AST] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                parents[id(child)] = node
            if isinstance(node, ast.ImportFrom):
                source = from_module(node, package)
                imports += [(source, None, True) if alias.name == "*" else ((*source, alias.name), alias.asname or alias.name,
                                                                             False) for alias in node.names]
            elif isinstance(node, ast.Import):
                imports += [(tuple(alias.name.split(".")), alias.asname, False) for alias in node.names]
        names, attributes = set(), set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Name, ast.Attribute)):
                parent = parents.get(id(node))
                if not (isinstance(parent, ast.Attribute) and parent.value is node and not parent.attr.startswith("__")):
                    if isinstance(node, ast.Name):
                        names.add(node.id)
                    else:
                        attributes.add(node.attr)
        binds_by_string = any(needle in data for needle in (b"import_module", b"__import__", b"find_spec", b"sys.modules"))
        return cls(imports, names, attributes, os.path.basename(path) == "__init__.py", binds_by_string)

    def takes_whole(self, module: tuple[str, ...]) -> bool:
        stem = module[-1]
        aliases = {stem}
        for name, bound, star in self.imports.get(stem, ()):
            if not _ends_with(name, module):
                continue
            if star:
                return True
            if bound is not None and bound != stem and self.in_init:
                return True  # the package exposes the module under another name
            if bound is not None:
                aliases.add(bound)
        return bool(aliases & self.names) or stem in self.attributes


def _ends_with(name: tuple[str, ...], module: tuple[str, ...]) -> bool:
    return len(name) >= len(module) and name[-len(module):] == module
