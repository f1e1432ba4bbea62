"""Where the app's model, optimizer and data were built: the cause lines.

The step trace sees where a problem *shows up* (the loss line runs the float64
matmul, the data factory yields the short batch).  The cause is often earlier,
in construction: the ``.double()`` in the model factory, the ``nn.Linear(100,
37)`` that fixed a layer's sizes, the ``DataLoader(..., batch_size=64)`` whose
``drop_last=False`` leaves a partial last batch.  This recorder runs the app's
factories (in the tracing worker, before the step trace) with a few
interposition points on and writes down, for each thing built, the user's
``file:line`` that built it:

* every ``nn.Module`` (``nn.Module.__init__``): the line that called its
  constructor; when a library built it (``transformers`` making the layers of
  a model, ``nn.TransformerEncoderLayer`` making its ``Linear``), the library's
  line too, and the user's call that reached it;
* every dtype change of a tensor or a module's parameters (``.double()``,
  ``.to(torch.float64)``, ``torch.from_numpy`` of a float64 array, a
  ``dtype=torch.float64`` factory) seen by a ``TorchFunctionMode``, and every
  ``torch.set_default_dtype``;
* every ``DataLoader`` made: its line, ``batch_size``, ``drop_last`` and the
  dataset's length.

The findings (``torchport.trace.findings``) read this to point at the cause and
keep the step line as ``seen_at``.  The same data factory wrapper catches a
factory that hands out one iterator on every call (spent after one epoch).
"""
from __future__ import annotations

import functools

import linecache
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NotRequired, TypedDict

import torch
from torch.overrides import TorchFunctionMode

from torchport.app import is_user_file, library_file
from torchport.errors import UserError

WIDE_DTYPES = ("float64", "complex128")
MAX_MODULES = 5000  # a large library model has thousands; the findings need only those that run
MAX_EVENTS = 200
CODE_CHARS = 200


class Site(TypedDict):
    """Where something was built: the user's line and its code, and the library line below it, if any."""

    location: str | None
    code: str | None
    library_location: NotRequired[str]
    library: NotRequired[str]


class BuiltModule(Site):
    role: str | None  # the factory that ran: model, optimizer, data, app


class ModuleSite(BuiltModule):
    type: str
    sizes: str
    parameter_shapes: list[list[int]]


class LoaderSite(Site):
    role: str | None
    batch_size: int | None
    drop_last: bool
    dataset_length: int | None
    num_workers: int


class DefaultDtype(Site):
    dtype: str
    role: str | None


# A call that made tensors of a floating dtype its inputs did not have ("from" is a keyword: functional form).
DtypeChange = TypedDict("DtypeChange", {"call": str, "from": str | None, "to": str, "role": str | None, "count": int,
                                        "location": str | None, "code": str | None,
                                        "library_location": NotRequired[str], "library": NotRequired[str]})


class Construction(TypedDict):
    """The recorder's plain-data result (``trace["construction"]``; the parent reads it as
    ``records.TraceConstruction``)."""

    modules: dict[str, ModuleSite]
    parameter_dtypes: dict[str, int]
    model_dtype: str | None
    dtype_changes: list[DtypeChange]
    default_dtype: list[DefaultDtype]
    data_loaders: list[LoaderSite]


def _dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def site(frame: Any, building: Any = None) -> Site:
    """The innermost user frame from ``frame`` outwards (``location``), the
    source text of that line (``code``) and the innermost library frame below
    it (``library_location``).  Frames that are ``building``'s own
    ``__init__`` (a module's class and its bases constructing it) are skipped:
    the cause is whoever called the constructor, not the constructor."""
    library = None
    while frame is not None:
        code = frame.f_code
        if building is not None and code.co_name == "__init__" and frame.f_locals.get("self") is building:
            frame = frame.f_back
            continue
        filename = code.co_filename
        if is_user_file(filename):
            text = linecache.getline(filename, frame.f_lineno).strip()[:CODE_CHARS]
            found: Site = {"location": f"{filename}:{frame.f_lineno}", "code": text or None}
            if library is not None:
                found["library_location"] = library
                found["library"] = library.split("/", 1)[0].split(":")[0]
            return found
        if library is None:
            inside = library_file(filename)
            if inside is not None:
                library = f"{inside}:{frame.f_lineno}"
        frame = frame.f_back
    nowhere: Site = {"location": None, "code": None}
    if library:
        nowhere["library_location"] = library
        nowhere["library"] = library.split("/", 1)[0].split(":")[0]
    return nowhere


def _floating_dtypes(value: Any, found: set[str]) -> set[str]:
    if isinstance(value, torch.Tensor):
        if value.is_floating_point() or value.is_complex():
            found.add(_dtype_name(value.dtype))
    elif isinstance(value, (list, tuple)):
        for item in value:
            _floating_dtypes(item, found)
    return found


class ConstructionRecorder:
    """Records construction while ``recording(role)`` is active; ``summary(model)``
    is the plain-data result (``trace["construction"]``)."""

    def __init__(self) -> None:
        self.modules: dict[int, BuiltModule] = {}
        self._built: list[Any] = []  # keeps recorded modules alive so their ids are not reused
        self.dtype_changes: dict[tuple, DtypeChange] = {}
        self.default_dtype: list[DefaultDtype] = []
        self.data_loaders: list[LoaderSite] = []
        self.role: str | None = None
        self._data_called = False

    # ---- interposition ------------------------------------------------------------------
    @contextmanager
    def recording(self, role: str) -> Iterator[None]:
        """Run one factory (``role``: app, model, optimizer, data) with the
        recorder's hooks on; they are removed afterwards, also on error."""
        from torch.utils.data import DataLoader

        recorder = self
        previous_role, self.role = self.role, role
        module_init = torch.nn.Module.__init__
        loader_init = DataLoader.__init__
        set_default_dtype = torch.set_default_dtype
        from_numpy = torch.from_numpy

        def recording_module_init(module: Any, *args: Any, **kwargs: Any) -> None:
            if id(module) not in recorder.modules and len(recorder.modules) < MAX_MODULES:
                recorder.modules[id(module)] = {"role": recorder.role, **site(sys._getframe(1), building=module)}
                recorder._built.append(module)
            module_init(module, *args, **kwargs)

        def recording_loader_init(loader: Any, dataset: Any, *args: Any, **kwargs: Any) -> None:
            loader_init(loader, dataset, *args, **kwargs)
            try:
                length = len(dataset)
            except TypeError:
                length = None
            entry: LoaderSite = {**site(sys._getframe(1), building=loader), "role": recorder.role,
                     "batch_size": loader.batch_size, "drop_last": bool(loader.drop_last), "dataset_length": length,
                     "num_workers": loader.num_workers}
            # The factory runs again for the shape scan: the same loader is one entry.
            if entry not in recorder.data_loaders and len(recorder.data_loaders) < MAX_EVENTS:
                recorder.data_loaders.append(entry)

        def recording_set_default_dtype(dtype: Any) -> None:
            set_default_dtype(dtype)
            if len(recorder.default_dtype) < MAX_EVENTS:
                recorder.default_dtype.append({"dtype": _dtype_name(dtype), "role": recorder.role,
                                               **site(sys._getframe(1))})

        def recording_from_numpy(array: Any) -> Any:
            # Not a torch function (no TorchFunctionMode sees it), and the usual
            # way float64 gets in: numpy's default dtype.
            tensor = from_numpy(array)
            recorder.record_dtype("torch.from_numpy()", set(), _floating_dtypes(tensor, set()), sys._getframe(1))
            return tensor

        torch.from_numpy = recording_from_numpy  # type: ignore[assignment]
        torch.nn.Module.__init__ = recording_module_init  # type: ignore[method-assign, assignment]
        DataLoader.__init__ = recording_loader_init  # type: ignore[method-assign, assignment]
        torch.set_default_dtype = recording_set_default_dtype
        try:
            with _DtypeWatch(self):
                yield
        finally:
            torch.nn.Module.__init__ = module_init  # type: ignore[method-assign]
            DataLoader.__init__ = loader_init  # type: ignore[method-assign]
            torch.set_default_dtype = set_default_dtype
            torch.from_numpy = from_numpy
            self.role = previous_role

    def record_dtype(self, call: str, before: set[str], after: set[str], frame: Any) -> None:
        """A call whose floating output dtype is not among its inputs': a
        conversion (``.double()``) or a creation (``torch.from_numpy``).  A
        creation in the default dtype is the normal case, not a change (and a
        changed default is recorded where it was set)."""
        new = after - before
        if not before:
            new.discard(_dtype_name(torch.get_default_dtype()))
        for dtype in sorted(new):
            where = site(frame)
            key = (where["location"], where.get("library_location"), call, dtype, self.role)
            entry = self.dtype_changes.get(key)
            if entry is None:
                if len(self.dtype_changes) >= MAX_EVENTS:
                    return
                entry = self.dtype_changes[key] = {
                    "call": call, "from": "/".join(sorted(before)) or None, "to": dtype, "role": self.role,
                    "count": 0, **where}
            entry["count"] += 1

    # ---- the data factory -----------------------------------------------------------------
    def data_factory(self, factory: Callable[[], Any]) -> Callable[[], Any]:
        """The app's data factory, recorded on every call.  A factory that hands
        out one iterator on every call is spent after one epoch; it is caught on
        its first call (a generator function's new generator runs nothing until
        iterated, so asking twice costs nothing)."""
        from torchport.engine import function_location

        @functools.wraps(factory)  # errors name the app's factory line, not this wrapper's
        def recorded() -> Any:
            # The caller (BatchStream, the shape scan) turns the factory's own
            # exceptions into a UserError at the user's line.
            with self.recording("data"):
                data = factory()
                if not self._data_called:
                    self._data_called = True
                    if _is_iterator(data) and factory() is data:
                        raise UserError(
                            f"the app's data factory returns the same {type(data).__name__} on every call, and it "
                            "is spent after one epoch: create it inside the factory (return a list, a DataLoader "
                            "or a new generator)", location=function_location(factory))
            return data

        return recorded

    # ---- results -------------------------------------------------------------------------
    def summary(self, model: Any = None) -> Construction:
        modules: dict[str, ModuleSite] = {}
        parameter_dtypes: dict[str, int] = {}
        if model is not None:
            for name, module in model.named_modules():
                where = self.modules.get(id(module))
                if where is None or len(modules) >= MAX_MODULES:
                    continue
                sizes = ""
                try:
                    sizes = module.extra_repr()[:CODE_CHARS]
                except Exception:  # a user module's extra_repr is user code: a failure just leaves it out
                    pass
                shapes = [list(p.shape) for p in module.parameters(recurse=False)][:8]
                modules[name or "(model)"] = {"type": type(module).__name__, "sizes": sizes,
                                              "parameter_shapes": shapes, **where}
            for parameter in model.parameters():
                dtype = _dtype_name(parameter.dtype)
                parameter_dtypes[dtype] = parameter_dtypes.get(dtype, 0) + parameter.numel()
        model_dtype = (max(parameter_dtypes, key=parameter_dtypes.__getitem__) if parameter_dtypes else None)
        return {
            "modules": modules,
            "parameter_dtypes": parameter_dtypes,
            "model_dtype": model_dtype,
            "dtype_changes": list(self.dtype_changes.values()),
            "default_dtype": self.default_dtype,
            "data_loaders": self.data_loaders,
        }


def _is_iterator(data: Any) -> bool:
    try:
        return iter(data) is data
    except TypeError:
        return False


class _DtypeWatch(TorchFunctionMode):
    """Sees every torch call during construction and records those whose
    floating output dtype is new (not among the inputs')."""

    def __init__(self, recorder: ConstructionRecorder):
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        after = _floating_dtypes(out, set())
        if after:
            before = _floating_dtypes(list(args) + list(kwargs.values()), set())
            if after - before:
                self.recorder.record_dtype(_call_name(func), before, after, sys._getframe(1))
        return out


def _call_name(func: Any) -> str:
    name = getattr(func, "__name__", repr(func))
    qualified = getattr(func, "__qualname__", name)
    if qualified.startswith("TensorBase.") or qualified.startswith("Tensor."):
        return f"Tensor.{name}()"
    module = getattr(func, "__module__", None) or "torch"
    return f"{'torch' if module.startswith('torch') else module}.{name}()"
