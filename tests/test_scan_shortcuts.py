"""The scan's shortcuts answer what the slower forms they replace answer: the device-comparison
searches (one literal-first search each instead of one alternation), the questions asked of the
reduced parse before the whole file is parsed, and the display path of a file below the current
folder."""
from __future__ import annotations

import ast
import os
import re
import textwrap
from pathlib import Path

import pytest

from torchport.scan import cuda_queries, old_torch_branch, policy
from torchport.scan.python import parse_relevant
from torchport.scan.scanner import display_path

# The alternation the literal-first searches replaced.
_ONE_ALTERNATION = re.compile(r"""\.is_cuda\b|[=!]=\s*['"](cuda|xla)|['"](cuda|xla)(:\d*)?['"]\s*[=!]=|"""
                              r"""\bin\s*[(\[{]\s*['"](cuda|xla)|startswith\(\s*['"](cuda|xla)""")


@pytest.mark.parametrize("text", [
    "if x.is_cuda:\n", "if x.is_cudagraph:\n", "if device == 'cuda':\n", "if d != \"xla\":\n",
    "if 'cuda:0' == d:\n", "if \"cuda:\" != d.type:\n", "if d.type in ('cpu', 'cuda'):\n",
    "if d.type in ('cuda', 'cpu'):\n", "if d.type in['xla']:\n", "within ('cuda', 1)\n", "_in ('cuda',)\n",
    "in ('cuda',)\n", "if str(d).startswith( 'cuda'):\n", "device = 'cuda'\n", "x = ('cuda', 'xla')\n",
    "if dé in ('cuda',):\n", "if dé in ('cuda',):\n".replace("é", "\u00e9\u0301"), "",
])
def test_device_comparison_searches_answer_as_the_alternation(text):
    policy._compares_devices.cache_clear()
    assert policy._compares_devices(text) is (_ONE_ALTERNATION.search(text) is not None)


def _long_function_with(branch: str) -> str:
    """A function over the reduced parse's split length (40 lines), the branch near its end."""
    filler = "".join(f"    value_{n} = {n}\n" for n in range(45))
    return "import torch\n\n\ndef run(model):\n" + filler + textwrap.indent(textwrap.dedent(branch), "    ")


def _both_parses(text: str) -> tuple[ast.Module, ast.Module]:
    reduced = parse_relevant(text)
    assert reduced is not None
    assert len(ast.dump(reduced)) < len(ast.dump(ast.parse(text)))  # the filler was dropped
    return reduced, ast.parse(text)


@pytest.mark.parametrize("branch, expected", [
    ("if torch.__version__ < '2.0':\n    model.cuda()\nelse:\n    model.to('cpu')\n", True),
    ("if torch.__version__ < '2.0':\n    model.cuda()\n", False),
    ("for part in model.children():\n    if part.training:\n        part.cuda()\n    else:\n        pass\n", True),
])
def test_either_branch_is_answered_alike_by_the_reduced_parse(branch, expected):
    text = _long_function_with(branch)
    line = next(n for n, source in enumerate(text.splitlines(), 1) if "cuda()" in source)
    reduced, whole = _both_parses(text)
    assert old_torch_branch.in_either_branch(reduced, line) is expected
    assert old_torch_branch.in_either_branch(whole, line) is expected


# The reduced parse of a long function keeps only the statement at the line, so it may answer
# yes where the whole file answers no; it never answers no where the whole file answers yes.
@pytest.mark.parametrize("function, reduced_says, whole_says", [
    ("def fused_ok():\n    return _FUSED and torch.cuda.is_available()\n", True, True),
    ('def fused_ok():\n    """Whether the kernel runs."""\n    return _FUSED and torch.cuda.is_available()\n',
     True, True),
    ("def fused_ok():\n    ready = _FUSED\n" + "    x = 1\n" * 45 + "    return ready and torch.cuda.is_available()\n",
     True, False),
    ("def fused_ok():\n    return _FUSED or torch.cuda.is_available()\n", False, False),
])
def test_availability_return_of_the_reduced_parse_is_a_necessary_condition(function, reduced_says, whole_says):
    text = "import torch\n\ntry:\n    import fused\n    _FUSED = True\nexcept ImportError:\n    _FUSED = False\n\n\n" \
           + function
    lines = text.splitlines(keepends=True)
    line = next(n for n, source in enumerate(lines, 1) if "is_available" in source)
    reduced, whole = parse_relevant(text), ast.parse(text)
    assert reduced is not None
    assert (cuda_queries.availability_return(reduced, lines, line) is not None) is reduced_says
    assert (cuda_queries.availability_return(whole, lines, line) is not None) is whole_says
    assert (cuda_queries.kernel_library_helper(whole, lines, line) is not None) is whole_says


def test_display_path_below_a_hidden_folder_is_what_relpath_gives(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for relative in (".venv/lib/site.py", "a.b/c.py", "src/.hidden/x.py"):
        path = (tmp_path / relative).resolve()
        assert display_path(path) == os.path.relpath(path) == relative
    assert display_path(Path(os.path.join(str(tmp_path.resolve()), "a", "..", "b.py"))) == "b.py"


def _two_space(text: str) -> str:
    """The same code indented by 2 spaces a level instead of 4."""
    return "".join(line[(len(line) - len(line.lstrip(" "))) // 2:] for line in text.splitlines(keepends=True))


def test_a_two_space_body_keeps_the_if_around_the_line():
    text = _two_space(_long_function_with("if torch.__version__ >= '2.0':\n    y = model.to('cpu')\nelse:\n"
                                          "    y = model.cuda()\n    y = y + 1\n"))
    assert "\n  if torch.__version__" in text and "\n    y = model.cuda()" in text
    line = next(n for n, source in enumerate(text.splitlines(), 1) if "cuda()" in source)
    reduced, whole = _both_parses(text)
    assert old_torch_branch.in_either_branch(reduced, line) and old_torch_branch.in_either_branch(whole, line)


def test_a_two_space_class_keeps_the_method_around_the_return():
    methods = "".join(f"    def helper_{n}(self):\n        return {n}\n\n" for n in range(20))
    text = _two_space("import torch\n\ntry:\n    import fused\n    _FUSED = True\nexcept ImportError:\n"
                      "    _FUSED = False\n\n\nclass Kernels:\n" + methods
                      + "    def fused_ok(self):\n        return _FUSED and torch.cuda.is_available()\n")
    lines = text.splitlines(keepends=True)
    line = next(n for n, source in enumerate(lines, 1) if "is_available" in source)
    reduced, whole = _both_parses(text)
    assert cuda_queries.availability_return(reduced, lines, line) is not None
    assert cuda_queries.kernel_library_helper(whole, lines, line) is not None
