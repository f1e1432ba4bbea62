"""Run inside the tpu environment by tests/test_tpu_api.py: look at the real
torch_tpu package and answer with one JSON document on stdout.

    python tests/tpu_api_probe.py '{"torch.tpu": ["eager_mode", ...], "torch.accelerator": [...]}'

For every name the adapters use (the test reads them from
src/torchport/backends/tpu.py): whether it exists, its lifecycle stage as
torch_tpu annotates it (``__tt_api_stage__``), and whether a call with no
arguments binds to its signature, without calling it.  Then what 0.2.0 says
about the rest: which ``torch.tpu`` exports are internal, what calling one
from user code does (``torch.tpu.is_available``: torch_tpu's decorator raises
before the function body runs, so nothing is started), the registered
compile backends, the eager modes, and torch_tpu's own runtime flags at the
end (nothing may have been initialized).

Everything of ``torch.tpu`` is read *statically* (``inspect.getattr_static``
on torch_tpu's TpuDeviceModule class and its metaclass, and torch_tpu's own
export table): some exports are descriptors whose getter starts the TPU
runtime.  ``torch.tpu.default_generators`` does (its ``__get__`` asks the
device backend for the current device): reading it once during development
made libtpu initialize and query the cloud metadata server, which is why no
``getattr(torch.tpu, name)`` is done here except for ``is_available`` (after
checking that torch_tpu's decorator will raise before running it).
"""
from __future__ import annotations

import inspect
import json
import os
import sys

# With this set, internal device calls would warn and run instead of raising.
os.environ.pop("TORCH_TPU_ALLOW_LEGACY_DEVICE_APIS", None)

import importlib  # noqa: E402

import torch  # noqa: E402  (autoloads torch_tpu through its torch.backends entry point)
import torch_tpu  # noqa: E402,F401
import torch_tpu._loader as loader  # noqa: E402
from torch_tpu._internal import execution_mode, public_api  # noqa: E402
from torch_tpu._internal.device import _device_module as device_module  # noqa: E402
from torch_tpu._internal.utils import annotations  # noqa: E402

TPU_EXPORTS = public_api._PUBLIC_MODULES["torch.tpu"].exports


def stage_of(value: object) -> str | None:
    stage = getattr(value, "__tt_api_stage__", None)
    return getattr(stage, "value", stage)


def binds_without_arguments(value: object) -> bool | None:
    try:
        inspect.signature(value).bind()
    except TypeError:
        return False
    except ValueError:  # no signature to read (a builtin)
        return None
    return True


def describe_static(name: str) -> dict:
    """A torch.tpu export, read from the class that defines it, never through
    its descriptor (no getter runs)."""
    if name not in TPU_EXPORTS:
        return {"exists": False}
    target = TPU_EXPORTS[name]
    if isinstance(target, public_api.Property):
        module_name, _, path = target.target.partition(":")
        class_name, _, attribute = path.partition(".")
        descriptor = inspect.getattr_static(getattr(sys.modules[module_name], class_name), attribute)
        return {"exists": True, "kind": "property", "settable": descriptor.fset is not None,
                "stage": stage_of(descriptor.fget)}
    module_name, _, path = target.partition(":")
    class_name, _, attribute = path.partition(".")
    owner_object = getattr(importlib.import_module(module_name), class_name)
    try:
        raw = inspect.getattr_static(owner_object, attribute) if attribute else owner_object
    except AttributeError:
        # Served by the metaclass from the class's __tt_api_stages__ table.
        staged = inspect.getattr_static(owner_object, "__tt_api_stages__", {}).get(attribute)
        if staged is None or staged.value is None:
            return {"exists": False, "problem": f"{target} not found"}
        return {"exists": True, "kind": type(staged.value).__name__, "stage": stage_of(staged.stage) or
                getattr(staged.stage, "value", None)}
    function = getattr(raw, "__func__", raw)
    entry = {"exists": True, "kind": type(raw).__name__, "stage": stage_of(raw) or stage_of(function)}
    if isinstance(raw, classmethod):  # called on the class: cls is filled in
        entry["binds_without_arguments"] = _binds_without_cls(function)
    elif callable(raw) and not isinstance(raw, type):
        entry["binds_without_arguments"] = binds_without_arguments(raw)
    return entry


def _binds_without_cls(function: object) -> bool | None:
    try:
        inspect.signature(function).bind(None)  # cls only
    except TypeError:
        return False
    except ValueError:
        return None
    return True


def describe_accelerator(name: str) -> dict:
    value = getattr(torch.accelerator, name, None)  # torch's own module: plain functions
    if value is None:
        return {"exists": False}
    return {"exists": True, "kind": type(value).__name__, "binds_without_arguments": binds_without_arguments(value)}


def private_fallback(name: str) -> dict:
    """``torch.tpu._x`` names are served from TpuDeviceModule (the export
    table's private_fallback); looked up there statically."""
    raw = inspect.getattr_static(device_module.TpuDeviceModule, name, None)
    if raw is None:
        return {"exists": False}
    return {"exists": True, "kind": type(raw).__name__, "private": True,
            "binds_without_arguments": _binds_without_cls(getattr(raw, "__func__", raw))}


def main(wanted: dict[str, list[str]]) -> dict:
    names: dict = {"torch.tpu": {}, "torch.accelerator": {}}
    for name in wanted.get("torch.tpu", []):
        names["torch.tpu"][name] = private_fallback(name) if name.startswith("_") else describe_static(name)
    for name in wanted.get("torch.accelerator", []):
        names["torch.accelerator"][name] = describe_accelerator(name)
    answer: dict = {"names": names,
                    "internal": sorted(name for name in TPU_EXPORTS
                                       if describe_static(name).get("stage") == "Internal"),
                    "experimental": sorted(name for name in TPU_EXPORTS
                                           if describe_static(name).get("stage") == "Experimental")}
    # torch_tpu's decorator raises before the body runs only when strict and
    # not in its test mode; check both before making the call.
    will_raise = (device_module._STRICT_INTERNAL_DEVICE_APIS and not annotations._internal_apis_allowed_for_testing
                  and "is_available" in answer["internal"])
    answer["internal_calls_raise"] = bool(will_raise)
    if will_raise:
        try:
            torch.tpu.is_available()
            answer["is_available_from_user_code"] = "returned"
        except RuntimeError as exc:
            answer["is_available_from_user_code"] = f"RuntimeError: {exc}"
    answer["dynamo_backends"] = sorted(torch._dynamo.list_backends())
    backend = torch._dynamo.backends.registry.lookup_backend("tpu")
    answer["tpu_backend_class"] = f"{type(backend).__module__}.{type(backend).__name__}"
    answer["eager_modes"] = sorted(member for member in execution_mode.EagerMode.__members__
                                   if not member.startswith("_"))
    answer["eager_mode_setter"] = inspect.getsource(type(execution_mode).eager_mode.fset).strip().splitlines()[-1].strip()
    # The process-group backends are registered only when a device is
    # initialized; read where torch_tpu does it instead of doing it.
    answer["init_device_source_registers"] = [name for name in ("tpu_dist", "tpu")
                                              if f'"{name}", tpu_distributed.create_process_group'
                                              in inspect.getsource(loader._init_device_impl)]
    glue = os.path.join(os.path.dirname(torch_tpu.__file__), "csrc", "common", "glue_2_13_0",
                        "libpywrap_2_13_0_common.so")
    with open(glue, "rb") as handle:
        answer["fused_env_var_in_binary"] = b"TORCH_TPU_DEFER_AND_FUSE" in handle.read()
    answer["runtime"] = {"torch_tpu_loaded": loader._LOADED, "device_initialized": loader._DEVICE_INITIALIZED,
                         "privateuse1_name": torch._C._get_privateuse1_backend_name()}
    answer["versions"] = {"torch": torch.__version__}
    return answer


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
