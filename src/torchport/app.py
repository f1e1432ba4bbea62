"""The app contract: what a user hands to torchport, and how it is found.

An app is device-free.  It says *what* to train (model, data, loss, optimizer,
optionally a quality metric and a forward-only inference scenario); the harness
decides *where* and *how it is timed*: device placement, seeding, dtype and
timing all belong to torchport, so the same app runs unchanged on every backend.

Addresses accepted by :func:`load_app`:

* ``path/to/app.py``            (calls the function ``app`` in that file)
* ``path/to/app.py:function``
* ``package.module:function``
* ``builtin:NAME[?key=value&...]``  (``torchport.builtin.NAME:app(key=value, ...)``;
  the options each built-in takes are in ``torchport.builtin.OPTIONS``)
* ``hf:MODEL_TYPE[?key=value&...]``  a ``transformers`` architecture with random
  weights (``torchport.hf``; needs ``torchport[hf]``)

This module must import on every torch the workers run on (2.9 and newer) and
needs nothing beyond the standard library until an app is loaded.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import sys
import sysconfig
import traceback
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterable

from torchport.errors import UserError

DEFAULT_FUNCTION = "app"
BUILTIN_PREFIX = "builtin:"
HF_PREFIX = "hf:"
# The built-in apps sit above this module (they are apps, written against it):
# it loads them by address, as it loads every app, and never imports them.
BUILTIN_PACKAGE = "torchport.builtin"
HF_APP_MODULE = "torchport.builtin._hf"  # builds the app of an hf: spec


@dataclass(frozen=True)
class App:
    """A training workload with no device in it.

    model:      ``() -> nn.Module``, built on the CPU in float32.
    data:       ``() -> iterable of batches`` (a list, a generator factory or a
                DataLoader).  Batches are tensors or (nested) tuples, lists or
                dicts of tensors.  If it has ``len()``, an epoch is that many steps.
    loss:       ``(model, batch) -> scalar tensor``.
    optimizer:  ``(model) -> torch.optim.Optimizer``.
    metric:     optional ``(model, batch) -> float``: a quality figure.
    predict:    optional ``(model, batch) -> tensor``: the forward-only
                inference scenario, timed separately from training.
    samples:    optional ``(batch) -> int``; default: leading dim of the first tensor.
    tokens:     optional ``(batch) -> int``; when given, throughput is also
                reported in tokens/s.
    """

    model: Callable[[], Any]
    data: Callable[[], Iterable[Any]]
    loss: Callable[[Any, Any], Any]
    optimizer: Callable[[Any], Any]
    name: str = "app"
    description: str = ""
    metric: Callable[[Any, Any], float] | None = None
    metric_name: str = "metric"
    metric_higher_is_better: bool = True
    predict: Callable[[Any, Any], Any] | None = None
    samples: Callable[[Any], int] | None = None
    tokens: Callable[[Any], int] | None = None
    tags: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for role in ("model", "data", "loss", "optimizer"):
            if not callable(getattr(self, role)):
                raise TypeError(f"App.{role} must be callable, got {type(getattr(self, role)).__name__}")


@dataclass(frozen=True)
class AppSpec:
    """A parsed app address; resolving it imports nothing.

    Parsed once per command (``parse_spec``) and preflighted once (``preflight``
    returns it marked); stages and worker jobs receive this record, never the
    text again.  It crosses the process boundary as a plain dict (``to_dict``):
    a worker may run in another environment, with another torch."""

    text: str
    file: Path | None
    module: str | None
    function: str
    # Options of a built-in (``builtin:gpt?size=124m``), passed to its app function.
    options: tuple[tuple[str, str], ...] = ()
    # An ``hf:`` spec, parsed (``torchport.hf.HFSpec``), its batch options folded in.
    hf: Any = field(default=None, compare=False)
    # Set by ``preflight``: the parent's checks passed, they are not run again in this process.
    preflighted: bool = field(default=False, compare=False)

    @property
    def display(self) -> str:
        return self.text

    def to_dict(self) -> dict[str, Any]:
        """The job's ``app`` field: JSON types only."""
        hf_spec = None
        if self.hf is not None:
            hf_spec = {"model_type": self.hf.model_type, "overrides": dict(self.hf.overrides),
                       "batch_size": self.hf.batch_size, "seq_len": self.hf.seq_len}
        return {"text": self.text, "file": None if self.file is None else str(self.file), "module": self.module,
                "function": self.function, "options": [list(pair) for pair in self.options], "hf": hf_spec}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AppSpec:
        hf_spec = None
        if data.get("hf") is not None:
            from torchport.hf import HFSpec

            hf_spec = HFSpec(data["text"], **data["hf"])
        return cls(data["text"], None if data.get("file") is None else Path(data["file"]), data.get("module"),
                   data["function"], tuple((key, value) for key, value in data.get("options") or ()), hf_spec)


# How often this process parsed an app address and preflighted an app: each
# command does each once (tests/test_job_contract.py reads it).
SPEC_WORK: Counter[str] = Counter()


def parse_spec(text: str | None, batch_size: int | None = None, seq_len: int | None = None) -> AppSpec:
    """The app address of a command line; ``batch_size``/``seq_len`` (hf: specs
    only) are folded into it, so that the worker, the result document and the
    config hash all see them."""
    from torchport import hf

    SPEC_WORK["parse"] += 1
    hf.check_batch_options(text, batch_size, seq_len)
    text = (text or f"{BUILTIN_PREFIX}classifier").strip()
    if text.startswith(HF_PREFIX):
        hf_spec = hf.parse(text)  # syntax only; preflight resolves it against transformers
        if batch_size is not None or seq_len is not None:
            hf_spec = hf.with_sizes(hf_spec, batch_size, seq_len)
        return AppSpec(hf_spec.text, None, None, DEFAULT_FUNCTION, hf=hf_spec)
    if text.startswith(BUILTIN_PREFIX):
        name, _, query = text[len(BUILTIN_PREFIX):].partition("?")
        if not name.isidentifier():
            raise UserError(f"invalid built-in app name {name!r}", location=text)
        return AppSpec(text, None, f"{BUILTIN_PACKAGE}.{name}", DEFAULT_FUNCTION, _builtin_options(query, text))
    target, _, function = text.rpartition(":") if _has_function_suffix(text) else (text, "", "")
    function = function or DEFAULT_FUNCTION
    if target.endswith(".py") or os.sep in target or "/" in target:
        return AppSpec(text, Path(target).expanduser(), None, function)
    return AppSpec(text, None, target, function)


def as_spec(app: AppSpec | str | None) -> AppSpec:
    """``app`` itself when already parsed; text (an API caller's) is parsed."""
    return app if isinstance(app, AppSpec) else parse_spec(app)


def spec_from_args(args: Any) -> AppSpec:
    """The app spec of a command line (``app``, ``--batch-size``, ``--seq-len``), parsed."""
    return parse_spec(args.app, getattr(args, "batch_size", None), getattr(args, "seq_len", None))


def _builtin_options(query: str, text: str) -> tuple[tuple[str, str], ...]:
    """``key=value&...`` of a built-in spec; the keys and values are checked
    against ``torchport.builtin.OPTIONS`` by ``preflight``."""
    options = []
    for part in filter(None, query.split("&")):
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise UserError(f"invalid built-in option {part!r}: expected key=value", location=text)
        options.append((key.strip(), value.strip()))
    return tuple(options)


def _has_function_suffix(text: str) -> bool:
    # "C:\\dir\\app.py" has a colon that is not a function separator.
    head, sep, tail = text.rpartition(":")
    return bool(sep) and tail.isidentifier() and bool(head)


def preflight(spec: AppSpec) -> AppSpec:
    """Cheap checks in the parent before any worker starts: the file exists,
    parses, and defines the function.  Imports nothing, except for an ``hf:``
    spec, whose overrides are checked against transformers' config class.
    Returns the spec marked as checked; a checked spec is not checked again."""
    if spec.preflighted:
        return spec
    SPEC_WORK["preflight"] += 1
    _check(spec)
    return replace(spec, preflighted=True)


def _check(spec: AppSpec) -> None:
    if spec.hf is not None:
        from torchport import hf

        hf.check_fits_host(hf.resolve(spec.hf))
        return
    if spec.file is None:
        if spec.module and spec.module.startswith(BUILTIN_PACKAGE + "."):
            name = spec.module.rsplit(".", 1)[1]
            if name not in builtin_names():
                raise UserError(
                    f"unknown built-in app {name!r} (known: {', '.join(builtin_names())})",
                    location=spec.text,
                )
            _check_builtin_options(name, spec)
        elif spec.module:
            _check_module_name(spec)
        return
    path = spec.file
    tree = parse_user_file(path, "app", spec.text)
    names = {
        node.name
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    } | {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    if spec.function not in names:
        known = ", ".join(sorted(n for n in names if not n.startswith("_"))) or "none"
        raise UserError(
            f"app file defines no function {spec.function!r} (top-level names: {known}); "
            f"address it as {path}:FUNCTION",
            location=str(path),
        )


# A module is a file or folder named after it (plus ".py"): a longer part
# cannot exist on any filesystem torchport runs on.
MODULE_PART_BYTES = 250


def _check_module_name(spec: AppSpec) -> None:
    """Caught here rather than in a worker: no module can have this name."""
    from torchport.text import visible_name

    module = str(spec.module)
    parts = module.split(".")
    if not all(part.isidentifier() for part in parts):
        raise UserError(f"app module not found: {visible_name(module)} is not a Python module name "
                        "(an app file ends in .py)", location=spec.text)
    if any(len(part.encode()) > MODULE_PART_BYTES for part in parts):
        raise UserError(f"app module not found: {visible_name(module)}: a name longer than a file name can be",
                        location=spec.text)


def _check_builtin_options(name: str, spec: AppSpec) -> None:
    accepted = importlib.import_module(BUILTIN_PACKAGE).OPTIONS.get(name, {})
    for key, value in spec.options:
        if key not in accepted:
            known = ", ".join(accepted) or "none"
            raise UserError(f"built-in app {name!r} has no option {key!r} (its options: {known})", location=spec.text)
        if value not in accepted[key]:
            raise UserError(f"built-in app {name!r}: {key}={value!r} is not one of {', '.join(accepted[key])}",
                            location=spec.text)


def parse_user_file(path: Path, noun: str, location: str | None = None) -> ast.Module:
    """Parse a user's Python file (an app, a script) without running it; a
    missing, unreadable or unparseable file is one UserError naming where."""
    if not path.exists():
        raise UserError(f"{noun} file not found: {path}", location=location)
    if not path.is_file():
        raise UserError(f"{noun} path is not a file: {path}", location=location)
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {noun} file: {exc}", location=str(path)) from None
    try:
        return ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise UserError(f"syntax error in {noun}: {exc.msg}", location=f"{path}:{exc.lineno}") from None


def builtin_names() -> list[str]:
    folder = Path(__file__).parent / "builtin"
    return sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_"))


def load_app(spec: AppSpec | str | None) -> App:
    """Import the app and call its factory.  User-code failures become a
    UserError located at the user's file:line."""
    spec = as_spec(spec)
    if spec.hf is not None:
        return importlib.import_module(HF_APP_MODULE).app_for(spec.hf)
    preflight(spec)
    try:
        module = _import_target(spec)
    except UserError:
        raise
    except SyntaxError as exc:
        raise UserError(f"syntax error in app: {exc.msg}", location=f"{exc.filename}:{exc.lineno}") from None
    except Exception as exc:
        raise user_error_from(exc, "importing the app failed") from None
    factory = getattr(module, spec.function, None)
    if factory is None:
        raise UserError(f"{spec.function!r} not found in {module.__name__}", location=spec.text)
    if isinstance(factory, App):
        app = factory
    else:
        if not callable(factory):
            raise UserError(f"{spec.function!r} is not callable", location=spec.text)
        try:
            app = factory(**dict(spec.options))
        except Exception as exc:
            raise user_error_from(exc, f"the app factory {spec.function}() raised") from None
    if not isinstance(app, App):
        raise UserError(
            f"{spec.function}() returned {type(app).__name__}, expected torchport.App",
            location=spec.text,
        )
    return app


def _import_target(spec: AppSpec):
    if spec.file is not None:
        path = spec.file.resolve()
        folder = str(path.parent)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        module_name = f"torchport_user_app_{path.stem}"
        module_spec = importlib.util.spec_from_file_location(module_name, path)
        if module_spec is None or module_spec.loader is None:
            raise UserError(f"cannot import {path}", location=str(path))
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_name] = module
        module_spec.loader.exec_module(module)
        return module
    assert spec.module is not None, "an app spec names a file or a module"
    try:
        return importlib.import_module(spec.module)
    except ModuleNotFoundError as exc:
        if exc.name and spec.module.startswith(exc.name):
            raise UserError(f"app module not found: {spec.module}", location=spec.text) from None
        raise


# --- locating the user's code in a traceback -------------------------------------------

def _package_roots() -> set[str]:
    """Every folder installed packages are imported from: this environment's, and those it sees beyond
    it (system site packages, Debian's dist-packages, a .pth naming another venv's, as a remote venv does)."""
    import site

    roots = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *site.getsitepackages()}
    roots |= {entry for entry in sys.path if Path(entry).name in ("site-packages", "dist-packages")}
    return {str(Path(p).resolve()) for p in roots}


_LIBRARY_ROOTS = tuple({str(Path(sysconfig.get_paths()["stdlib"]).resolve()), *_package_roots()})
_TORCHPORT_ROOT = str(Path(__file__).resolve().parent)


def is_user_file(filename: str) -> bool:
    """True for source files that belong to the user's app: not the standard
    library, not an installed package (torch included), not torchport itself.
    The built-in apps count as user code: they stand in for one."""
    if not filename or filename.startswith("<"):
        return False
    resolved = os.path.realpath(filename)
    if resolved.startswith(os.path.join(_TORCHPORT_ROOT, "builtin")):
        return True
    if resolved.startswith(_TORCHPORT_ROOT):
        return False
    return not resolved.startswith(_LIBRARY_ROOTS)


# Torch's own plumbing between a call and its kernel: a frame here is never the
# cause of what the op does (the dispatch of Tensor methods, modes, modules' __call__).
_TORCH_PLUMBING = ("torch/overrides.py", "torch/_tensor.py", "torch/utils/_python_dispatch.py", "torch/_ops.py",
                   "torch/nn/modules/module.py", "torch/utils/_contextlib.py", "torch/_compile.py",
                   "torch/_dynamo/", "torch/autograd/", "torch/_jit_internal.py", "torch/functional.py")
_SITE_ROOTS = tuple(sorted(_package_roots(), key=len, reverse=True))


def library_file(filename: str) -> str | None:
    """For a frame in an installed package (transformers, torch, ...), its path
    inside site-packages (``transformers/masking_utils.py``); None for user code,
    torchport, the standard library and torch's dispatch plumbing."""
    if not filename or filename.startswith("<") or is_user_file(filename):
        return None
    resolved = os.path.realpath(filename)
    if resolved.startswith(_TORCHPORT_ROOT):
        return None
    for root in _SITE_ROOTS:
        if resolved.startswith(root + os.sep):
            relative = resolved[len(root) + 1:].replace(os.sep, "/")
            return None if relative.startswith(_TORCH_PLUMBING) else relative
    return None


def user_location(exc: BaseException) -> str | None:
    """``file:line`` of the innermost traceback frame in user code."""
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if is_user_file(frame.filename):
            found = f"{frame.filename}:{frame.lineno}"
    return found


def user_error_from(exc: BaseException, what: str) -> UserError:
    detail = f"{type(exc).__name__}: {exc}".strip()
    return UserError(f"{what}: {detail}", location=user_location(exc), original=exc)


def make_optimizer(app: App, model: Any) -> Any:
    """``app.optimizer(model)``.  The common ``lambda params: AdamW(params)``
    (a factory that expects parameters, as torch.optim does) fails with a
    TypeError when handed the module; it is then given ``model.parameters()``,
    and only if that fails too is the first error reported (at its line)."""
    try:
        return app.optimizer(model)
    except Exception as exc:
        first = exc
    if isinstance(first, TypeError) and hasattr(model, "parameters"):
        try:
            return app.optimizer(model.parameters())
        except Exception:
            pass
    raise user_error_from(first, "the app's optimizer factory raised") from None


def call_user(function: Callable[[], Any], what: str) -> Any:
    """Call into the user's code; an exception there becomes a UserError that
    says ``what`` failed and where in the user's code."""
    try:
        return function()
    except UserError:
        raise
    except Exception as exc:
        raise user_error_from(exc, what) from None
