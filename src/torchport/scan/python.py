"""Static analysis of one Python source: which rules it breaks and how to rewrite them.

The rules themselves are found by the rule-family detectors in ``scan/detectors/``
(one module per family, composed into one visitor by ``detectors/analyzer.py``);
this module decides what to parse and runs them.

Names are resolved through the file's imports and simple assignments
(``import torch as th``, ``from torch import cuda``, ``from torch.cuda.amp import
autocast``, ``cudnn = torch.backends.cudnn``), so every check works on a
*qualified* name such as ``torch.cuda.synchronize``.  String constants assigned
once (``device = "cuda"``) are followed where a device or backend is expected.

Fixes are expressed as edits at ``ast`` positions; ``fixer.py`` applies them to
the original text so that everything outside the rewritten expressions stays
byte-identical.

Speed: most files of a large repository never mention CUDA.  ``parse_relevant``
parses only the top-level statements (or class members) that contain a trigger
word, plus the imports; that is what makes a 1.2-million-line scan take seconds.
The fixer parses whole files.
"""
from __future__ import annotations

import ast
import bisect
import re
import warnings
from itertools import accumulate

from torchport.scan.detectors.analyzer import FAMILY_TRIGGER_WORDS, Analyzer
from torchport.scan.detectors.shared import DEVICE_NAME
from torchport.scan.detectors.syntax import import_aliases, version_key
from torchport.scan.model import Finding

__all__ = ["DEVICE_NAME", "analyze", "has_trigger", "parse_around", "parse_relevant", "version_key"]

# --------------------------------------------------------------------------------------
# Fast path: parse only what can matter.

# Words without which no rule can fire.  Third-party packages matter only where
# they are imported (_PACKAGE_IMPORT).  Names imported under another spelling
# (``from torch.cuda import synchronize as sync``) are added per file.  A rule
# family that needs a word of its own declares it (TRIGGER_WORDS in its detector).
TRIGGERS = ("cuda", "CUDA_", "CUDAExtension", "cudnn", "nccl", "NCCL", "float64", ".double",
            "DoubleTensor", "cdouble", "complex128", "pin_memory", "non_blocking", "xla",
            "nvidia-smi", "init_process_group", "new_group", "new_subgroups", "autocast",  # torchport: ignore
            "GradScaler", "install_requires", "extras_require", "cpp_extension") + FAMILY_TRIGGER_WORDS
_PACKAGES = (r"(?:triton|apex|flash_attn|flash_attn_interface|xformers|cupy|cupyx|"
             r"pycuda|pynvml|nvidia|transformer_engine|tensorrt|torch_tensorrt|mamba_ssm|"
             r"causal_conv1d|deepspeed\.op\w*|cuda)\b")
# Two patterns, each starting with a literal, because re scans for a literal
# prefix far faster than for an alternation.
_PACKAGE_IMPORT = re.compile(r"import[ \t]+" + _PACKAGES)
_PACKAGE_IMPORT_FROM = re.compile(r"from[ \t]+" + _PACKAGES)
_INTERESTING_PREFIXES = ("torch.cuda", "torch.backends.cud", "torch.float64", "torch.double",
                         "torch.complex128", "torch.cdouble", "torch.DoubleTensor", "triton",
                         "torch_xla", "torch.utils.cpp_extension", "torch.amp",
                         "torch.distributed")
# `cudnn = torch.backends.cudnn`: the new name is a trigger too.
_MODULE_ALIAS = re.compile(r"[ \t]*(\w+)[ \t]*=[ \t]*[\w.]*\.(?:cuda|cudnn|amp|matmul)\b[\w.]*[ \t]*$")
# A statement at column 0, matched at the line break before it: re scans for a literal
# first character fast, while `^` under re.M is tried at every character (4x slower).
_TOP_LEVEL_START = re.compile(r"\n(?=[A-Za-z_@])(?!(?:else|elif|except|finally)\b)")
# '""".*?"""' (re.S) unrolled: runs without a quote are consumed in one step (25% faster,
# the same spans).
_TRIPLE_QUOTED = re.compile(r'"""[^"]*(?:"(?!"")[^"]*)*"""|\'\'\'[^\']*(?:\'(?!\'\')[^\']*)*\'\'\'')
_SPLIT_LINES = 40


# The file-level check, the hottest loop of a scan: the words above minus those
# that only matter next to another trigger in the same file (a "nccl" constant
# for init_process_group, a "cuda" device for autocast) or only in setup.py.
# "cud" stands for both "cuda" and "cudnn" (one pass over the text instead of two).
_FILE_TRIGGERS = ("cud",) + tuple(w for w in TRIGGERS if w not in (
    "cuda", "cudnn", "CUDA_", "CUDAExtension", "init_process_group", "new_group", "new_subgroups", "autocast",
    "install_requires", "extras_require")) + ("CUDA",)


def parse_whole(text: str) -> ast.Module | None:
    """The whole file (the workers parse only the pieces that hold a trigger), quietly: a
    SyntaxWarning is the file's business, not the scan's output; None where it does not parse."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None


def has_trigger(text: str) -> bool:
    return any(word in text for word in _FILE_TRIGGERS) or bool(
        _PACKAGE_IMPORT.search(text) or _PACKAGE_IMPORT_FROM.search(text))


class _Source:
    """Line bookkeeping for one file's text."""

    def __init__(self, text: str):
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.offsets = [0, *accumulate(map(len, self.lines))]
        self._strings: list[tuple[int, int]] | None = None

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self.offsets, offset) - 1  # 0-based

    def masked(self, keep: bytearray) -> str:
        return "".join([line if kept else "\n" for line, kept in zip(self.lines, keep)])

    def inside_strings(self) -> list[tuple[int, int]]:
        """(first, last) 0-based lines that continue a triple-quoted string."""
        if self._strings is None:
            spans = []
            if '"""' in self.text or "'''" in self.text:
                for match in _TRIPLE_QUOTED.finditer(self.text):
                    first, last = self.line_of(match.start()), self.line_of(match.end())
                    if last > first:
                        spans.append((first + 1, last))
            self._strings = spans
        return self._strings

    def in_string(self, line: int) -> bool:
        spans = self.inside_strings()
        index = bisect.bisect_right(spans, (line, len(self.lines))) - 1
        return index >= 0 and spans[index][0] <= line <= spans[index][1]

    def lines_containing(self, words, patterns=()) -> set[int]:
        """0-based lines holding a word or a pattern match, comment lines excepted."""
        found = set()
        text = self.text
        for word in words:
            position = text.find(word)
            while position != -1:
                line = self.line_of(position)
                found.add(line)
                position = text.find(word, self.offsets[line + 1])
        for pattern in patterns:
            found.update(self.line_of(m.start()) for m in pattern.finditer(text))
        return {line for line in found if not self.lines[line].lstrip().startswith("#")}

    def statement_starts(self, first: int, last: int) -> list[int]:
        """0-based lines in [first, last) where a statement at column 0 begins.

        Decorators stay with what they decorate and else/except/finally with their
        statement (``_TOP_LEVEL_START`` does not match those).  A line inside a
        multi-line string can look like a start; the piece then fails to parse and the
        caller falls back to the whole file.
        """
        starts = [first]
        text, lines = self.text, self.lines
        line, position = first, self.offsets[first]
        previous_decorator = lines[first][:1] == "@"
        for match in _TOP_LEVEL_START.finditer(text, position, self.offsets[last]):
            line += text.count("\n", position, match.start())  # the line this break ends
            position = match.start()
            statement = line + 1
            if statement >= last or self.in_string(statement):
                continue
            decorator = lines[statement][:1] == "@"
            if not previous_decorator:
                starts.append(statement)
            previous_decorator = decorator
        return starts


def parse_relevant(text: str) -> ast.Module | None:
    """The module reduced to the statements that can produce findings, with their
    real positions; None when no statement can.

    Unwanted lines are blanked rather than removed, so one ``ast.parse`` of the
    masked text gives every node its true line and column.  Raises SyntaxError
    when a cut was misplaced (the caller then parses the whole file).
    """
    source = _Source(text)
    line_count = len(source.lines)
    if not line_count:
        return None
    # Every import of a name that matters mentions a trigger word (cuda, triton,
    # cpp_extension, ...), so a file without trigger lines has nothing to find.
    trigger_lines = source.lines_containing(TRIGGERS, (_PACKAGE_IMPORT_FROM, _PACKAGE_IMPORT))
    if not trigger_lines:
        return None
    starts = source.statement_starts(0, line_count)
    ends = starts[1:] + [line_count]
    keep = bytearray(line_count)  # 1 = keep this line

    def keep_chunk(index: int) -> None:
        keep[starts[index]:ends[index]] = b"\x01" * (ends[index] - starts[index])

    for index, start in enumerate(starts):
        head = source.lines[start]
        if head.startswith(("import ", "from ")) or (
                head.startswith(("try:", "if ")) and ends[index] - start < 40):
            chunk = "".join(source.lines[start:ends[index]])
            # Only imports that can name something a rule knows; relative imports
            # and other libraries are most of a large file's import block.
            if "import " in chunk and ("torch" in chunk or "triton" in chunk or "cuda" in chunk
                                       or _PACKAGE_IMPORT.search(chunk) or _PACKAGE_IMPORT_FROM.search(chunk)):
                keep_chunk(index)
    # The imports decide which local names matter (``from torch.cuda import
    # synchronize as sync`` makes "sync" a trigger in this file).
    imports = ast.parse(source.masked(keep)).body
    import_lines = bytes(keep)
    keep = bytearray(line_count)
    renamed = _interesting_local_names(imports) + [
        match.group(1) for line in trigger_lines if (match := _MODULE_ALIAS.match(source.lines[line]))]
    if renamed:
        pattern = re.compile(r"\b(?:{})\b".format("|".join(map(re.escape, renamed))))
        trigger_lines |= source.lines_containing((), (pattern,))
    for line in trigger_lines:
        index = bisect.bisect_right(starts, line) - 1
        if not import_lines[starts[index]]:
            _keep_block(source, keep, starts[index], ends[index], 0, line)
    body = imports + ast.parse(source.masked(keep)).body
    body.sort(key=lambda node: node.lineno)
    return ast.Module(body=body, type_ignores=[])


def parse_around(text: str, words: list[str]) -> ast.Module:
    """The module reduced to its imports (a short ``try``/``if`` holding one included) and the
    statements holding one of ``words``, with their real positions; a long class or function
    keeps its header and the inner statement.  For the scan's look at the calls of a few names
    across a package, where parsing every file that spells one whole costs more than the scan of
    the rest.  Raises SyntaxError when a cut was misplaced (the caller then parses the whole file)."""
    source = _Source(text)
    line_count = len(source.lines)
    starts = source.statement_starts(0, line_count)
    ends = starts[1:] + [line_count]
    keep = bytearray(line_count)
    for index, start in enumerate(starts):
        head = source.lines[start]
        if head.startswith(("import ", "from ")) or (
                head.startswith(("try:", "if ")) and ends[index] - start < _SPLIT_LINES
                and "import " in "".join(source.lines[start:ends[index]])):
            keep[start:ends[index]] = b"\x01" * (ends[index] - start)
    imports = bytes(keep)
    for line in source.lines_containing(words):
        index = bisect.bisect_right(starts, line) - 1
        if not imports[starts[index]]:
            _keep_block(source, keep, starts[index], ends[index], 0, line, decorator_lines=True)
    return ast.parse(source.masked(keep))


def _keep_block(source: _Source, keep: bytearray, start: int, end: int, indent: int, line: int,
                decorator_lines: bool = False) -> None:
    """Keep the statement [start, end) that holds ``line``.  A long class or function
    keeps only its header and, recursively, the inner statement holding the line.
    ``decorator_lines``: a decorator over several lines (``@requires(\n    backends=...,\n)``)
    is read as one; the scan's own parse keeps such a class whole, and its findings depend on it."""
    header = start
    while header < end and (source.lines[header][indent:indent + 1] == "@" or (
            decorator_lines and header > start and _continues_decorator(source.lines[header], indent))):
        header += 1
    head = source.lines[header][indent:] if header < end else ""
    if (end - start <= _SPLIT_LINES or line <= header
            or not head.startswith(("class ", "def ", "async def ")) or not head.rstrip().endswith(":")):
        keep[start:end] = b"\x01" * (end - start)
        return
    inner = _body_indent(source, header + 1, end, indent)
    if inner is None:
        keep[start:end] = b"\x01" * (end - start)
        return
    keep[start:header + 1] = b"\x01" * (header + 1 - start)
    inner_start, inner_end = _statement_around(source, header + 1, end, inner, line)
    _keep_block(source, keep, inner_start, inner_end, inner, line, decorator_lines)


def _body_indent(source: _Source, first: int, last: int, outer: int) -> int | None:
    """The spaces before the first statement of the body in [first, last): files indent by 2,
    4 or 8, and a cut at the wrong depth can still parse, keeping a nested line without the
    ``if`` around it.  None where the body is indented with tabs or is not found."""
    for number in range(first, last):
        text = source.lines[number]
        stripped = text.lstrip(" ")
        if not stripped.strip() or stripped.startswith("#") or source.in_string(number):
            continue
        spaces = len(text) - len(stripped)
        return spaces if spaces > outer and not stripped.startswith("\t") else None
    return None


def _statement_around(source: _Source, first: int, last: int, indent: int, line: int) -> tuple[int, int]:
    """[start, end) of the statement at this indentation that holds ``line``, found by
    walking out from it (a long class body is not split as a whole)."""
    pattern = _statement_start_at(indent)
    lines = source.lines

    def starts_statement(number: int) -> bool:
        return bool(pattern.match(lines[number])) and not source.in_string(number)

    start = line
    while start > first and not starts_statement(start):
        start -= 1
    while start > first:  # the decorators, a decorator over several lines included
        above = start - 1
        while above > first and _continues_decorator(lines[above], indent):
            above -= 1
        if not (lines[above][indent:indent + 1] == "@" and starts_statement(above)):
            break
        start = above
    end = line + 1  # the next statement ends this one; a decorator's own function does not
    while end < last and not (starts_statement(end) and lines[end - 1][indent:indent + 1] != "@"):
        end += 1
    return start, end


_START_PATTERNS: dict[int, re.Pattern] = {}


def _statement_start_at(indent: int) -> re.Pattern:
    if indent not in _START_PATTERNS:
        _START_PATTERNS[indent] = re.compile(rf" {{{indent}}}(?!(?:else|elif|except|finally)\b)[A-Za-z_@]")
    return _START_PATTERNS[indent]


def _interesting_local_names(statements: list[ast.stmt]) -> list[str]:
    names = []
    for alias, qualname in import_aliases(statements).items():
        if qualname.startswith(_INTERESTING_PREFIXES) and not any(word in alias for word in TRIGGERS):
            names.append(alias)
    return names


# --------------------------------------------------------------------------------------
# The analysis proper.

def analyze(tree: ast.Module, text: str, path: str) -> list[Finding]:
    return analyze_with_cuda_tests(tree, text, path)[0]


def analyze_with_cuda_tests(tree: ast.Module, text: str, path: str) -> tuple[list[Finding], list[tuple[int, int]]]:
    """The findings, and the line spans of the tests that run only where CUDA is present (a test
    function, or each method of a test class, under ``@skip_unless_cuda()`` and the like)."""
    analyzer = Analyzer(tree, text, path)
    analyzer.visit(tree)
    return _one_per_token(analyzer.findings), list(analyzer.__dict__.get("cuda_only_spans", []))


def _one_per_token(findings: list[Finding]) -> list[Finding]:
    """One finding per rule per token: a finding whose span lies inside another of
    the same rule (``torch.cuda.amp`` inside ``torch.cuda.amp.autocast(...)``) is dropped."""
    kept: list[Finding] = []
    for finding in sorted(findings, key=lambda f: (f.rule_id, f.line, f.column, -f.end_line, -f.end_column)):
        if kept and kept[-1].rule_id == finding.rule_id and _contains(kept[-1], finding):
            kept[-1].related.extend(finding.related)
            continue
        kept.append(finding)
    return kept


def _contains(outer: Finding, inner: Finding) -> bool:
    return ((outer.line, outer.column) <= (inner.line, inner.column)
            and (inner.end_line, inner.end_column) <= (outer.end_line, outer.end_column))


def _continues_decorator(text: str, indent: int) -> bool:
    """A line inside a decorator's brackets (``@unittest.skipUnless(\\n    cond,\\n)``): indented
    deeper than the decorator, or its closing bracket."""
    return text[:indent + 1].isspace() or text[indent:indent + 1] in (")", "]", "}")
