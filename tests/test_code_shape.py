"""The shape of torchport's import structure, checked from the source with ast.

The rules keep the modules independent enough to change one at a time:
- no module imports a private name (a leading underscore) of another torchport
  module: a name shared between modules is public, or it is not shared;
- the module-level import graph has no cycles (an import inside a function
  does not run at import time, so it cannot make an import fail);
- the package-level graph of every import, those inside functions included,
  has no cycles: a package (``torchport.check``, ``torchport.report``, ...) and
  each top-level module are nodes.  A function-level import defers a heavy or
  optional import, it does not make a dependency go away;
- the planner (``torchport.budget``, ``torchport.planning``) imports no stage
  package, not even inside a function: each stage declares its cost to it
  (``torchport.planning.StageCost``, named in the stage registry), and the
  stages import ``torchport.planning``, which sits below them.
Imports under ``if TYPE_CHECKING:`` are left out (they never run).  Apps,
the built-in ones included, are loaded by address (``torchport.app``), not
imported: that is no edge.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = "torchport"
SOURCE = Path(__file__).resolve().parents[1] / "src" / PACKAGE


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SOURCE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(path): path for path in sorted(SOURCE.rglob("*.py"))}


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def _absolute(module: str, node: ast.ImportFrom) -> str:
    """The absolute name an ``from ... import`` in ``module`` reads from."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if not _is_package(module):
        base.pop()
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _module_level(body: list[ast.stmt]):
    """The statements that run when the module is imported (not in functions)."""
    for statement in body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(statement, ast.If) and _is_type_checking(statement.test):
            yield from _module_level(statement.orelse)
            continue
        yield statement
        for field in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(statement, field, None)
            if isinstance(inner, list):
                yield from _module_level([s for s in inner if isinstance(s, ast.stmt)]
                                         + [s for h in inner if isinstance(h, ast.ExceptHandler)
                                            for s in h.body])


def _trees():
    return {module: ast.parse(path.read_text(), str(path)) for module, path in MODULES.items()}


def _torchport_target(name: str) -> str | None:
    """The torchport module that ``name`` (a dotted import target) refers to."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def test_no_module_imports_a_private_name_of_another():
    violations = []
    for module, tree in _trees().items():
        # names bound to other torchport modules in this file, for `alias._name`
        module_aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = _absolute(module, node)
                if _torchport_target(source) is None:
                    continue
                for alias in node.names:
                    full = f"{source}.{alias.name}"
                    if full in MODULES:
                        module_aliases[alias.asname or alias.name] = full
                    elif alias.name.startswith("_") and not alias.name.startswith("__") and source != module:
                        violations.append(f"{MODULES[module].relative_to(SOURCE.parent)}:{node.lineno}: {module} imports "
                                          f"{alias.name} from {source}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith(PACKAGE + ".") or alias.name == PACKAGE:
                        if any(part.startswith("_") and not part.startswith("__")
                               for part in alias.name.split(".")):
                            violations.append(f"{MODULES[module].relative_to(SOURCE.parent)}:{node.lineno}: {module} imports "
                                              f"private module {alias.name}")
                        if alias.asname:
                            module_aliases[alias.asname] = alias.name
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in module_aliases and node.attr.startswith("_")
                    and not node.attr.startswith("__")
                    and module_aliases[node.value.id] != module):
                violations.append(f"{MODULES[module].relative_to(SOURCE.parent)}:{node.lineno}: {module} reads "
                                  f"{module_aliases[node.value.id]}.{node.attr}")
    assert not violations, "private names used across modules:\n" + "\n".join(violations)


def _import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {module: set() for module in MODULES}
    for module, tree in _trees().items():
        for node in _module_level(tree.body):
            targets = []
            if isinstance(node, ast.ImportFrom):
                source = _absolute(module, node)
                targets.append(source)
                targets.extend(f"{source}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Import):
                targets.extend(alias.name for alias in node.names)
            for target in targets:
                found = _torchport_target(target)
                # a package's __init__ is not an edge from its own submodules'
                # point of view when the target is a submodule of it
                if found is not None and found != module:
                    graph[module].add(found)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for successor in sorted(graph[node]):
            if state.get(successor) == 1:
                return stack[stack.index(successor):] + [successor]
            if successor not in state and (found := visit(successor)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_module_level_import_graph_has_no_cycles():
    graph = _import_graph()
    assert sum(len(targets) for targets in graph.values()) > 50, "the import graph was not read"
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def _runs(tree: ast.Module):
    """Every node of the module but those under ``if TYPE_CHECKING:``."""
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            hidden.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    return (node for node in ast.walk(tree) if id(node) not in hidden)


def _imports(module: str, tree: ast.Module):
    """(line, torchport module) of every import the module runs, wherever it is."""
    for node in _runs(tree):
        targets = []
        if isinstance(node, ast.ImportFrom):
            source = _absolute(module, node)
            named = [f"{source}.{alias.name}" for alias in node.names]
            # ``from torchport import hf`` depends on hf, not on what torchport/__init__ re-exports.
            targets = named if all(name in MODULES for name in named) else [source, *named]
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        for target in targets:
            found = _torchport_target(target)
            if found is not None and found != module:
                yield node.lineno, found


def _package_of(module: str) -> str:
    """A module's node in the package graph: its package below torchport, or itself when top-level."""
    parts = module.split(".")
    if len(parts) > 1 and (SOURCE / parts[1]).is_dir():
        return ".".join(parts[:2])
    return module


def _package_graph() -> tuple[dict[str, set[str]], dict[tuple[str, str], str]]:
    graph: dict[str, set[str]] = {_package_of(module): set() for module in MODULES}
    where: dict[tuple[str, str], str] = {}
    for module, tree in _trees().items():
        for line, target in _imports(module, tree):
            edge = (_package_of(module), _package_of(target))
            if edge[0] != edge[1]:
                graph[edge[0]].add(edge[1])
                where.setdefault(edge, f"{MODULES[module].relative_to(SOURCE.parent)}:{line} imports {target}")
    return graph, where


def test_the_package_graph_of_all_imports_has_no_cycles():
    graph, where = _package_graph()
    assert {"torchport.check", "torchport.report", "torchport.trace", "torchport.commands"} <= set(graph)
    assert sum(len(targets) for targets in graph.values()) > 100, "the package graph was not read"
    cycle = _cycle(graph)
    assert cycle is None, "package import cycle: " + " -> ".join(cycle) + "\n" + "\n".join(
        where[edge] for edge in zip(cycle, cycle[1:]))


def test_function_level_imports_are_seen():
    """The package graph reads imports inside functions: report.html imports the
    check stage's renderer in a function."""
    graph, where = _package_graph()
    assert "torchport.check" in graph["torchport.report"]
    assert "torchport.check" not in _import_graph()["torchport.report.html"]


# Stage packages (their code runs as a stage of an evaluation) and the planner that sizes them.
STAGE_PACKAGES = ("torchport.check", "torchport.trace", "torchport.script", "torchport.scan", "torchport.remote")
PLANNER = ("torchport.budget", "torchport.planning")


def test_the_planner_imports_no_stage_package():
    trees = _trees()
    for planner in PLANNER:
        imported = {target for _, target in _imports(planner, trees[planner])}
        staged = sorted(target for target in imported if _package_of(target) in STAGE_PACKAGES)
        assert not staged, f"{planner} imports stage modules: {staged}"
    # The generic part imports nothing of torchport: the stages sit above it.
    assert not set(_imports("torchport.planning", trees["torchport.planning"]))


def test_every_sized_stage_declares_its_cost_below_the_planner():
    """Each registered stage with a cost model imports the planning contract, not the planner."""
    from torchport import stages

    trees = _trees()
    for stage in stages.STAGES:
        assert stage.cost is not None, f"{stage.name} declares no cost"
        module = stage.cost.partition(":")[0]
        imported = {target for _, target in _imports(module, trees[module])}
        assert "torchport.planning" in imported and "torchport.budget" not in imported, module


@pytest.mark.parametrize("graph, cyclic", [
    ({"a": {"b"}, "b": {"c"}, "c": set()}, False),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, True),
])
def test_the_cycle_finder_finds_a_cycle(graph, cyclic):
    assert (_cycle(graph) is not None) == cyclic


def test_make_test_lints_and_type_checks_first():
    """`make test` fails on a lint or type error: its first prerequisites after
    the install are the `lint` target, which runs ruff and mypy."""
    makefile = (SOURCE.parents[1] / "Makefile").read_text()
    rules = {}
    for block in makefile.split("\n\n"):
        for line in block.splitlines():
            if line and not line.startswith(("\t", "#", " ", ".")) and ":" in line and "=" not in line.split(":")[0]:
                target, _, prerequisites = line.partition(":")
                rules[target.strip()] = (prerequisites.split(), block)
    prerequisites, _ = rules["test"]
    assert "lint" in prerequisites and prerequisites.index("lint") < prerequisites.index("browser")
    _, lint_block = rules["lint"]
    assert "/bin/ruff check src tests benchmarks" in lint_block and "/bin/mypy" in lint_block
