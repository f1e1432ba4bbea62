"""Severity by evidence: the shapes that independent judges found mostly wrong at
error or silent are lowered here, after the detectors have run (docs/precision/policy.md
has the pooled verdicts behind every row).

Error and silent are kept for shapes whose consequence is certain in normal use.  A
lowered finding keeps its rule and location and says why (``cap_reason``): it still
appears in JSON, SARIF and with ``--show-info``.  Only ``torchport scan`` applies this
policy; ``torchport fix`` rewrites the same code as before.
"""
from __future__ import annotations

import ast
import re

from torchport.scan.model import Finding
from torchport.scan.rules import CUDA_VISIBLE_DEVICES, FLOAT64, RULES_BY_ID, SEVERITY_RANK

# A file that only a test runner executes: under a tests/ folder, test_*.py, *_test.py,
# conftest.py, or an editor's backup of one (flycheck_test_utils.py).
_TEST_FILE = re.compile(r"(^|/)(tests?|testing)/|(^|/)(flycheck_)?(test_[^/]*|[^/]*_test|conftest)\.py$")

# Libraries whose whole point is an NVIDIA feature: code that imports them is CUDA by design.
_NVIDIA_ONLY = re.compile(r"\b(tensorrt|torch_tensorrt|kvikio|cupy|pynvml|nvidia_smi|trt\.Builder|trt\.Runtime)\b")

# An opt-in flag named for CUDA: `def get_data(cuda=False)`, `use_cuda=None`, `self.use_gpu`.
_CUDA_FLAG = re.compile(r"(use_)?(cuda|gpu)", re.IGNORECASE)

# Factories that make a new tensor: without device= it is on the CPU, where float64 is fine.
_FACTORIES = frozenset({"tensor", "as_tensor", "from_numpy", "eye", "zeros", "ones", "empty", "full", "arange",
                        "linspace", "DoubleTensor", "rand", "randn", "zeros_like", "ones_like"})



def is_test_file(path: str) -> bool:
    return bool(_TEST_FILE.search(path.replace("\\", "/")))


def _worst(finding: Finding) -> str | None:
    """The finding's worst severity over every target, after its own cap."""
    rule = RULES_BY_ID[finding.rule_id]
    found = [s for s in rule.severity.values() if s]
    if not found:
        return None
    worst = max(found, key=SEVERITY_RANK.__getitem__)
    cap = finding.severity_cap
    return cap if cap and SEVERITY_RANK[cap] < SEVERITY_RANK[worst] else worst


def _lower(finding: Finding, cap: str, reason: str) -> None:
    finding.severity_cap = cap
    finding.cap_reason = reason


class _Context:
    """The statements around each line of one file, found once and only when needed."""

    def __init__(self, tree: ast.Module, text: str) -> None:
        self.text = text
        self.scopes: list[ast.AST] = []  # functions and classes
        self.swallowing_tries: list[ast.Try] = []
        self.ifs: list[ast.If] = []
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.scopes.append(node)
            elif isinstance(node, ast.Try) and any(_swallows(h) for h in node.handlers):
                self.swallowing_tries.append(node)
            elif isinstance(node, ast.If):
                self.ifs.append(node)
        self.calls_by_line: dict[int, list[ast.Call]] | None = None
        self.tree = tree

    def enclosing(self, line: int) -> list[ast.AST]:
        return [s for s in self.scopes if _first_line(s) <= line <= (s.end_lineno or s.lineno)]

    def in_swallowing_try(self, line: int) -> bool:
        return any(t.body[0].lineno <= line <= (t.body[-1].end_lineno or t.body[-1].lineno)
                   for t in self.swallowing_tries)

    def source(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.text, node) or ""

    def calls_at(self, line: int) -> list[ast.Call]:
        if self.calls_by_line is None:
            self.calls_by_line = {}
            for node in ast.walk(self.tree):
                if isinstance(node, ast.Call):
                    self.calls_by_line.setdefault(node.lineno, []).append(node)
        return self.calls_by_line.get(line, [])


def _first_line(scope) -> int:
    """Where a function or class starts, its decorators included."""
    return min([scope.lineno] + [d.lineno for d in scope.decorator_list])


def _swallows(handler: ast.ExceptHandler) -> bool:
    """``except Exception: pass``-like: a broad handler that neither re-raises nor exits."""
    kind = handler.type
    broad = kind is None or (isinstance(kind, ast.Name) and kind.id in ("Exception", "BaseException")) or (
        isinstance(kind, ast.Tuple) and any(isinstance(e, ast.Name) and e.id in ("Exception", "AttributeError",
                                                                                 "RuntimeError", "AssertionError")
                                            for e in kind.elts))
    return broad and not any(isinstance(n, ast.Raise) for n in ast.walk(handler))


def _opt_in_flag(context: _Context, line: int) -> str | None:
    """The name of a CUDA flag parameter, default False/None, whose ``if`` guards the line."""
    for function in context.enclosing(line):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        arguments = function.args
        positional = arguments.posonlyargs + arguments.args
        defaults = dict(zip([a.arg for a in positional[len(positional) - len(arguments.defaults):]],
                            arguments.defaults))
        defaults.update({a.arg: d for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults) if d is not None})
        off = {name for name, d in defaults.items()
               if _CUDA_FLAG.fullmatch(name) and isinstance(d, ast.Constant) and d.value in (False, None)}
        if not off:
            continue
        for statement in context.ifs:
            test = statement.test
            if (function.lineno <= statement.lineno <= (function.end_lineno or 0)
                    and isinstance(test, ast.Name) and test.id in off
                    and statement.body[0].lineno <= line <= (statement.body[-1].end_lineno or 0)):
                return test.id
    return None


def _new_cpu_float64(context: _Context, line: int) -> bool:
    """float64 only in tensors made on this line without a device: they are on the CPU."""
    calls = [c for c in context.calls_at(line)
             if "float64" in context.source(c) or "double" in context.source(c).lower()]
    if not calls:
        return False
    for call in calls:
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else (func.id if isinstance(func, ast.Name) else "")
        makes_on_device = name not in _FACTORIES or any(k.arg == "device" for k in call.keywords)
        if makes_on_device and not any(inner is not call and inner in calls for inner in ast.walk(call)):
            return False
    return True


# `pytest.skip(..., allow_module_level=True)` or `pytestmark = pytest.mark.skipif(...)`.
_MODULE_SKIP = re.compile(r"allow_module_level\s*=\s*True|^pytestmark\s*=.*skip", re.MULTILINE)


def _lower_self_skipping_tests(context: _Context | None, text: str, findings: list[Finding]) -> None:
    """Tests shipped in a package that skip themselves where CUDA is absent: a module-level
    skip, or a CUDA case of a parametrised test whose body skips."""
    module_skip = bool(_MODULE_SKIP.search(text)) and "cuda" in text.lower()
    for finding in findings:
        if module_skip:
            _lower(finding, "info", "test module skipped as a whole where its CUDA requirement is not met")
            continue
        if context is None:
            continue
        for function in context.enclosing(finding.line):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) or not function.decorator_list:
                continue
            decorators = function.decorator_list
            in_decorator = decorators[0].lineno <= finding.line <= (decorators[-1].end_lineno or 0)
            if in_decorator and "skip" in "\n".join(context.source(s) for s in function.body).lower():
                _lower(finding, "info", "a CUDA case of a parametrised test that skips itself where CUDA is absent")


def apply(tree: ast.Module | None, text: str, path: str, findings: list[Finding]) -> None:
    """Lower, in place, the error/silent findings of one file whose shape the judges
    found mostly wrong (see docs/precision/policy.md)."""
    strong = [f for f in findings if _worst(f) in ("error", "silent")]
    if not strong:
        return
    context = _Context(tree, text) if tree is not None else None
    if is_test_file(path):
        _lower_self_skipping_tests(context, text, strong)
        strong = [f for f in strong if f.severity_cap != "info"]
    for finding in strong:
        rule = finding.rule_id
        snippet = finding.snippet
        if rule == CUDA_VISIBLE_DEVICES or "CUDA_VISIBLE_DEVICES" in snippet:
            _lower(finding, "info", "CUDA_VISIBLE_DEVICES plumbing: no effect where CUDA is absent")
        elif context is None:
            continue
        elif context.in_swallowing_try(finding.line):
            _lower(finding, "info", "inside a try whose broad except neither re-raises nor exits: the error "
                                    "is caught")
        elif any(_NVIDIA_ONLY.search(context.source(scope)) for scope in context.enclosing(finding.line)[-1:]):
            _lower(finding, "info", "in code built on an NVIDIA-only library (TensorRT, GPUDirect Storage, NVML): "
                                    "CUDA by design")
        elif (flag := _opt_in_flag(context, finding.line)) is not None:
            _lower(finding, "info", f"only when the caller opts in with {flag}=True (off by default)")
        elif rule == FLOAT64 and _new_cpu_float64(context, finding.line):
            _lower(finding, "info", "float64 in a tensor made without a device: it is on the CPU, where float64 works")
