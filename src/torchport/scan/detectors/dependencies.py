"""TP6xx, dependencies: imports of CUDA-only packages and CUDA-only requirements in a
``setup()`` call (requirements files and pyproject.toml are read by ``textfiles.py``)."""
from __future__ import annotations

import ast
import re

from torchport.scan.detectors.state import AnalyzerState
from torchport.scan.detectors.syntax import string_value, walk_nodes
from torchport.scan.packages import CUDA_ONLY_SUBMODULES, classify_import, classify_requirement
from torchport.scan.rules import CUDA_ONLY_PACKAGE, TRITON_KERNEL

# classify_requirement() also names triton in install_requires.
RULE_IDS = (CUDA_ONLY_PACKAGE, TRITON_KERNEL)

_AVAILABILITY_FLAG = re.compile(r"_AVAILABLE$|^_?HAS_|^is_\w+_available$", re.I)
_SETUP = {"setuptools.setup", "distutils.core.setup", "setup"}
# Packages whose availability helpers use a short name: is_bnb_available().
_SHORT_NAMES = {"transformer_engine": "te"}


def _setuptools_setup(qualname: str) -> bool:
    return qualname.endswith(".setup") and "setuptools" in qualname


def imports_checked_package(finding, test) -> bool:
    """``if is_flash_attn_available(): import flash_attn`` or
    ``if _is_package_available("transformer_engine"): from transformer_engine ...``."""
    if finding.rule_id != CUDA_ONLY_PACKAGE or not finding.detail.startswith("import "):
        return False
    package = finding.detail.split()[1].split(".")[0].rstrip(":")
    words = set()
    for node in walk_nodes(test):
        if isinstance(node, ast.Name):
            words.add(node.id)
        elif isinstance(node, ast.Attribute):
            words.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            words.add(node.value.replace("-", "_"))
    short = _SHORT_NAMES.get(package, package)
    return any(package in word or re.search(rf"(?:^|_){short}(?:_|$)", word) for word in words)


# Modules and names of a CUDA-only submodule that hold definitions, not kernels: a
# configuration (``...inference.config``, ``InferenceConfig``) or the base class every
# accelerator's builder derives from (``op_builder.builder.OpBuilder``).
_DEFINITION_MODULES = ("config", "builder")


# DeepSpeed ops that its CPU accelerator (and XPU, MPS, HPU ones) also builds: the import
# resolves to that accelerator's builder (deepspeed.ops.op_builder asks get_accelerator()).
_PORTABLE_OPS = {"OpBuilder", "AsyncIOBuilder", "FusedAdamBuilder", "PinMemoryBuilder", "CCLCommBuilder",
                 "ShareMemCommBuilder", "NotImplementedBuilder", "FusedAdam"}


def _definitions_only(node) -> bool:
    if not isinstance(node, ast.ImportFrom) or not node.module:
        return False
    last = node.module.rsplit(".", 1)[-1]
    if last in _DEFINITION_MODULES or last.endswith("_config"):
        return True  # ...inference.config, ...op_builder.builder
    return all(a.name.endswith("Config") or a.name in _PORTABLE_OPS
               or (a.name.startswith("CPU") and a.name.endswith("Builder")) for a in node.names)


class DependencyDetector(AnalyzerState):
    CALLS = dict.fromkeys(_SETUP, "_setup")
    CALL_PREFIXES = ((_setuptools_setup, "_setup"),)
    IMPORTS = ("_package_import",)

    def _package_import(self, node, module: str) -> bool:
        package = classify_import(module)
        if not package:
            return False
        if package[0] in CUDA_ONLY_SUBMODULES and _definitions_only(node):
            return True  # nothing CUDA is loaded: claimed, not reported
        finding = self.report(CUDA_ONLY_PACKAGE, node, f"import {module}: use {package[1]}")
        if isinstance(node, ast.ImportFrom) and any(_AVAILABILITY_FLAG.search(a.name) for a in node.names):
            # `from pkg.ops._triton import _TRITON_AVAILABLE, triton`: a shim that says
            # whether the kernels exist, so its users have a path without them.
            self._cap([finding], "the import brings an availability flag: a shim with a path without the kernels")
        return True

    def _setup(self, node: ast.Call, qualname: str) -> bool:
        for kw in node.keywords:
            if kw.arg in ("install_requires", "extras_require", "setup_requires"):
                for value in walk_nodes(kw.value):
                    text = string_value(value)
                    hit = classify_requirement(text) if text else None
                    if hit:
                        self.report(hit[0], value, f"dependency {hit[1]}: use {hit[2]}")
        return False
