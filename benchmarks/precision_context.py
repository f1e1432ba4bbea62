"""Does any context the scanner sees at a finding's line predict the independent verdicts?  For
every judged finding the current build still reports at error or silent (as
precision_insample.py matches them), precision by where the line is (method, function, test,
module level, ``__main__`` block), by the ``if``/``try`` around it in its function, by whether the
function takes a device parameter or is called in its own file, and by rule and context.

    python benchmarks/precision_context.py OUT_DIR SEED=CORPUS_SRC [SEED=CORPUS_SRC ...]

The same arguments and scan cache as precision_insample.py.  An analysis of the judges'
verdicts by the detectors' author: it describes the judged samples, it measures nothing new.
"""
from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from precision_insample import scan_all, verdicts  # noqa: E402

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_TEST_PATH = re.compile(r"(^|/)tests?/|(^|/)test_|_test\.py$|conftest\.py$")
_DEVICE_PARAMETER = re.compile(r"device|^(use_)?(cuda|gpu)$")


def _enclosing(tree: ast.Module, line: int) -> list[ast.AST]:
    """The nodes whose span holds the line, outermost first."""
    chain: list[ast.AST] = []
    node: ast.AST = tree
    while True:
        inner = next((c for c in ast.iter_child_nodes(node) if getattr(c, "lineno", None) is not None
                      and c.lineno <= line <= (c.end_lineno or c.lineno)), None)  # type: ignore[attr-defined]
        if inner is None:
            return chain
        chain.append(inner)
        node = inner


def context_of(path: str, line: int, text: str, tree: ast.Module) -> set[str]:
    chain = _enclosing(tree, line)
    functions = [n for n in chain if isinstance(n, _FUNCTIONS)]
    inside = chain[chain.index(functions[-1]) + 1:] if functions else chain
    guards = 0
    for index, node in enumerate(inside):
        below = inside[index + 1] if index + 1 < len(inside) else None
        if isinstance(node, ast.If) and "__name__" not in ast.unparse(node.test) and below is not None \
                and below is not node.test and not node.test.lineno <= line <= (node.test.end_lineno or 0):
            guards += 1  # the line is in a branch, not in the test itself
        elif isinstance(node, (ast.Try, ast.IfExp, ast.ExceptHandler)):
            guards += 1
    if functions:
        in_class = any(isinstance(n, ast.ClassDef) for n in chain[:chain.index(functions[0])])
        scope = "method" if in_class else "function"
    else:
        main = any(isinstance(n, ast.If) and "__name__" in ast.unparse(n.test) for n in chain)
        scope = "main-block" if main else "module"
    if _TEST_PATH.search(path) or (functions and functions[-1].name.startswith("test")):
        scope = "test"
    found = {f"scope: {scope}", f"guards around it: {min(guards, 2)}{'+' if guards >= 2 else ''}"}
    if functions:
        function = functions[-1]
        names = [a.arg for a in function.args.args + function.args.kwonlyargs]
        if any(_DEVICE_PARAMETER.search(name) for name in names):
            found.add("function takes a device parameter")
        if len(re.findall(rf"\b{re.escape(function.name)}\s*\(", text)) <= 1:
            found.add("function not called in its file")
    return found


def main(argv: list[str]) -> int:
    if len(argv) < 2 or not all("=" in a for a in argv[1:]):
        print(__doc__.strip().splitlines()[6].strip(), file=sys.stderr)
        return 2
    corpora = dict(a.split("=", 1) for a in argv[1:])
    index = scan_all(Path(argv[0]), corpora)
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    parsed: dict[str, tuple[str, ast.Module] | None] = {}
    for verdict in verdicts():
        if verdict["seed"] not in corpora:
            continue
        hot = [path for path, severities in index.get((verdict["line"], verdict["rule"]), [])
               if ("/" + path).endswith("/" + verdict["path"]) and severities & {"error", "silent"}]
        if not hot:
            continue
        path = hot[0]
        if path not in parsed:
            try:
                text = Path(path).read_text(errors="replace")
                parsed[path] = (text, ast.parse(text)) if path.endswith(".py") else None
            except (OSError, SyntaxError, ValueError):
                parsed[path] = None
        keys = {"all"}
        if parsed[path] is None:
            keys.add("scope: not Python")
        else:
            text, tree = parsed[path]  # type: ignore[misc]
            found = context_of(path, verdict["line"], text, tree)
            keys |= found
            keys |= {f"{verdict['rule']}, {scope}" for scope in found if scope.startswith("scope")}
        for key in keys:
            counts[key][0 if verdict["correct"] else 1] += 1
    print(f"{'context':44} {'correct':>8} {'incorrect':>10} {'precision':>10}")
    for key, (correct, incorrect) in sorted(counts.items(), key=lambda item: (item[0].count(","), item[0])):
        if correct + incorrect >= (5 if "," not in key else 20):
            print(f"{key:44} {correct:8} {incorrect:10} {100 * correct / (correct + incorrect):9.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
