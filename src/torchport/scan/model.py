"""What a scan produces: findings (with an optional fix) and skipped files."""
from __future__ import annotations

from dataclasses import dataclass, field


# What `Finding.default_of` marks: a module-level function, a class's `__init__` or a method.
DEFAULT_OF_FUNCTION, DEFAULT_OF_CLASS, DEFAULT_OF_METHOD = "function", "class", "method"


def default_of_kind(in_class: bool, function_name: str) -> str:
    """What a default of ``function_name`` belongs to, for ``Finding.default_of``."""
    if not in_class:
        return DEFAULT_OF_FUNCTION
    return DEFAULT_OF_CLASS if function_name == "__init__" else DEFAULT_OF_METHOD


@dataclass(frozen=True)
class Edit:
    """Replace source[start:end] with text.  Positions are (line, column) as ``ast``
    gives them: lines from 1, columns in UTF-8 bytes from 0."""

    start: tuple[int, int]
    end: tuple[int, int]
    text: str


@dataclass(frozen=True)
class Fix:
    edits: tuple[Edit, ...]
    min_torch: str  # the oldest torch on which the rewritten code runs
    uses_device: bool = False  # needs the module-level ACCELERATOR_DEVICE line
    uses_torch: bool = False  # needs a name bound to the torch module
    uses_helper: bool = False  # needs the module-level accelerator_device() function
    # The rewrite to use where the code runs only where CUDA is present (inside a CUDA
    # check): no availability guard of its own.  None: ``edits`` serve everywhere.
    bare_edits: tuple[Edit, ...] | None = None

    def chosen(self, cuda_only: bool) -> tuple[Edit, ...]:
        """The edits to apply; ``cuda_only``: the code runs only where CUDA is present."""
        return self.bare_edits if cuda_only and self.bare_edits is not None else self.edits


@dataclass(frozen=True)
class Related:
    """A second place that matters for a finding: where a device string defined
    elsewhere is used.  Same conventions as Finding's positions."""

    line: int
    column: int
    end_line: int
    end_column: int
    message: str


@dataclass(frozen=True)
class Fallback:
    """What a call must hand a parameter to reach its function's own CUDA fallback: the value the
    function tests for (None of ``if device is None``, "auto" of ``if device == "auto"``), or any
    false value (``device or "cuda"``); and whether leaving the parameter out reaches it, which
    its default decides (``def f(device="cpu"): device = device or pick()`` never does)."""
    value: object = None
    falsy: bool = False
    omitted: bool = True

    def reached_by(self, constant: object) -> bool:
        """Whether a call passing this constant takes the fallback."""
        return not constant if self.falsy else constant == self.value


@dataclass
class Finding:
    rule_id: str
    path: str
    line: int
    column: int  # 1-based, in characters
    end_line: int
    end_column: int
    detail: str  # what was matched, e.g. "torch.cuda.synchronize()"
    snippet: str = ""  # the source line, for excerpts and suppression comments
    fix: Fix | None = None
    fixable: bool = False  # set by the scanner: a fix exists and the torch version allows it
    fix_note: str = ""  # why a fixable rule's finding is not fixed here
    related: list[Related] = field(default_factory=list)
    # "info" when the code only runs where CUDA is present (inside a CUDA guard) or
    # sits in a guard that already has a branch for other accelerators.
    severity_cap: str | None = None
    cap_reason: str = ""
    # "error" where the code shows the check is louder than its rule says (the path without CUDA
    # raises); cap_reason then says why.
    raised_to: str | None = None
    # A parameter default that no call in its own file reaches: (function, class or method
    # name, parameter, position in a call, whether `**kwargs` in a call counts as passing it,
    # DEFAULT_OF_FUNCTION, _CLASS or _METHOD).  The whole scan then checks the other files' calls.
    default_of: tuple[str, str, int | None, bool, str] | None = None
    # The default is one the function replaces by CUDA (``if device is None: device = "cuda"``,
    # ``if device == "auto": ...``): which calls reach that replacement.
    default_falls_back: Fallback | None = None
    # In functions its file uses only in tests that run only with CUDA: (the functions' names, the
    # reason).  Lowered to info by the whole scan if no other scanned file spells one of the names.
    only_in_cuda_tests: tuple[tuple[str, ...], str] | None = None
    # Targets where the consequence does not happen, as the file shows: a torch.library op
    # registered for CUDA alone here and for the CPU in another registration works on the CPU.
    fine_on: frozenset[str] = frozenset()

    def sort_key(self):
        return (self.path, self.line, self.column, self.rule_id)

    def lower_to_info(self, reason: str) -> None:
        """Report it at info on every target, saying why: what the code around it shows."""
        self.severity_cap = "info"
        self.cap_reason = reason


@dataclass(frozen=True)
class Skipped:
    path: str
    reason: str
    internal: bool = False  # torchport's own analysis failed on the file (a bug), not the file's fault


@dataclass
class UnfinishedPass:
    """A pass over every file's findings that failed inside torchport: the findings it would add
    are missing, and those it would lower are reported more severely."""
    name: str
    reason: str
    bug: bool  # a bug in torchport (not running out of stack or memory)


@dataclass
class CrossFileHints:
    """What one file may contribute to cross_file_guards' passes, read in the workers."""
    gated_imports: list[str] = field(default_factory=list)  # words of the imports under a CUDA query
    # helper name -> words of the imports under ``if helper():``, counted once the helper asks for CUDA
    helper_gated_imports: dict[str, list[str]] = field(default_factory=dict)
    cuda_helpers: list[str] = field(default_factory=list)  # top-level functions without parameters naming a CUDA query
    flags: list[str] = field(default_factory=list)  # ``self`` attributes stored from a CUDA query
    # a CUDA check that may refuse an import at the left margin; functions that may open with one
    refusal_at_margin: bool = False
    opening_checks: list[str] = field(default_factory=list)


@dataclass
class FileResult:
    path: str
    findings: list[Finding] = field(default_factory=list)
    skipped: Skipped | None = None
    extensions: list[str] = field(default_factory=list)  # CUDA extensions the file builds
    unreached: list = field(default_factory=list)  # reachability.Candidate: lowered if no other file names it
    unused_classes: list = field(default_factory=list)  # unused_classes.Candidate: lowered if the package never uses it
    hints: CrossFileHints = field(default_factory=CrossFileHints)
    flag_guarded: list = field(default_factory=list)  # (finding index, flag, class, if line): under `if self.flag:`
    past_removed: list = field(default_factory=list)  # removed_torch.Candidate: lowered unless a file puts it back
    cuda_only_tests: list = field(default_factory=list)  # (first, last) line of each test that runs only with CUDA
