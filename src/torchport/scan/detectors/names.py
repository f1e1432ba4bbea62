"""Which rule a fully qualified name breaks, composed from the families' tables.

Most rules fire on a name alone (``torch.cuda.synchronize``, ``torch.float64``,
``torch.backends.cudnn.benchmark``): each family lists its ``torch.cuda`` names in
``CUDA_NAMES`` / ``CUDA_RENAMES`` and the others in ``rule_for_name``."""
from __future__ import annotations

from torchport.scan.detectors import (
    backend_flags,
    cuda_runtime,
    devices,
    distributed,
    dtypes,
    mixed_precision,
    native_code,
    torch_xla,
)

# torch.cuda.X -> (rule, torch.<replacement>, min torch) for 1:1 renames.
CUDA_RENAMES: dict[str, tuple[str, str, str]] = {**cuda_runtime.CUDA_RENAMES_HERE, **devices.CUDA_RENAMES}
# torch.cuda.X -> rule, for the names without a safe rewrite.
CUDA_NAMES: dict[str, str] = {**devices.CUDA_NAMES, **cuda_runtime.CUDA_NAMES_HERE, **distributed.CUDA_NAMES}
_NAME_RULES = (backend_flags.rule_for_name, dtypes.rule_for_name, devices.rule_for_name,
               distributed.rule_for_name, native_code.rule_for_name, torch_xla.rule_for_name)

# Modules whose attributes carry the rules; naming the module alone is not a finding.
_NAMESPACES = {"torch.cuda.amp", "torch.cuda.memory", "torch.cuda.random", "torch.backends.cuda.matmul",
               # an alias of torch.OutOfMemoryError, defined on every build: `except` it anywhere
               "torch.cuda.OutOfMemoryError"}
# qualified name -> rule (or None): a scan meets the same few hundred names again and again.
_CACHE: dict[str, str | None] = {}


def reference_rule(qualname: str) -> str | None:
    """The rule for a use of this fully qualified name, or None if it is portable."""
    try:
        return _CACHE[qualname]
    except KeyError:
        rule_id = _CACHE[qualname] = _lookup(qualname)
        return rule_id


def _lookup(qualname: str) -> str | None:
    if qualname in _NAMESPACES:
        return None
    if qualname.startswith("torch.cuda."):
        parts = qualname.split(".")[2:]
        if parts[0] == "memory" and len(parts) > 1:
            parts = parts[1:]
        if parts[0] == "amp":
            return mixed_precision.AMP_NAMES.get(parts[-1], mixed_precision.AMP_DEFAULT) if len(
                parts) > 1 else mixed_precision.AMP_DEFAULT
        name = parts[0]
        if name in CUDA_RENAMES:
            return CUDA_RENAMES[name][0]
        if name in CUDA_NAMES:
            return CUDA_NAMES[name]
        return devices.cuda_type_rule(name) or cuda_runtime.FALLBACK_RULE
    for rule_for_name in _NAME_RULES:
        rule_id = rule_for_name(qualname)
        if rule_id:
            return rule_id
    return None
