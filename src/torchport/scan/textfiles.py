"""Non-Python sources: dependency lists, CUDA/C++ sources, shell and container scripts."""
from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterator

from torchport.scan.model import Finding
from torchport.scan.packages import classify_requirement
from torchport.scan.rules import (CUDA_ONLY_PACKAGE, CUDA_SOURCE_FILE, CUDA_VISIBLE_DEVICES,
                                  NON_HIPIFIABLE_CODE, NVIDIA_TOOLING, TRITON_KERNEL)

# The rules found outside Python code (the requirement rules through classify_requirement).
RULE_IDS = (CUDA_SOURCE_FILE, CUDA_VISIBLE_DEVICES, NVIDIA_TOOLING, CUDA_ONLY_PACKAGE, TRITON_KERNEL,
            NON_HIPIFIABLE_CODE)

_CUDA_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"](cuda[\w./]*|cub/|thrust/|ATen/cuda/|c10/cuda/|'
                           r'cublas|cudnn|nccl|curand|cufft|cusparse)', re.M)
# (pattern, what it is): code that hipify leaves CUDA-only.  Inline assembly counts
# only in CUDA sources, where it is PTX; in C++ it is the host's.
# (pattern, what it is, once per file): a library used all over a file is reported
# where it first appears; each PTX statement and NCCL call is a line to change.
_PTX = (re.compile(r"\basm\s*(?:volatile\s*|__volatile__\s*)?\("), "inline PTX assembly", False)
_NOT_HIPIFIED = ((re.compile(r"\bcudnn_frontend\b"), "the cuDNN frontend (first use in the file)", True),
                 (re.compile(r"\b(?:cutlass|cute)(?:/|::)"), "CUTLASS/CuTe (first use in the file)", True),
                 (re.compile(r"\bnccl(?:Send|Recv)\s*\("), "NCCL point-to-point", False))
# A preprocessor conditional, and the build options a project's setup sets for its CUDA (or ROCm)
# build (WITH_CUDA, USE_CUDA, COLOSSAL_WITH_CUDA, GOOGLE_CUDA): the same file also builds without
# them.  The compiler's own macros (__CUDACC__, __NVCC__, __CUDACC_RTC__) are not options: they
# tell a CUDA-only header which CUDA compiler reads it.
_CONDITIONAL = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|elifdef|elifndef|else|endif)\b(.*)$")
_GPU_BUILD_MACRO = re.compile(r"^(?!(?:\w*_)?(?:NO|NOT|DONT|DISABLE|WITHOUT|SKIP)_)(?:\w*(?:WITH|USE|BUILD|ENABLE|HAS|HAVE)_(?:CUDA|ROCM|HIP)\w*|GOOGLE_CUDA)$")
# What a branch that only stops the program where it is compiled holds.
_FAILURE = re.compile(r"\b(?:assert|__trap|abort|__builtin_trap)\s*\([^;]*\)\s*;|^\s*#\s*error\b.*$"
                      r"|\bstatic_assert\s*\(\s*(?:false|0)\b[^;]*\)\s*;", re.M)
# NVIDIA architecture macros, which a HIP build leaves undefined, and a test of one that is false then.
_ARCH_MACRO = re.compile(r"__CUDA_ARCH\w*")
_ARCH_TEST = re.compile(r"\(*\s*(?:defined\s*\(?\s*__CUDA_ARCH\w*\s*\)?|__CUDA_ARCH\w*"
                        r"|__CUDA_ARCH__\s*(?:>=|==)\s*0*[1-9]\d*|__CUDA_ARCH__\s*>\s*\d+)\s*\)*")
_VISIBLE_DEVICES = re.compile(r"\bCUDA_VISIBLE_DEVICES\b")
_NVIDIA_SMI = re.compile(r"\bnvidia-smi\b")
_SCRIPT_PATTERNS = ((_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES, _VISIBLE_DEVICES.pattern[2:-2]),
                    (_NVIDIA_SMI, NVIDIA_TOOLING, _NVIDIA_SMI.pattern[2:-2]))
_CPP_SUFFIXES = (".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".hh")
_SCRIPT_SUFFIXES = (".sh", ".bash", ".zsh", ".slurm", ".sbatch", ".yaml", ".yml", ".env")
_SCRIPT_NAMES = ("Dockerfile", "Makefile", "Containerfile")


def kind_of(name: str) -> str | None:
    """Which reader handles a file with this name; None for files the scan ignores."""
    if name.endswith(".py"):
        return "python"
    if name.endswith((".cu", ".cuh")):
        return "cuda-source"
    if name.endswith(_CPP_SUFFIXES):
        return "cpp"
    if name == "pyproject.toml":
        return "pyproject"
    lowered = name.lower()
    if lowered.endswith(".txt") and ("requirements" in lowered or lowered.startswith("constraints")):
        return "requirements"
    if name.endswith(_SCRIPT_SUFFIXES) or name in _SCRIPT_NAMES or name.startswith("Dockerfile"):
        return "script"
    return None


def _finding(rule_id: str, path: str, lines: list[str], line: int, column: int, end_column: int,
             detail: str) -> Finding:
    snippet = lines[line - 1] if 0 < line <= len(lines) else ""
    return Finding(rule_id, path, line, column, line, end_column, detail, snippet)


_COMMENT_OR_STRING = re.compile(r'//[^\n]*|/\*.*?(?:\*/|\Z)|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def _without_comments(text: str) -> str:
    """``text`` with its C/C++ comments blanked (newlines kept, so lines keep their
    numbers); string and character literals are skipped over, not blanked."""
    def blank(match: re.Match[str]) -> str:
        found = match.group(0)
        if found.startswith(("//", "/*")):
            return re.sub(r"[^\n]", " ", found)
        return found
    return _COMMENT_OR_STRING.sub(blank, text)


def analyze_text(kind: str, text: str, path: str, os_path: str | None = None) -> list[Finding]:
    lines = text.splitlines()
    if kind in ("cuda-source", "cpp"):
        code = _without_comments(text)
        code_lines = code.splitlines()
        if kind == "cuda-source":
            # the whole file is CUDA: reported at its first line (a licence comment included)
            first = next((i for i, line in enumerate(lines, 1) if line.strip()), 1)
            return [_finding(CUDA_SOURCE_FILE, path, lines, first, 1, 1, "CUDA source file"),
                    *_not_hipified(code_lines, lines, path, (_PTX, *_NOT_HIPIFIED))]
        # One finding per file, like a .cu file: at its first CUDA #include (the
        # header names the others once it is hipified or replaced).
        findings = []
        includes = [m for m in _CUDA_INCLUDE.finditer(code) if not _project_header(m, os_path)]
        if includes:
            defined_here = set(re.findall(r"^[ \t]*#[ \t]*define[ \t]+(\w+)", code, re.M))
            guards = _gpu_build_guards(code.split("\n"), defined_here)
            numbers, at, number = [], 0, 1
            for match in includes:
                number += code.count("\n", at, match.start())
                at = match.start()
                numbers.append(number)
            unguarded = [i for i, number in enumerate(numbers) if number not in guards]
            first = unguarded[0] if unguarded else 0
            match, number, count = includes[first], numbers[first], len(includes)
            more = f" (and {count - 1} more CUDA include{'s' if count > 2 else ''})" if count > 1 else ""
            finding = _finding(CUDA_SOURCE_FILE, path, lines, number, 1, len(lines[number - 1]) + 1,
                               f"includes CUDA header {match.group(1)}{more}")
            if not unguarded:
                finding.lower_to_info(f"every CUDA include is compiled only under {guards[number]}: a build "
                                      "without CUDA leaves it out")
            findings.append(finding)
        return findings + _not_hipified(code_lines, lines, path, _NOT_HIPIFIED)
    if kind == "requirements":
        return _requirements(lines, path)
    if kind == "pyproject":
        return _pyproject(text, lines, path)
    if kind == "script":
        findings = []
        for number, line in enumerate(lines, 1):
            if line.lstrip().startswith("#"):
                continue
            for pattern, rule_id, detail in _SCRIPT_PATTERNS:
                for match in pattern.finditer(line):
                    findings.append(_finding(rule_id, path, lines, number, match.start() + 1,
                                             match.end() + 1, detail))
        return findings
    return []


def _project_header(include: re.Match, os_path: str | None) -> bool:
    """``#include "cuda_util.h"`` where a file of that name lies beside the including file: a
    quoted include finds it there first, so it is the project's own header (scanned, and
    reported, as a file of its own), not the CUDA toolkit's."""
    if os_path is None or include.string[include.start(1) - 1] != '"':
        return False
    name = include.string[include.start(1):].split('"', 1)[0].split("\n", 1)[0]
    # only a header the scan reads (`.h`, `.cuh`, ...): an `.inl` or `.hxx` beside it would hide its CUDA
    return kind_of(os.path.basename(name)) in ("cpp", "cuda-source") \
        and os.path.isfile(os.path.join(os.path.dirname(os_path), name))


def _names_a_gpu_build(condition: str, defined_here: frozenset[str] | set[str] = frozenset()) -> bool:
    """``condition`` (of an #if/#elif, or an #ifdef's macro) holds only in a CUDA or ROCm build:
    it names such a macro, negates nothing, and each alternative of an || names one."""
    tokens = re.findall(r"&&|\|\||\w+|\S", condition)
    if any(t in ("not", "or", "xor", "bitor", "compl", "not_eq")
           or not (t in ("&&", "||", "(", ")") or t[0].isalpha() or t[0] == "_") for t in tokens):
        return False  # a negation, a comparison, a single |, a continued line: not a plain option
    if any(t in defined_here for t in tokens if _GPU_BUILD_MACRO.match(t)):
        return False  # the file sets the option itself
    return all(any(_GPU_BUILD_MACRO.match(word) for word in re.findall(r"\w+", part))
               for part in condition.split("||"))


def _conjunct_names_a_gpu_build(condition: str, defined_here: frozenset[str] | set[str] = frozenset()) -> bool:
    """``(MSHADOW_USE_CUDA && CUDA_VERSION >= 7050)``: an ``&&`` of which one operand is a plain
    build option (``USE_CUDA``, ``defined(USE_CUDA)``) holds only where that option does, whatever
    the others compare.  An ``||`` or a ``!`` anywhere could hold without it."""
    if "||" in condition or "!" in condition.replace("!=", "") or "?" in condition or condition.endswith("\\"):
        return False  # an alternative, a negation, a choice, or a condition continued on the next line
    for conjunct in _unwrapped(condition).split("&&"):
        option = re.fullmatch(r"(?:defined\s*\(?\s*)?(\w+)\s*\)?", _unwrapped(conjunct))
        if option and _GPU_BUILD_MACRO.match(option.group(1)) and option.group(1) not in defined_here:
            return True
    return False


def _unwrapped(text: str) -> str:
    """``text`` without the brackets that enclose all of it (``((a && b))`` -> ``a && b``)."""
    text = text.strip()
    while text.startswith("(") and text.endswith(")"):
        depth = 0
        for index, char in enumerate(text):
            depth += {"(": 1, ")": -1}.get(char, 0)
            if depth == 0 and index < len(text) - 1:
                return text  # `(a) && (b)`: the first bracket closes before the end
        text = text[1:-1].strip()
    return text


def _open_branches(code_lines: list[str]) -> Iterator[tuple[int, str, list[tuple[int, str, str]]]]:
    """Each line outside a preprocessor directive, with the branches it sits in, outermost
    first: (the line of the branch's #if, its directive, its condition); an #elif or #else
    replaces its #if's branch."""
    stack: list[tuple[int, str, str]] = []
    for number, line in enumerate(code_lines, 1):
        match = _CONDITIONAL.match(line)
        if not match:
            yield number, line, stack
            continue
        directive, condition = match.group(1), match.group(2).strip()
        if directive in ("if", "ifdef", "ifndef"):
            stack.append((number, directive, condition))
        elif directive.startswith("el") and stack:
            stack[-1] = (stack[-1][0], directive, condition)
        elif directive == "endif" and stack:
            stack.pop()


def _gpu_build_guards(code_lines: list[str], defined_here: frozenset[str] | set[str] = frozenset()) -> dict[int, str]:
    """Line number -> the directive that compiles it only for a CUDA (or ROCm) build, for
    every line inside such a branch (nested branches included; #else and #ifndef are not)."""
    guards: dict[int, str] = {}
    read: dict[tuple[str, str], bool] = {}  # each branch's condition read once, not once per line

    def builds_for_gpu(directive: str, condition: str) -> bool:
        if (directive, condition) not in read:
            read[directive, condition] = (directive in ("if", "ifdef", "elif", "elifdef")
                                          and (_names_a_gpu_build(condition, defined_here)
                                               or _conjunct_names_a_gpu_build(condition, defined_here)))
        return read[directive, condition]

    for number, _, stack in _open_branches(code_lines):
        guard = next((f"#{directive} {condition}" for _, directive, condition in reversed(stack)
                      if builds_for_gpu(directive, condition)), None)
        if guard:
            guards[number] = guard
    return guards


def _false_without_nvidia_arch(directive: str, condition: str) -> bool:
    """An #if/#ifdef branch that a HIP build does not compile: it tests an NVIDIA
    architecture macro (``__CUDA_ARCH__``, ``__CUDA_ARCH_FEAT_SM90_ALL``) that HIP leaves
    undefined, so that an undefined macro makes it false (``>= 800``, ``defined(...)``), in
    an ``&&`` of conditions (an ``||`` or a negation could hold without it)."""
    if directive in ("ifdef", "elifdef"):
        return bool(_ARCH_MACRO.fullmatch(condition))
    if directive not in ("if", "elif") or "||" in condition:
        return False
    return any(_ARCH_TEST.fullmatch(part.strip()) for part in condition.split("&&"))


def _nvidia_arch_branches(code_lines: list[str]) -> dict[int, tuple[str, str]]:
    """Line number -> (the directive of the outermost NVIDIA-architecture branch it sits in, what
    a HIP build compiles in its place: "other" (another branch of that #if), "failure" (branches
    that only assert or trap, as DeepSpeed's ``#else assert(... false)``) or "nothing")."""
    if any(re.match(r"\s*#\s*define\s+__CUDA_ARCH", line) for line in code_lines):
        return {}  # the file sets the macro itself

    read: dict[tuple[str, str], str | None] = {}  # each branch's condition read once, not once per line

    def guard(directive: str, condition: str) -> str | None:
        if (directive, condition) not in read:
            # a condition continued on the next line (`\`) is not read: it may add an `||`
            read[directive, condition] = (f"#{directive} {condition}" if not condition.endswith("\\")
                                          and _false_without_nvidia_arch(directive, condition) else None)
        return read[directive, condition]

    inside: dict[int, tuple[str, int]] = {}  # line -> (directive, line of its #if)
    # line of an #if -> the lines of each of its branches that a HIP build may compile, by the branch's directive
    elsewhere: dict[int, dict[tuple[str, str], list[str]]] = {}
    for number, line, stack in _open_branches(code_lines):
        if stack:
            block, directive, condition = stack[-1]
            if guard(directive, condition) is None:
                elsewhere.setdefault(block, {}).setdefault((directive, condition), []).append(line)
        # the outermost: where it is false, HIP compiles none of what it holds
        outer = next(((block, found) for block, directive, condition in stack
                      if (found := guard(directive, condition))), None)
        if outer is not None:
            inside[number] = (outer[1], outer[0])

    def in_its_place(block: int) -> str:
        others = ["\n".join(lines) for lines in elsewhere.get(block, {}).values()]
        others = [text for text in others if text.strip()]  # an empty (or comment-only) #else compiles nothing
        if not others:
            return "nothing"
        return "failure" if all(not _FAILURE.sub("", text).strip(" \t\n{};") for text in others) else "other"
    places = {block: in_its_place(block) for block in {block for _, block in inside.values()}}
    return {number: (directive, places[block]) for number, (directive, block) in inside.items()}


def _not_hipified(code_lines: list[str], lines: list[str], path: str, patterns) -> list[Finding]:
    """One finding per line and kind (per file for a library); ``code_lines`` are the
    file's lines with comments blanked, so nothing inside a comment counts.  A line that only an
    NVIDIA architecture compiles is no build error for HIP: info where the #if has a branch
    HIP compiles instead, silent where nothing takes its place."""
    findings = []
    seen: set[str] = set()
    arch_branches = _nvidia_arch_branches(code_lines) if any("__CUDA_ARCH" in line for line in code_lines) else {}
    for number, line in enumerate(code_lines, 1):
        for pattern, what, once in patterns:
            match = pattern.search(line)
            if match and not (once and what in seen):
                seen.add(what)
                finding = _finding(NON_HIPIFIABLE_CODE, path, lines, number, match.start() + 1, match.end() + 1, what)
                # a kind reported once per file keeps its first use as it was (the later ones are not reported);
                # where HIP's branch only asserts, it fails on ROCm when it runs: still an error
                guard, in_its_place = (None, None) if once else arch_branches.get(number, (None, None))
                if in_its_place in ("other", "nothing"):
                    finding.severity_cap = "info" if in_its_place == "other" else "silent"
                    finding.cap_reason = (f"compiled only under {guard}, which a HIP build leaves false: "
                                          + ("it compiles the other branch" if in_its_place == "other" else
                                             "nothing takes its place there, so what it does is missing"))
                findings.append(finding)
    return findings


def _requirements(lines: list[str], path: str) -> list[Finding]:
    findings = []
    for number, line in enumerate(lines, 1):
        hit = classify_requirement(line)
        if hit:
            indent = len(line) - len(line.lstrip())
            findings.append(_finding(hit[0], path, lines, number, indent + 1,
                                     len(line.split("#", 1)[0].rstrip()) + 1,
                                     f"dependency {hit[1]}: use {hit[2]}"))
    return findings


def _pyproject(text: str, lines: list[str], path: str) -> list[Finding]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return []  # the file's own tools report that; a scan should not stop on it
    project = data.get("project", {}) if isinstance(data.get("project"), dict) else {}
    specifiers: list[str] = list(project.get("dependencies", []) or [])
    for group in (project.get("optional-dependencies") or {}).values():
        specifiers.extend(group or [])
    for group in (data.get("dependency-groups") or {}).values():
        specifiers.extend(s for s in group or [] if isinstance(s, str))
    findings = []
    for specifier in specifiers:
        if not isinstance(specifier, str):
            continue
        hit = classify_requirement(specifier)
        if not hit:
            continue
        # Point at the line that spells the specifier; TOML gives no positions.
        number = next((i for i, line in enumerate(lines, 1) if specifier in line), 1)
        column = lines[number - 1].find(specifier) + 1 if lines else 1
        findings.append(_finding(hit[0], path, lines, number, max(column, 1),
                                 max(column, 1) + len(specifier), f"dependency {hit[1]}: use {hit[2]}"))
    return findings
