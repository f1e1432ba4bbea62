"""Static analysis of one Python source: which rules it breaks and how to rewrite them.

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
from itertools import accumulate
from typing import Any

from torchport.scan.model import Edit, Finding, Fix, Related
from torchport.scan.packages import classify_import, classify_requirement

DEVICE_NAME = "ACCELERATOR_DEVICE"
_CUDA_DEVICE = re.compile(r"cuda(?::(\d+))?\Z")
_XLA_DEVICE = re.compile(r"xla(?::\d+)?\Z")
ANY_VERSION = "0"

# torch.cuda.X -> (rule, torch.<replacement>, min torch) for 1:1 renames.
CUDA_RENAMES: dict[str, tuple[str, str, str]] = {
    "synchronize": ("TP101", "accelerator.synchronize", "2.6"),
    "manual_seed": ("TP102", "manual_seed", ANY_VERSION),
    "manual_seed_all": ("TP102", "manual_seed", ANY_VERSION),
    "seed": ("TP102", "seed", ANY_VERSION),
    "seed_all": ("TP102", "seed", ANY_VERSION),
    "device_count": ("TP004", "accelerator.device_count", "2.6"),
    "current_device": ("TP004", "accelerator.current_device_index", "2.6"),
    "set_device": ("TP004", "accelerator.set_device_index", "2.6"),
    "device": ("TP004", "accelerator.device_index", "2.8"),
    "empty_cache": ("TP105", "accelerator.empty_cache", "2.9"),
    "mem_get_info": ("TP104", "accelerator.get_memory_info", "2.10"),
    **{name: ("TP104", f"accelerator.{name}", "2.9") for name in (
        "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
        "memory_stats", "reset_peak_memory_stats", "reset_accumulated_memory_stats")},
}
# torch.cuda.X -> rule, for the names without a safe rewrite.
CUDA_NAMES: dict[str, str] = {
    "is_available": "TP003", "device_of": "TP004",
    **dict.fromkeys(("get_device_name", "get_device_properties", "get_device_capability",
                     "get_arch_list", "is_bf16_supported", "is_tf32_supported"), "TP005"),
    **dict.fromkeys(("get_rng_state", "get_rng_state_all", "set_rng_state",
                     "set_rng_state_all", "initial_seed"), "TP103"),
    **dict.fromkeys(("memory_summary", "memory_snapshot", "memory_cached", "max_memory_cached",
                     "reset_max_memory_allocated", "reset_max_memory_cached",
                     "set_per_process_memory_fraction", "list_gpu_processes", "memory_usage",
                     "memory_stats_as_nested_dict", "caching_allocator_alloc",
                     "caching_allocator_delete", "device_memory_used"), "TP104"),
    "Event": "TP106",
    **dict.fromkeys(("Stream", "stream", "current_stream", "default_stream", "set_stream",
                     "StreamContext", "ExternalStream", "streams"), "TP107"),
    **dict.fromkeys(("CUDAGraph", "graph", "graphs", "make_graphed_callables",
                     "graph_pool_handle"), "TP108"),
    **dict.fromkeys(("nvtx", "set_sync_debug_mode", "get_sync_debug_mode", "profiler",
                     "cudart"), "TP109"),
    "nccl": "TP401",
}
_AMP_NAMES = {"autocast": "TP201", "GradScaler": "TP202", "custom_fwd": "TP203",
              "custom_bwd": "TP203"}
_FLOAT64 = {"torch.float64", "torch.double", "torch.complex128", "torch.cdouble",
            "torch.DoubleTensor"}
_SDP = re.compile(r"(sdp_kernel|enable_\w+_sdp|\w+_sdp_enabled|SDPBackend)\Z")
_AUTOCAST = {"torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast"}
_GRAD_SCALER = {"torch.amp.GradScaler", "torch.GradScaler", "torch.amp.grad_scaler.GradScaler"}
_PROCESS_GROUP = {"torch.distributed.init_process_group", "torch.distributed.new_group",
                  "torch.distributed.distributed_c10d.init_process_group",
                  "torch.distributed.distributed_c10d.new_group",
                  "torch.distributed.new_subgroups"}
_CPP_LOAD = {"torch.utils.cpp_extension.load", "torch.utils.cpp_extension.load_inline"}
_SETUP = {"setuptools.setup", "distutils.core.setup", "setup"}


# Modules whose attributes carry the rules; naming the module alone is not a finding.
_NAMESPACES = {"torch.cuda.amp", "torch.cuda.memory", "torch.cuda.random", "torch.backends.cuda.matmul"}


def reference_rule(qualname: str) -> str | None:
    """The rule for a use of this fully qualified name, or None if it is portable."""
    if qualname in _NAMESPACES:
        return None
    if qualname.startswith("torch.cuda."):
        parts = qualname.split(".")[2:]
        if parts[0] == "memory" and len(parts) > 1:
            parts = parts[1:]
        if parts[0] == "amp":
            return _AMP_NAMES.get(parts[-1], "TP201") if len(parts) > 1 else "TP201"
        name = parts[0]
        if name in CUDA_RENAMES:
            return CUDA_RENAMES[name][0]
        if name in CUDA_NAMES:
            return CUDA_NAMES[name]
        if name.endswith(("Tensor", "Storage")):
            return "TP006"
        return "TP110"
    if qualname.startswith("torch.backends.cudnn."):
        return "TP302" if qualname.endswith("allow_tf32") else "TP301"
    if qualname.startswith("torch.backends.cuda."):
        if qualname.startswith("torch.backends.cuda.matmul."):
            return "TP302"
        return "TP303" if _SDP.search(qualname) else "TP110"
    if qualname in _FLOAT64:
        return "TP701"
    if qualname == "torch.version.cuda":
        return "TP003"
    if qualname in ("torch.distributed.Backend.NCCL", "torch.distributed.distributed_c10d.Backend.NCCL"):
        return "TP401"
    if qualname in ("torch.utils.cpp_extension.CUDAExtension", "torch.utils.cpp_extension.CUDA_HOME"):
        return "TP501"
    if qualname in ("torch_xla.core.xla_model.xla_device", "torch_xla.core.xla_model.mark_step"):
        return "TP801"
    return None


# --------------------------------------------------------------------------------------
# Fast path: parse only what can matter.

# Words without which no rule can fire.  Third-party packages matter only where
# they are imported (_PACKAGE_IMPORT).  Names imported under another spelling
# (``from torch.cuda import synchronize as sync``) are added per file.
TRIGGERS = ("cuda", "CUDA_", "CUDAExtension", "cudnn", "nccl", "NCCL", "float64", ".double",
            "DoubleTensor", "cdouble", "complex128", "pin_memory", "non_blocking", "xla",
            "nvidia-smi", "init_process_group", "new_group", "new_subgroups", "autocast",  # torchport: ignore
            "GradScaler", "install_requires", "extras_require", "cpp_extension")
_PACKAGES = (r"(?:triton|apex|flash_attn|flash_attn_interface|xformers|bitsandbytes|cupy|cupyx|"
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
_FILE_TRIGGERS = tuple(w for w in TRIGGERS if w not in (
    "CUDA_", "CUDAExtension", "init_process_group", "new_group", "new_subgroups", "autocast",
    "install_requires", "extras_require")) + ("CUDA",)


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


def _keep_block(source: _Source, keep: bytearray, start: int, end: int, indent: int, line: int) -> None:
    """Keep the statement [start, end) that holds ``line``.  A long class or function
    keeps only its header and, recursively, the inner statement holding the line."""
    header = start
    while header < end and source.lines[header][indent:indent + 1] == "@":
        header += 1
    head = source.lines[header][indent:] if header < end else ""
    if (end - start <= _SPLIT_LINES or line <= header
            or not head.startswith(("class ", "def ", "async def ")) or not head.rstrip().endswith(":")):
        keep[start:end] = b"\x01" * (end - start)
        return
    keep[start:header + 1] = b"\x01" * (header + 1 - start)
    inner_start, inner_end = _statement_around(source, header + 1, end, indent + 4, line)
    _keep_block(source, keep, inner_start, inner_end, indent + 4, line)


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
    while start > first and lines[start - 1][indent:indent + 1] == "@" and starts_statement(start - 1):
        start -= 1
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
    for alias, qualname in _import_aliases(statements).items():
        if qualname.startswith(_INTERESTING_PREFIXES) and not any(word in alias for word in TRIGGERS):
            names.append(alias)
    return names


def _statements(body):
    """Every statement, nested ones included, without descending into expressions."""
    for statement in body:
        yield statement
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            inner = getattr(statement, name, None)
            if inner:
                yield from _statements(inner)


def _import_aliases(statements) -> dict[str, str]:
    aliases: dict[str, str] = {}
    for node in _statements(statements):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    top = alias.name.split(".", 1)[0]
                    aliases[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if alias.name != "*":
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


# --------------------------------------------------------------------------------------
# The analysis proper.

def analyze(tree: ast.Module, text: str, path: str) -> list[Finding]:
    analyzer = _Analyzer(tree, text, path)
    analyzer.visit(tree)
    return _one_per_token(analyzer.findings)


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


def _start(node) -> tuple[int, int]:
    return (node.lineno, node.col_offset)


def _end(node) -> tuple[int, int]:
    line, column = node.end_lineno, node.end_col_offset
    assert line is not None and column is not None, "ast.parse sets every node's end"
    return (line, column)


def _replace(node, text: str) -> Edit:
    return Edit(_start(node), _end(node), text)


def _insert(position: tuple[int, int], text: str) -> Edit:
    return Edit(position, position, text)


def _closing_paren(call: ast.Call) -> tuple[int, int]:
    line, column = _end(call)
    return (line, column - 1)


def _string(node) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _argument(call: ast.Call, position: int | None, keyword: str):
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    if position is not None and len(call.args) > position and not any(
            isinstance(a, ast.Starred) for a in call.args[:position + 1]):
        return call.args[position]
    return None


def _plain_call(call: ast.Call) -> bool:
    """No *args / **kwargs, so arguments can be moved around safely."""
    return not any(isinstance(a, ast.Starred) for a in call.args) and all(
        kw.arg is not None for kw in call.keywords)


def _parameter_defaults(arguments: ast.arguments):
    """(parameter, default) pairs of a function signature."""
    positional = arguments.posonlyargs + arguments.args
    pairs = list(zip(positional[len(positional) - len(arguments.defaults):], arguments.defaults))
    pairs += [(a, d) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults) if d is not None]
    return pairs


def _attribute_token(node: ast.Attribute) -> tuple[int, int, int, int]:
    """Position of the attribute name itself (``cuda`` in ``model.cuda``), which is
    where a reader looks and where a suppression comment goes."""
    line, column = _end(node)
    return (line, column - len(node.attr), line, column)


def _method_token(call: ast.Call) -> tuple[int, int, int, int]:
    """From the method name to the end of the call when that is on the same line."""
    assert isinstance(call.func, ast.Attribute), "a method call"
    line, column, _, end = _attribute_token(call.func)
    if _end(call)[0] == line:
        end = _end(call)[1]
    return (line, column, line, end)


# Markers of code that handles accelerators other than CUDA: a CUDA check in an
# if/elif chain that also has such a branch is dispatch code, not lock-in.
_OTHER_ACCELERATOR_WORDS = {"mps", "xpu", "xla", "tpu", "npu", "hpu", "mlu", "musa", "neuron",
                            "accelerator", "get_device_module", "torch_xla", "torch_tpu",
                            "xla_model", "current_accelerator"}
_OTHER_ACCELERATOR_CHECK = re.compile(r"is_\w*(?:mps|xpu|xla|tpu|npu|hpu|mlu|musa|neuron)\w*_available")
# Calls whose arguments are messages for people: comparisons and device strings
# inside them are text, not code paths.
_MESSAGE_FUNCTIONS = {"print", "warn", "warning", "info", "debug", "error", "exception", "critical",
                      "log", "fatal", "write", "echo", "secho", "rank_zero_warn", "rank_zero_info",
                      "rank_zero_debug", "rank_print"}
_HOST_METHODS = {"cpu", "numpy", "tolist", "item"}
# Positive CUDA checks: the guarded code runs only where CUDA is present.
_CUDA_QUERIES = {"torch.cuda.is_available", "torch.cuda.is_initialized", "torch.cuda.device_count",
                 "torch.cuda.is_bf16_supported", "torch.cuda.is_tf32_supported",
                 "torch.cuda.get_device_capability", "torch.cuda.get_device_name",
                 "torch.cuda.get_device_properties"}
_BUILT_FORMAT = re.compile(r"cuda:\{\d*\}\Z")
_BUILT_PERCENT = re.compile(r"cuda:%[dis]\Z")
_GUARDED = "inside a CUDA check: runs only where CUDA is present"
_XLA_GUARDED = "inside a torch_xla check: runs only where torch_xla is installed"
_TYPE_CHECKING = "inside `if TYPE_CHECKING:`: read by type checkers, never run"
_LISTS_OTHERS = "the check lists other accelerators too"
_XLA_RULES = ("TP801", "TP802")
_AMP_RULES = ("TP201", "TP202", "TP203")
_TORCH_VERSION_FLAG = re.compile(r"TORCH\w*(?:GREATER|LESS|_GE_|_LT_|VERSION)|is_torch_version", re.I)
_OLD_TORCH = "a fallback for older torch releases"
_CUDA_CHECK_FUNCTION = re.compile(r"_?is_(?:torch_)?cuda_available\Z")
_OTHER_DEVICE_STRING = re.compile(r"(?:mps|xpu|xla|tpu|npu|hpu|mlu|musa|neuron|meta|cpu)(?::\d+)?\Z")
# Tensor factories: with a dtype but no device= they create the tensor on the host.
_FACTORIES = {f"torch.{name}" for name in (
    "zeros", "ones", "empty", "full", "arange", "linspace", "logspace", "eye", "tensor", "as_tensor",
    "rand", "randn", "randint", "randperm", "zeros_like", "ones_like", "empty_like", "full_like",
    "from_numpy")}
_DISPATCH = "the check has a branch for other accelerators"
_STATE_DICT = re.compile(r"state_dict|checkpoint|ckpt", re.I)


_CUDA_ENUM_MEMBERS = {"CUDA", "GPU", "MULTI_GPU"}


def _cuda_enum_member(node) -> bool:
    """``RNGType.CUDA``, ``DistributedType.MULTI_GPU``: an enum member (a capitalised
    class's attribute) that names CUDA; a branch on it runs only in CUDA runs."""
    return (isinstance(node, ast.Attribute) and node.attr in _CUDA_ENUM_MEMBERS
            and isinstance(node.value, (ast.Name, ast.Attribute))
            and (node.value.id if isinstance(node.value, ast.Name) else node.value.attr)[:1].isupper())


def _device_subject(test, other: bool = False) -> str | None:
    """For ``x.type == "cuda"`` (or, with ``other``, ``x.type == "cpu"``/``"mps"``...),
    the compared expression ``x.type`` as a comparable dump; None for other tests."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.Is))):
        return None
    pattern = _OTHER_DEVICE_STRING if other else _CUDA_DEVICE
    for side, subject in ((test.left, test.comparators[0]), (test.comparators[0], test.left)):
        value = _string(side)
        if value is not None and pattern.match(value) and _string(subject) is None:
            return ast.dump(subject)
    return None


def _keyword(call: ast.Call, name: str):
    return next((kw.value for kw in call.keywords if kw.arg == name), None)


class _Analyzer(ast.NodeVisitor):
    def __init__(self, tree: ast.Module, text: str, path: str):
        self.path = path
        self.lines = text.splitlines()
        self.findings: list[Finding] = []
        self.claimed: set[int] = set()  # ids of nodes already reported
        self.by_node: dict[int, Finding] = {}  # id(node) -> its finding
        self.aliases = _import_aliases(tree.body)
        # scope (id of the module, class or function node) -> name -> assigned values;
        # None stands for a binding whose value is unknown (a parameter, a loop variable).
        self.bindings: dict[int, dict[str, list]] = {}
        self.parents: dict[int, ast.stmt] = {}  # id(Expr call) -> its statement, for seeding
        self.blocks: dict[int, list] = {}  # id(statement) -> the statement list holding it
        self.own_is_cuda = False  # the file defines an attribute or function called is_cuda
        self.module_scope = id(tree)
        self._collect(tree.body, id(tree))
        self.scopes: list[int] = [id(tree)]
        self.host: set[int] = set()  # nodes inside an explicitly host-side (CPU) expression
        # scope -> loop variables over a state dict's items (checkpoint conversion, on the host)
        self.host_names: dict[int, set[str]] = {}
        self.moved: set[int] = set()  # factory calls whose result is moved to a device
        self.in_message = 0
        self.chain_portable: dict[int, bool] = {}
        self.torch = next((name for name, q in self.aliases.items() if q == "torch"), None)
        self.T = self.torch or "torch"

    # -- traversal: ast.NodeVisitor's, with the visit_ method looked up once per node
    # class (visiting is about a third of the time spent on a file that is analysed).

    _visitors: dict[type, Any] = {}  # node class -> the unbound visit_ method

    def visit(self, node):
        visitor: Any = self._visitors.get(node.__class__)
        if visitor is None:
            visitor = getattr(_Analyzer, "visit_" + node.__class__.__name__, _Analyzer.generic_visit)
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
        for node in ast.walk(target):
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
                for argument, default in _parameter_defaults(arguments):
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
            strings = {_string(v) for v in values}
            return values[0] if len(strings) == 1 and None not in strings else None
        return None

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
        value = _string(node)
        if value is None:
            value = _string(self.resolve(node))
        return value

    # -- reporting ---------------------------------------------------------------------------

    def _column(self, line: int, byte_column: int) -> int:
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        if text.isascii():
            return byte_column + 1
        return len(text.encode("utf-8")[:byte_column].decode("utf-8", "replace")) + 1

    def report(self, rule_id: str, node, detail: str, edits=None, min_torch: str = ANY_VERSION,
               uses_device: bool = False, at: tuple[int, int, int, int] | None = None) -> Finding:
        """Record a finding at ``node`` (or at the token ``at`` = (line, byte column,
        end line, end byte column), e.g. the ``cuda`` of ``.cuda()``)."""
        self.claimed.add(id(node))
        fix = None
        if edits is not None:
            uses_torch = self.torch is None and any("torch." in e.text for e in edits)
            fix = Fix(tuple(edits), min_torch, uses_device, uses_torch)
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

    def device(self, index: str | None = None, as_string: bool = False) -> str:
        if as_string:
            return f"{DEVICE_NAME}.type"
        if index is None:
            return DEVICE_NAME
        return f"{self.T}.device({DEVICE_NAME}.type, {index})"

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

    def _device_literal(self, node, as_string: bool, what: str) -> bool:
        """Report a "cuda"/"cuda:N"/"xla" literal, or a "cuda:" string built at run time,
        used as a device; True if reported."""
        if node is None or id(node) in self.claimed:
            return False
        if self._built_device_string(node):
            return True
        value = _string(node)
        if value is None:
            return False
        match = _CUDA_DEVICE.match(value)
        if match:
            index = match.group(1)
            if as_string and index is not None:
                self.report("TP001", node, f'"{value}" {what}')
            else:
                self.report("TP001", node, f'"{value}" {what}',
                            [_replace(node, self.device(index, as_string))], "2.6", uses_device=True)
            return True
        if _XLA_DEVICE.match(value):
            self.report("TP802", node, f'"{value}" {what}')
            return True
        return False

    def _built_device_string(self, node) -> bool:
        """f"cuda:{rank}", "cuda:{}".format(i), "cuda:" + str(k), "cuda:%d" % k: reported
        at the expression; the fix replaces only "cuda" so the result stays a string of
        the same shape for whichever accelerator is present."""
        if id(node) in self.claimed or self.in_message:
            return False
        edit = None
        if isinstance(node, ast.JoinedStr):
            if not (len(node.values) == 2 and _string(node.values[0]) == "cuda:"
                    and isinstance(node.values[1], ast.FormattedValue)):
                return False
            line = self.lines[node.lineno - 1] if node.lineno <= len(self.lines) else ""
            start = len(line.encode("utf-8")[:node.col_offset].decode("utf-8", "replace"))
            prefix = line[start:start + 8]
            offset = prefix.find("cuda:")
            if 0 < offset <= 3 and "{" not in prefix[:offset]:
                column = node.col_offset + offset
                edit = Edit((node.lineno, column), (node.lineno, column + 4), f"{{{DEVICE_NAME}.type}}")
            shape = 'f"cuda:{...}"'
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and _string(node.left) == "cuda:":
            edit = _replace(node.left, f'{DEVICE_NAME}.type + ":"')
            shape = '"cuda:" + ...'
        elif (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod)
              and _BUILT_PERCENT.match(text := _string(node.left) or "")):
            edit = _replace(node.left, f'({DEVICE_NAME}.type + "{text[4:]}")')
            shape = f'"{text}" % ...'
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
              and _BUILT_FORMAT.match(text := _string(node.func.value) or "")):
            literal = node.func.value
            edit = _replace(literal, f'({DEVICE_NAME}.type + "{text[4:]}")')
            shape = f'"{text}".format(...)'
        else:
            return False
        self.report("TP001", node, f"device string built at run time: {shape}",
                    [edit] if edit else None, "2.6", uses_device=True)
        self.claimed.update(map(id, ast.walk(node)))
        return True

    def _device_use(self, node, what: str) -> None:
        """A plain name used as a device: report at its definition (where the user
        changes it), with this use as a second location."""
        definition = self.resolve(node)
        if definition is None:
            return
        finding = self.by_node.get(id(definition))
        if finding is None and self._device_literal(definition, as_string=True, what="assigned to a name"):
            finding = self.by_node.get(id(definition))
        if finding is not None and finding.rule_id == "TP001":
            self._relate(finding, node, f"{node.id} used {what}")

    def _backend_default(self, node, where: str) -> None:
        """A "nccl" default for something named *backend*: reported where it is set."""
        value = _string(node)
        if value and id(node) not in self.claimed and "nccl" in re.split(r"[:,]", value):  # torchport: ignore
            self.report("TP401", node, f'"{value}" as {where}')

    def _named_default(self, name: str, default, where: str) -> None:
        if default is None:
            return
        lowered = name.lower()
        if "device" in lowered:
            self._device_literal(default, as_string=True, what=where)
        elif "backend" in lowered:
            self._backend_default(default, where)

    # -- visitors ---------------------------------------------------------------------------

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.startswith("torch.cuda.") or alias.name.startswith("torch.backends.cud"):
                rule_id = reference_rule(alias.name)
                if rule_id:
                    self.report(rule_id, node, f"import {alias.name}")
                continue
            self._imported(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module and not node.level:
            modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for module in modules:
                if self._imported(node, module):
                    break

    def _imported(self, node, module: str) -> bool:
        top = module.split(".", 1)[0]
        if top == "triton":
            self.report("TP503", node, f"import {module}")
        elif top == "torch_xla":
            self.report("TP802", node, f"import {module}")
        else:
            package = classify_import(module)
            if not package:
                return False
            self.report("TP601", node, f"import {module}: use {package[1]}")
        return True

    def visit_Attribute(self, node: ast.Attribute) -> None:
        qualname = self.qualname(node)
        rule_id = reference_rule(qualname) if qualname else None
        if rule_id:
            if id(node) not in self.claimed and not (rule_id == "TP701" and id(node) in self.host):
                self.report(rule_id, node, qualname or "")
            return
        if (node.attr == "is_cuda" and id(node) not in self.claimed and isinstance(node.ctx, ast.Load)
                and not self.own_is_cuda
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
            self.report("TP003", node, ".is_cuda", at=_attribute_token(node))
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        qualname = self.qualname(node)
        if qualname and isinstance(node.ctx, ast.Load) and id(node) not in self.claimed:
            rule_id = reference_rule(qualname)
            if rule_id and not (rule_id == "TP701" and id(node) in self.host):
                self.report(rule_id, node, f"{node.id} ({qualname})" if node.id != qualname else qualname)

    def visit_Constant(self, node: ast.Constant) -> None:
        if id(node) in self.claimed or not isinstance(node.value, str):
            return
        value = node.value
        if value == "CUDA_VISIBLE_DEVICES" or value.startswith("CUDA_VISIBLE_DEVICES="):  # torchport: ignore
            self.report("TP404", node, '"CUDA_VISIBLE_DEVICES"')
        elif value.startswith("nvidia-smi"):  # torchport: ignore
            self.report("TP109", node, '"nvidia-smi"')

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        if not self._built_device_string(node):
            self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if not self._built_device_string(node):
            self.generic_visit(node)

    def visit_Expr(self, node: ast.Expr) -> None:
        if not isinstance(node.value, ast.Constant):  # docstrings are prose
            self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        if self.in_message:  # a comparison printed in a message is text
            self.generic_visit(node)
            return
        for operand in [node.left, *node.comparators]:
            elements = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
            # `dtype == torch.float64` reads a dtype; it creates no tensor.
            self.host.update(id(e) for e in elements if isinstance(e, (ast.Attribute, ast.Name)))
            lists_others = len(elements) > 1 and any(
                _OTHER_DEVICE_STRING.match(_string(e) or "") for e in elements)
            strings = [_string(e) for e in elements]
            if len(elements) > 1 and any(v is not None and not _CUDA_DEVICE.match(v)
                                         and not _OTHER_DEVICE_STRING.match(v) and v not in ("gpu", "auto")
                                         for v in strings):
                continue  # {"contiguous", "cuda", "half"}: method names, not devices
            for element in elements:
                value = _string(element)
                if value is None or id(element) in self.claimed:
                    continue
                if _CUDA_DEVICE.match(value):
                    finding = self.report("TP003", element, f'comparison with "{value}"')
                    if lists_others:
                        self._cap([finding], _LISTS_OTHERS)
                elif "nccl" in value.split(":")[-1].split(","):  # torchport: ignore
                    # Reading the backend only chooses a branch; the branch runs only under NCCL.
                    finding = self.report("TP401", element, f'comparison with "{value}"')
                    self._cap([finding], "a comparison only chooses a branch; nothing selects NCCL here")
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        self._assigned(node.targets, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._assigned([node.target], node.value)
        self.generic_visit(node)

    def _assigned(self, targets, value) -> None:
        if len(targets) != 1 or not isinstance(targets[0], (ast.Name, ast.Attribute)):
            return
        target = targets[0]
        name = target.id if isinstance(target, ast.Name) else target.attr
        # A dataclass field: `device: str = field(default="cuda")`.
        if isinstance(value, ast.Call) and (self.qualname(value.func) or getattr(value.func, "id", "")) in (
                "dataclasses.field", "field"):
            self._named_default(name, _keyword(value, "default"), f"default of field {name}")
            return
        self._device_literal(value, as_string=True, what="assigned to a name")
        if "backend" in name.lower():
            self._backend_default(value, f"value of {name}")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.scopes.append(id(node))
        if any(str(getattr(b, "id", None) or getattr(b, "attr", "")).endswith("Enum") for b in node.bases):
            # `class RNGType(Enum): CUDA = "cuda"` names a kind; it chooses no device.
            for statement in node.body:
                if isinstance(statement, ast.Assign):
                    self.claimed.add(id(statement.value))
        self.generic_visit(node)
        self.scopes.pop()

    def visit_FunctionDef(self, node) -> None:
        for decorator in node.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            qualname = self.qualname(target)
            if qualname and qualname.split(".")[0] == "triton":
                self.report("TP503", decorator, f"@{qualname} kernel {node.name}")
                self.claimed.add(id(target))
        for argument, default in _parameter_defaults(node.args):
            self._named_default(argument.arg, default, f"default of {argument.arg}")
        for decorator in node.decorator_list:
            self.visit(decorator)
        self.visit(node.args)  # defaults and annotations belong to the enclosing scope
        if node.returns is not None:
            self.visit(node.returns)
        self.scopes.append(id(node))
        cuda_only = False  # after `if device.type != "cuda": return`
        xla_only = False  # after `if not _XLA_AVAILABLE: return`
        for statement in node.body:
            start = len(self.findings)
            self.visit(statement)
            if cuda_only:
                self._cap(self.findings[start:], _GUARDED)
            elif xla_only:
                self._cap([f for f in self.findings[start:] if f.rule_id in _XLA_RULES], _XLA_GUARDED)
            if isinstance(statement, ast.If) and self._exits(statement):
                cuda_only = cuda_only or self._exits_unless_cuda(statement)
                xla_only = xla_only or (isinstance(statement.test, ast.UnaryOp) and isinstance(
                    statement.test.op, ast.Not) and self.positive_xla_query(statement.test.operand))
        self.scopes.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    @staticmethod
    def _imports_checked_package(finding: Finding, test) -> bool:
        """``if is_bnb_available(): import bitsandbytes`` or
        ``if _is_package_available("transformer_engine"): from transformer_engine ...``."""
        if finding.rule_id != "TP601" or not finding.detail.startswith("import "):
            return False
        package = finding.detail.split()[1].split(".")[0].rstrip(":")
        words = set()
        for node in ast.walk(test):
            if isinstance(node, ast.Name):
                words.add(node.id)
            elif isinstance(node, ast.Attribute):
                words.add(node.attr)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                words.add(node.value.replace("-", "_"))
        short = {"bitsandbytes": "bnb", "transformer_engine": "te"}.get(package, package)
        return any(package in word or re.search(rf"(?:^|_){short}(?:_|$)", word) for word in words)

    @staticmethod
    def _exits(statement: ast.If) -> bool:
        return not statement.orelse and bool(statement.body) and isinstance(
            statement.body[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break))

    def _exits_unless_cuda(self, statement: ast.If) -> bool:
        """``if device.type != "cuda": return`` (or ``if not torch.cuda.is_available(): raise``)."""
        tests = statement.test.values if (isinstance(statement.test, ast.BoolOp)
                                          and isinstance(statement.test.op, ast.Or)) else [statement.test]
        for test in tests:
            if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and self.positive_cuda_query(test.operand):
                return True
            if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.NotEq, ast.NotIn))
                    and any(_CUDA_DEVICE.match(_string(side) or "") for side in (test.left, test.comparators[0]))):
                return True
        return False

    # -- guards ------------------------------------------------------------------------------

    def positive_cuda_query(self, test) -> bool:
        """True when ``test`` holds only where CUDA is present (so what it guards
        never runs on another accelerator)."""
        if isinstance(test, ast.BoolOp):
            return isinstance(test.op, ast.And) and any(map(self.positive_cuda_query, test.values))
        if isinstance(test, ast.Call):
            func = test.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            return self.qualname(func) in _CUDA_QUERIES or bool(_CUDA_CHECK_FUNCTION.match(name))
        if isinstance(test, ast.Attribute):
            return test.attr == "is_cuda" or self.qualname(test) == "torch.version.cuda"
        if isinstance(test, ast.Name):  # use_cuda = torch.cuda.is_available()
            value = self.resolve(test)
            return value is not None and not isinstance(value, ast.Name) and self.positive_cuda_query(value)
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            op, right = test.ops[0], test.comparators[0]
            if isinstance(op, (ast.Eq, ast.Is)) and any(map(_cuda_enum_member, (test.left, right))):
                return True  # rng_type == RNGType.CUDA, state.distributed_type == DistributedType.MULTI_GPU
            if (isinstance(op, ast.In) and isinstance(right, (ast.Tuple, ast.List, ast.Set)) and right.elts
                    and all(map(_cuda_enum_member, right.elts))):
                return True  # distributed_type in [DistributedType.MULTI_GPU]
            if isinstance(op, (ast.Gt, ast.GtE, ast.IsNot, ast.NotEq)) and self.positive_cuda_query(test.left):
                return True
            if isinstance(op, (ast.Eq, ast.In)):
                for side in (test.left, right):
                    for element in (side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]):
                        value = _string(element)
                        if value and (_CUDA_DEVICE.match(value) or value == "nccl"):  # torchport: ignore
                            return True
        return False

    def positive_xla_query(self, test) -> bool:
        """``is_torch_xla_available()``, ``_XLA_AVAILABLE``, ``x == DistributedType.XLA``:
        true only where torch_xla is installed."""
        if isinstance(test, ast.BoolOp):
            return isinstance(test.op, ast.And) and any(map(self.positive_xla_query, test.values))
        if isinstance(test, ast.Call):
            test = test.func
        if isinstance(test, (ast.Name, ast.Attribute)):
            name = test.id if isinstance(test, ast.Name) else test.attr
            return "xla" in name.lower() or "tpu" in name.lower()
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.Is, ast.In)):
            return any(self.positive_xla_query(side) or (_string(side) or "").split(":")[0] in ("xla", "tpu")
                       for side in (test.left, test.comparators[0]))
        return False

    @staticmethod
    def _type_checking(test) -> bool:
        return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")

    def _mentions_other_accelerator(self, nodes) -> bool:
        for root in nodes:
            for node in ast.walk(root):
                if isinstance(node, ast.Name):
                    word = node.id
                elif isinstance(node, ast.Attribute):
                    word = node.attr
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    word = node.value.split(":")[0]
                else:
                    continue
                if word in _OTHER_ACCELERATOR_WORDS or _OTHER_ACCELERATOR_CHECK.fullmatch(word):
                    return True
        return False

    def _chain_has_other_branch(self, node: ast.If) -> bool:
        """Whether the if/elif/else chain starting at ``node`` has a branch (other than
        the CUDA ones) for another accelerator.  Stored for every elif of the chain."""
        if id(node) in self.chain_portable:
            return self.chain_portable[id(node)]
        chain, others, current = [], [], node
        while True:
            chain.append(current)
            if not self.positive_cuda_query(current.test):
                others += [current.test, *current.body]
            if len(current.orelse) == 1 and isinstance(current.orelse[0], ast.If):
                current = current.orelse[0]
                continue
            others += current.orelse
            break
        # Consecutive `if device_type == 'cuda': ... if device_type == 'npu': ...`
        # statements dispatch just like an elif chain.
        siblings = [sibling.test for sibling in self.blocks.get(id(node), ())
                    if isinstance(sibling, ast.If) and sibling is not node
                    and not self.positive_cuda_query(sibling.test)]
        # `if devices[0].type == "cpu": ... if devices[0].type == "cuda": ...`: the code
        # tells device types apart (the user's choice), it does not assume CUDA.
        subject = _device_subject(node.test)
        portable = self._mentions_other_accelerator(others) or any(
            self._mentions_other_accelerator([test]) and self._compares_or_checks(test) for test in siblings) or (
            subject is not None and any(_device_subject(test, other=True) == subject
                                        for test in [*siblings, *(member.test for member in chain[1:])]))
        for member in chain:
            self.chain_portable[id(member)] = portable
        return portable

    @staticmethod
    def _compares_or_checks(test) -> bool:
        return isinstance(test, (ast.Compare, ast.Call, ast.BoolOp))

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        if self._type_checking(test) or self.positive_xla_query(test):
            start = len(self.findings)
            self.visit(test)
            body_start = len(self.findings)
            for statement in node.body:
                self.visit(statement)
            body = self.findings[body_start:]
            if self._type_checking(test):
                self._cap(body, _TYPE_CHECKING)
            else:
                self._cap([f for f in body if f.rule_id in _XLA_RULES], _XLA_GUARDED)
            for statement in node.orelse:
                self.visit(statement)
            return
        positive = self.positive_cuda_query(test)
        convertible = (isinstance(test, ast.Call) and not test.args and not test.keywords
                       and self.qualname(test.func) == "torch.cuda.is_available")
        start = len(self.findings)
        if not convertible:
            self.visit(test)
        test_findings = self.findings[start:]
        body_start = len(self.findings)
        for statement in node.body:
            self.visit(statement)
        body = self.findings[body_start:]
        if convertible:
            assert isinstance(test, ast.Call)
            if body and all(f.fix is not None for f in body):
                need = max((f.fix.min_torch for f in body if f.fix is not None), key=_version_key)
                need = max(need, "2.6", key=_version_key)
                guard = self.report("TP003", test, "if torch.cuda.is_available():",
                                    [_replace(test.func, f"{self.T}.accelerator.is_available")], need)
            else:
                guard = self.report("TP003", test, "torch.cuda.is_available()")
            self.claimed.add(id(test.func))
            test_findings = [guard]
        if positive:
            self._cap(body, _GUARDED)
            if self._chain_has_other_branch(node):
                self._cap(test_findings, _DISPATCH)
            elif not node.orelse and all(isinstance(s, (ast.Assert, ast.Pass)) for s in node.body):
                # `if torch.cuda.is_available(): assert ...` in a test: skipping it elsewhere
                # skips a check of CUDA state, and nothing else.
                self._cap(test_findings, "the check guards only assertions about CUDA state")
        self._cap([f for f in body if self._imports_checked_package(f, test)],
                  "the import is guarded by a check that the package is installed")
        else_start = len(self.findings)
        for statement in node.orelse:
            self.visit(statement)
        if self._version_fallback(test):
            self._cap([f for f in self.findings[else_start:] if f.rule_id in _AMP_RULES], _OLD_TORCH)

    def visit_IfExp(self, node: ast.IfExp) -> None:
        if id(node) in self.claimed:
            return
        if self._device_choice(node, node):
            return
        if not self.positive_cuda_query(node.test):
            if self._keeps_float64(node):
                self.host.update(map(id, ast.walk(node.body)))
            self.visit(node.test)
            self.visit(node.body)
            start = len(self.findings)
            self.visit(node.orelse)
            if self._version_fallback(node.test):
                self._cap([f for f in self.findings[start:] if f.rule_id in _AMP_RULES], _OLD_TORCH)
            return
        start = len(self.findings)
        self.visit(node.test)
        test_findings = self.findings[start:]
        body_start = len(self.findings)
        self.visit(node.body)
        self._cap(self.findings[body_start:], _GUARDED)
        if self._mentions_other_accelerator([node.orelse]):
            self._cap(test_findings, _DISPATCH)
        self.visit(node.orelse)

    def _keeps_float64(self, node: ast.IfExp) -> bool:
        """``torch.float64 if x.dtype == torch.float64 else torch.float32``: float64 only
        where the caller already uses it; this line introduces none."""
        test, float64 = node.test, ("torch.float64", "torch.double")
        return (self.qualname(node.body) in float64 and isinstance(test, ast.Compare)
                and isinstance(test.ops[0], (ast.Eq, ast.Is))
                and any(self.qualname(side) in float64 for side in (test.left, *test.comparators)))

    def visit_Try(self, node: ast.Try) -> None:
        """``try: import apex ... except ImportError:``: an optional dependency with a
        fallback; the import fails harmlessly where the package is missing."""
        optional = any(self._catches_import_error(h.type) for h in node.handlers)
        start = len(self.findings)
        for statement in node.body:
            self.visit(statement)
        if optional:
            self._cap([f for f in self.findings[start:] if f.detail.startswith("import ")],
                      "an optional import with an ImportError fallback")
        for handler in node.handlers:
            start = len(self.findings)
            self.visit(handler)
            if self._catches_missing_api(handler.type):
                self._cap([f for f in self.findings[start:] if f.rule_id in _AMP_RULES
                           or f.detail.startswith("comparison with")],
                          "a fallback for older torch releases (inside `except AttributeError/TypeError`)")
        for part in (*node.orelse, *node.finalbody):
            self.visit(part)

    visit_TryStar = visit_Try  # type: ignore[assignment]  # except* has the same fields as except

    @staticmethod
    def _catches_missing_api(handler_type) -> bool:
        names = handler_type.elts if isinstance(handler_type, ast.Tuple) else [handler_type]
        return any(getattr(n, "id", "") in ("AttributeError", "TypeError") for n in names if n is not None)

    @staticmethod
    def _catches_import_error(handler_type) -> bool:
        if handler_type is None:
            return True
        names = handler_type.elts if isinstance(handler_type, ast.Tuple) else [handler_type]
        return any(getattr(n, "id", getattr(n, "attr", "")) in (
            "ImportError", "ModuleNotFoundError", "Exception", "BaseException") for n in names)

    def _version_fallback(self, test) -> bool:
        """``if _TORCH_GREATER_EQUAL_2_4 ... else <old API>``: the else serves old torch only."""
        if isinstance(test, ast.Call):
            test = test.func
        name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", "")
        return bool(_TORCH_VERSION_FLAG.search(name))

    def visit_For(self, node) -> None:
        """``for i in range(torch.cuda.device_count()):`` runs its body only under CUDA."""
        iterator = node.iter
        guarded = (isinstance(iterator, ast.Call) and getattr(iterator.func, "id", "") == "range"
                   and any(self.positive_cuda_query(a) for a in iterator.args))
        if (isinstance(iterator, ast.Call) and isinstance(iterator.func, ast.Attribute)
                and iterator.func.attr in ("items", "values")
                and isinstance(iterator.func.value, (ast.Name, ast.Attribute))
                and _STATE_DICT.search(self._name_of(iterator.func.value))):
            # `for k, v in state_dict.items():` converting a checkpoint: its tensors were
            # loaded on the host (map_location="cpu"), so float64 there is host-side.
            # Not `model.state_dict().items()`: a model's own tensors are where it is.
            names = self.host_names.setdefault(self.scopes[-1], set())
            names.update(n.id for n in ast.walk(node.target) if isinstance(n, ast.Name))
        self.visit(node.target)
        self.visit(iterator)
        start = len(self.findings)
        for statement in node.body:
            self.visit(statement)
        if guarded:
            self._cap(self.findings[start:], _GUARDED)
        for statement in node.orelse:
            self.visit(statement)

    visit_AsyncFor = visit_For

    @staticmethod
    def _name_of(node) -> str:
        return node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")

    def visit_Dict(self, node: ast.Dict) -> None:
        # dtype tables ({torch.float64: 67e12}) name a dtype; they create no tensor.
        for key in node.keys:
            if key is not None:
                self.host.update(map(id, ast.walk(key)))
        self.generic_visit(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        guarded = False
        first = len(self.findings)
        for value in node.values:
            start = len(self.findings)
            self.visit(value)
            if guarded:
                self._cap(self.findings[start:], _GUARDED)
            if isinstance(node.op, ast.And) and self.positive_cuda_query(value):
                guarded = True
        # `accelerator == "cuda" or accelerator == "mps"`: a list of backends, not a CUDA-only check.
        if isinstance(node.op, ast.Or) and any(
                isinstance(value, ast.Compare) and any(_OTHER_DEVICE_STRING.match(_string(side) or "")
                                                       for side in (value.left, *value.comparators))
                for value in node.values):
            self._cap([f for f in self.findings[first:] if f.detail.startswith("comparison with")],
                      _LISTS_OTHERS)

    def _device_choice(self, expression: ast.IfExp, replaced) -> bool:
        """`"cuda" if torch.cuda.is_available() else "cpu"` (or with torch.device on
        both sides): the accelerator with a CPU fallback, which is exactly the device line."""
        test = expression.test
        if not (isinstance(test, ast.Call) and self.qualname(test.func) == "torch.cuda.is_available"):
            return False

        def kind(node, wanted) -> str | None:
            value = _string(node)
            if value is not None:
                return "str" if value == wanted else None
            if (isinstance(node, ast.Call) and self.qualname(node.func) == "torch.device"
                    and len(node.args) == 1 and not node.keywords and _string(node.args[0]) == wanted):
                return "device"
            return None

        body, orelse = kind(expression.body, "cuda"), kind(expression.orelse, "cpu")
        if body is None or body != orelse:
            return False
        as_string = body == "str" and replaced is expression
        self.report("TP003", expression, "device chosen by torch.cuda.is_available()",
                    [_replace(replaced, self.device(as_string=as_string))], "2.6", uses_device=True)
        self.claimed.update(map(id, ast.walk(expression)))
        return True

    # -- calls ---------------------------------------------------------------------------------

    def _is_message_call(self, node: ast.Call) -> bool:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if (self.qualname(func) or "").startswith("torch"):
            return False  # torch.log(...) computes; it prints nothing
        return name in _MESSAGE_FUNCTIONS or name.endswith(("Error", "Exception", "Warning"))

    def _mark_host(self, node: ast.Call) -> None:
        """Float64 on the host is fine everywhere: ``device="cpu"``, ``.to("cpu", ...)``,
        and anything followed by ``.cpu()`` / ``.numpy()`` / ``.tolist()`` / ``.item()``."""
        func = node.func
        method = func.attr if isinstance(func, ast.Attribute) else None
        receiver = func.value if isinstance(func, ast.Attribute) else None  # what a method is called on
        device = _keyword(node, "device")
        if method == "to" and node.args:
            device = node.args[0]
        on_host = _string(device) == "cpu" or (
            isinstance(device, ast.Call) and self.qualname(device.func) == "torch.device"
            and device.args and _string(device.args[0]) == "cpu")
        if method in ("to", "cuda") and isinstance(receiver, ast.Call):
            self.moved.add(id(receiver))  # torch.ones(2, dtype=...).to(device): not the host
        if (device is None and _keyword(node, "dtype") is not None and id(node) not in self.moved
                and self.qualname(func) in _FACTORIES):
            on_host = True  # no device=: the tensor is created on the host
        if method == "to" and device is not None and (self.qualname(device) or "").startswith("torch.") and (
                self.qualname(device) != "torch.device"):
            device = None  # .to(torch.float64): a dtype, not a device
        if not on_host and method in ("to", "double", "type") and device is None:
            # `(positions == positions.min()).to(torch.float64)` where `positions` was made
            # on the host: a dtype change keeps the tensor where it is.
            on_host = self._host_tensor(receiver)
        if on_host:
            self.host.update(map(id, ast.walk(node)))
        elif method in _HOST_METHODS and receiver is not None:
            self.host.update(map(id, ast.walk(receiver)))
        elif (method and isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute)
              and receiver.func.attr == "cpu"):
            self.host.update(map(id, ast.walk(node)))  # x.cpu().double()

    def _host_tensor(self, node, seen: frozenset = frozenset()) -> bool:
        """Whether ``node`` is a tensor made on the host, followed through arithmetic,
        method calls and names assigned once: ``x = torch.arange(n, dtype=...)`` (no
        device), then ``d = (x - c).abs()``.  Arithmetic between a host tensor and an
        accelerator tensor fails in torch, so one host operand places the result."""
        if id(node) in self.host and isinstance(node, ast.Call):
            return True
        if isinstance(node, ast.Name):
            if node.id in self.host_names.get(self.scopes[-1], ()):
                return True
            value = self.resolve(node)
            return value is not None and id(value) not in seen and self._host_tensor(value, seen | {id(value)})
        if isinstance(node, ast.BinOp):
            return self._host_tensor(node.left, seen) or self._host_tensor(node.right, seen)
        if isinstance(node, ast.UnaryOp):
            return self._host_tensor(node.operand, seen)
        if isinstance(node, ast.Compare):
            return any(self._host_tensor(side, seen) for side in (node.left, *node.comparators))
        if isinstance(node, ast.Subscript):
            return self._host_tensor(node.value, seen)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("to", "cuda", "type", "pin_memory") and (node.args or node.func.attr == "cuda"):
                return False  # may move it (a dtype-only .to() was marked above)
            return self._host_tensor(node.func.value, seen)
        return False

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("skipIf", "skipUnless", "skipif"):
            # `unittest.skipUnless(torch.cuda.device_count() > 1, ...)`: only decides whether a test runs.
            start = len(self.findings)
            self.generic_visit(node)
            self._cap(self.findings[start:], "only decides whether a test is skipped")
            return
        if self._is_message_call(node):
            self.in_message += 1
            self.generic_visit(node)
            self.in_message -= 1
            return
        if self._built_device_string(node):
            return
        self._mark_host(node)
        qualname = self.qualname(node.func)
        handled = bool(qualname and self._named_call(node, qualname))
        if not handled and isinstance(node.func, ast.Attribute) and not (
                qualname and qualname.startswith(("torch.", "torch_xla."))):
            self._method_call(node, node.func.attr)
        elif not handled and isinstance(node.func, ast.Name) and node.func.id == "getattr" and len(node.args) == 3:
            key = _string(node.args[1])
            if key:
                self._named_default(key, node.args[2], f"getattr default for {key}")
        self._keywords(node, qualname)
        if handled:
            for child in node.args + [kw.value for kw in node.keywords]:
                self.visit(child)
        else:
            self.generic_visit(node)

    def _keywords(self, node: ast.Call, qualname: str | None) -> None:
        torch_call = bool(qualname and qualname.startswith("torch")) or (
            isinstance(node.func, ast.Attribute) and node.func.attr == "to")
        for kw in node.keywords:
            if kw.arg in ("device", "map_location"):
                if (not self._device_literal(kw.value, as_string=not torch_call, what=f"{kw.arg}=")
                        and isinstance(kw.value, ast.Name)):
                    self._device_use(kw.value, f"as {kw.arg}=")
            elif kw.arg == "device_type":
                self._device_literal(kw.value, as_string=True, what="device_type=")
            elif kw.arg == "non_blocking" and isinstance(kw.value, ast.Constant) and kw.value.value is True:
                if self._copies_to_host(node):
                    self.report("TP403", kw, "non_blocking=True copy to the host")
            elif kw.arg == "pin_memory" and isinstance(kw.value, ast.Constant) and kw.value.value is True:
                self.report("TP402", kw, "pin_memory=True")
            elif kw.arg == "pin_memory_device":
                self.report("TP402", kw, "pin_memory_device=")

    def _copies_to_host(self, node: ast.Call) -> bool:
        """``.to("cpu", non_blocking=True)``: the one non-blocking copy whose result
        can be read before it has arrived."""
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr == "to"):
            return False
        device = node.args[0] if node.args else _keyword(node, "device")
        return self.constant_value(device) == "cpu"

    def _method_call(self, node: ast.Call, method: str) -> None:
        if method == "cuda":  # torchport: ignore
            self._dot_cuda(node)
        elif method == "double" and not node.args and not node.keywords:
            if id(node) not in self.host:
                self.report("TP701", node, ".double()", at=_method_token(node))
        elif method == "to" and node.args:
            if (not self._device_literal(node.args[0], as_string=False, what="in .to()")
                    and isinstance(node.args[0], ast.Name)):
                self._device_use(node.args[0], "in .to()")
        elif method == "pin_memory" and not node.args:
            self.report("TP402", node, ".pin_memory()", at=_method_token(node))
        elif method in ("add_argument", "option", "add_option"):
            # argparse / click / optparse: the default is where the user changes it.
            names = [_string(a) or "" for a in node.args]
            name = max(names, key=len) if names else ""
            self._named_default(name, _keyword(node, "default"), f"default of {name}")
        elif method in ("get", "pop", "setdefault") and len(node.args) == 2 and (key := _string(node.args[0])):
            self._named_default(key, node.args[1], f"default for {key}")

    def _dot_cuda(self, node: ast.Call) -> None:
        func = node.func
        end_line, end_column = _end(func)
        rename = Edit((end_line, end_column - len("cuda")), (end_line, end_column), "to")
        keywords_ok = _plain_call(node) and all(kw.arg != "device" for kw in node.keywords)
        edits = None
        # The script's own `device = torch.device(...)` when it has one, so a run on
        # the CPU stays on the CPU.
        own_device = self.device_type_expression(node)[0] == "device.type"
        target = "device" if own_device else DEVICE_NAME
        if keywords_ok and not node.args:
            if node.keywords:
                edits = [rename, _insert(_start(node.keywords[0]), f"{target}, ")]
            else:
                edits = [rename, _insert(_closing_paren(node), target)]
        elif keywords_ok and len(node.args) == 1 and _string(node.args[0]) is None:
            index = node.args[0]
            edits = [rename, _insert(_start(index), f"{self.T}.device({DEVICE_NAME}.type, "),
                     _insert(_end(index), ")")]
        self.report("TP002", node, ".cuda()", edits, "2.6", uses_device=not (own_device and not node.args),
                    at=_method_token(node))

    def _named_call(self, node: ast.Call, qualname: str) -> bool:
        """Calls recognised by their qualified name.  True when the callee was reported."""
        if qualname == "torch.device":
            return self._torch_device(node)
        if qualname == "torch.set_default_device" and node.args:
            self._device_literal(node.args[0], as_string=False, what="default device")
            return False
        if qualname in _AUTOCAST:
            return self._autocast(node)
        if qualname in _GRAD_SCALER:
            return self._grad_scaler(node)
        if qualname in _PROCESS_GROUP:
            return self._process_group(node, qualname)
        if qualname in _CPP_LOAD:
            return self._cpp_load(node, qualname)
        if qualname in _SETUP or qualname.endswith(".setup") and "setuptools" in qualname:
            self._setup(node)
            return False
        if qualname.startswith("torch.cuda."):
            return self._torch_cuda_call(node, qualname)
        rule_id = reference_rule(qualname)
        if rule_id:
            if not (rule_id == "TP701" and id(node) in self.host):
                self.report(rule_id, node.func, f"{qualname}()")
            return True
        return False

    def _torch_device(self, node: ast.Call) -> bool:
        if node.args and isinstance(node.args[0], ast.IfExp):
            if self._device_choice(node.args[0], node):
                self.claimed.update(map(id, ast.walk(node.args[0])))
                return True
            return False
        device_type = _argument(node, 0, "type")
        value = _string(device_type)
        if value is None:
            if isinstance(device_type, ast.Name):
                self._device_use(device_type, "in torch.device()")
            return False
        match = _CUDA_DEVICE.match(value)
        if match and len(node.args) == 1 and not node.keywords:
            self.report("TP001", device_type, f'torch.device("{value}")',
                        [_replace(node, self.device(match.group(1)))], "2.6", uses_device=True)
            self.claimed.add(id(device_type))
            return True
        self._device_literal(device_type, as_string=True, what="in torch.device()")
        return False

    def _torch_cuda_call(self, node: ast.Call, qualname: str) -> bool:
        parts = qualname.split(".")[2:]
        if parts[0] == "memory" and len(parts) > 1:
            parts = parts[1:]
        name = parts[-1] if parts[0] == "amp" else parts[0]
        if parts[0] == "amp" and name == "autocast":
            return self._cuda_amp_autocast(node, qualname)
        if parts[0] == "amp" and name == "GradScaler":
            device_type, uses_device = self.device_type_expression(node)
            edits: list[Edit] | None = [_replace(node.func, f"{self.T}.amp.GradScaler"),
                                        self._first_argument(node, device_type)]
            self.report("TP202", node, f"{qualname}()", edits, "2.4", uses_device=uses_device)
            return True
        if name == "is_available" and len(parts) == 1:
            if id(node) not in self.claimed:
                self.report("TP003", node, "torch.cuda.is_available()")
            return True
        if len(parts) == 1 and name in CUDA_RENAMES:
            rule_id, target, min_torch = CUDA_RENAMES[name]
            safe = not node.keywords and _plain_call(node) and (name != "device" or len(node.args) == 1)
            edits = [_replace(node.func, f"{self.T}.{target}")] if safe else None
            detail = f"{qualname}()"
            if safe and rule_id == "TP102" and self._seeded_already(node, target):
                edits = self._delete_statement(node)
                detail += f" (next to {self.T}.{target}(), which already seeds every device)"
            if name == "device_count":
                finding_cap = ("silent", "torch.cuda.device_count() returns 0 where CUDA is absent; it does not raise")
            else:
                finding_cap = None
            if name == "set_device" and node.args and isinstance(node.args[0], ast.Name):
                self._device_use(node.args[0], "in torch.cuda.set_device()")
                if safe and self._unfixed_device(node.args[0]):
                    edits, detail = None, detail + " with a device string that is not rewritten"
            finding = self.report(rule_id, node, detail, edits, min_torch)
            if finding_cap:
                finding.severity_cap, finding.cap_reason = finding_cap
            return True
        fallback_rule = reference_rule(qualname)
        assert fallback_rule is not None, "every torch.cuda name has a rule"
        self.report(fallback_rule, node.func, f"{qualname}()")
        return True

    def _unfixed_device(self, argument) -> bool:
        definition = self.resolve(argument)
        if definition is None:
            return False
        finding = self.by_node.get(id(definition))
        return finding is not None and finding.fix is None

    def _seeded_already(self, node: ast.Call, target: str) -> bool:
        """Whether the statement block already holds ``torch.<target>(same arguments)``
        (or an earlier CUDA seeding call that becomes it), so the rewrite would duplicate it."""
        statement = self.parents.get(id(node))
        if statement is None:
            return False
        arguments = ast.dump(ast.Tuple(node.args, ast.Load()))
        for sibling in self.blocks.get(id(statement), ()):
            if sibling is statement:
                continue
            if not (isinstance(sibling, ast.Expr) and isinstance(sibling.value, ast.Call)):
                continue
            call = sibling.value
            if ast.dump(ast.Tuple(call.args, ast.Load())) != arguments or call.keywords:
                continue
            qualname = self.qualname(call.func) or ""
            if qualname == f"torch.{target}":
                return True
            before = sibling.lineno < statement.lineno
            if before and qualname.startswith("torch.cuda.") and CUDA_RENAMES.get(
                    qualname.split(".")[-1], ("", ""))[1] == target:
                return True
        return False

    def _delete_statement(self, node: ast.Call) -> list[Edit] | None:
        """Edits removing the seeding statement's lines, or None when it shares a line."""
        statement = self.parents[id(node)]
        (first, _), (last, last_column) = _start(statement), _end(statement)
        before = self.lines[first - 1][:statement.col_offset] if first <= len(self.lines) else ""
        after = self.lines[last - 1].encode("utf-8")[last_column:].decode("utf-8", "replace")
        if before.strip() or (after.strip() and not after.strip().startswith("#")):
            return None
        if last < len(self.lines):
            return [Edit((first, 0), (last + 1, 0), "")]
        return [_replace(statement, "pass")]

    def _first_argument(self, node: ast.Call, text: str) -> Edit:
        """Insert ``text`` as the new first positional argument."""
        items = node.args + node.keywords
        if not items:
            return _insert(_closing_paren(node), text)
        return _insert(min(_start(i) for i in items), text + ", ")

    def _cuda_amp_autocast(self, node: ast.Call, qualname: str) -> bool:
        edits = None
        device, uses_device = self.device_type_expression(node)
        if _plain_call(node) and len(node.args) <= 3:
            edits = [_replace(node.func, f"{self.T}.amp.autocast")]
            # torch.cuda.amp.autocast(enabled, dtype, cache_enabled): positional
            # arguments become keywords after the new device_type argument.
            for keyword, argument in zip(("enabled", "dtype", "cache_enabled"), node.args):
                prefix = f"{device}, " if argument is node.args[0] else ""
                edits.append(_insert(_start(argument), f"{prefix}{keyword}="))
            has_dtype = len(node.args) >= 2 or any(kw.arg == "dtype" for kw in node.keywords)
            if not node.args and node.keywords:
                edits.append(_insert(_start(node.keywords[0]), f"{device}, "))
            dtype = "" if has_dtype else f"dtype={self.T}.float16"
            items = node.args + node.keywords
            if not items:
                edits.append(_insert(_closing_paren(node), f"{device}, {dtype}"))
            elif dtype:
                edits.append(_insert(max(_end(i) for i in items), f", {dtype}"))
        self.report("TP201", node, f"{qualname}()", edits, "2.4", uses_device=uses_device)
        return True

    def _autocast(self, node: ast.Call) -> bool:
        device = _argument(node, 0, "device_type")
        value = self.constant_value(device)
        if value != "cuda" and not (value and _CUDA_DEVICE.match(value)):  # torchport: ignore
            return False
        has_dtype = _argument(node, 1, "dtype") is not None
        edits = []
        if _string(device) is not None:
            edits.append(_replace(device, f"{DEVICE_NAME}.type"))
            self.claimed.add(id(device))
        if not has_dtype:
            last = max(_end(i) for i in node.args + node.keywords)
            edits.append(_insert(last, f", dtype={self.T}.float16"))
        fixable = value == "cuda" and _plain_call(node)  # torchport: ignore
        self.report("TP201", node, f'autocast("{value}")', edits if fixable else None, "2.4",
                    uses_device=bool(edits))
        return True

    def _grad_scaler(self, node: ast.Call) -> bool:
        device = _argument(node, 0, "device")
        value = self.constant_value(device) if device is not None else None
        if device is not None and (value is None or not _CUDA_DEVICE.match(value)):
            return False
        uses_device = True
        if device is None:
            device_type, uses_device = self.device_type_expression(node)
            edits = [self._first_argument(node, device_type)]
            detail = "GradScaler() defaults to device 'cuda'"
        elif _string(device) is not None:
            device_type, uses_device = self.device_type_expression(node)
            edits = [_replace(device, device_type)]
            detail = f'GradScaler("{value}")'
            self.claimed.add(id(device))
        else:
            edits, detail = [], f'GradScaler({device.id}="{value}")'
        self.report("TP202", node, detail, edits if _plain_call(node) else None, "2.4", uses_device=uses_device)
        return True

    def _process_group(self, node: ast.Call, qualname: str) -> bool:
        position = 0 if qualname.endswith("init_process_group") else None
        backend = _argument(node, position, "backend")
        value = self.constant_value(backend) if backend is not None else None
        if not value or "nccl" not in re.split(r"[:,]", value):  # torchport: ignore
            return False
        if _string(backend) == "nccl":  # torchport: ignore
            replacement = f"{self.T}.distributed.get_default_backend_for_device({DEVICE_NAME})"
            self.report("TP401", backend, '"nccl" backend', [_replace(backend, replacement)], "2.6",
                        uses_device=True)
            return False
        definition = self.resolve(backend)
        finding = self.by_node.get(id(definition)) if definition is not None else None
        if finding is None and definition is not None and id(definition) not in self.claimed:
            # Reported where the user would change it: the assignment or default.
            finding = self.report("TP401", definition, f'backend "{value}"')
        if finding is not None:
            self._relate(finding, backend, f"used by {qualname.rsplit('.', 1)[-1]}()")
        else:
            self.report("TP401", backend, f'backend "{value}"')
        return False

    def _cpp_load(self, node: ast.Call, qualname: str) -> bool:
        cuda = False
        for kw in node.keywords:
            if kw.arg in ("cuda_sources", "extra_cuda_cflags") or (
                    kw.arg == "with_cuda" and isinstance(kw.value, ast.Constant) and kw.value.value):
                cuda = True
        for value in ast.walk(node):
            text = _string(value)
            if text and text.endswith((".cu", ".cuh")):
                cuda = True
        if cuda:
            self.report("TP501", node.func, f"{qualname}() with CUDA sources")
            return True
        return False

    def _setup(self, node: ast.Call) -> None:
        for kw in node.keywords:
            if kw.arg in ("install_requires", "extras_require", "setup_requires"):
                for value in ast.walk(kw.value):
                    text = _string(value)
                    hit = classify_requirement(text) if text else None
                    if hit:
                        self.report(hit[0], value, f"dependency {hit[1]}: use {hit[2]}")


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version)[:3]) or (0,)


version_key = _version_key
